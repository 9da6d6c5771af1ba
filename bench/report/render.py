"""`specab report DIR`: DIR/report/ with report.md, a self-contained report.html and the PNGs.

Rendered only from what `store.load_results` reads and `stats.analyze` computes, so any
results directory can be re-rendered later. Everything is rendered in memory first and then
written file by file atomically: a failure leaves no half-written report.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from bench.errors import SpecabError
from bench.records import Results
from bench.report.figures import (
    CAPTIONS,
    plot_accepted_length,
    plot_boot_strip,
    plot_categories,
    plot_drift,
    plot_forest,
    plot_history,
    plot_output_identity,
    plot_positions,
    plot_selection,
    plot_speed,
    plot_timing,
    plot_variance,
)
from bench.report.page import ReportFigure, html_page, markdown_page
from bench.report.sections import sections
from bench.report.tables import (
    analysis_json,
    output_identity,
    probe_temperature,
    variance_table,
)
from bench.stats import Analysis, AnalysisOptions, analyze, probe_columns
from bench.store import atomic_write_bytes, load_results, load_traces


def figure_png(fig: Figure) -> bytes:
    """PNG bytes of a figure via the Agg canvas (no pyplot, no file)."""
    buf = io.BytesIO()
    FigureCanvasAgg(fig).print_png(buf)
    return buf.getvalue()


def analyze_results(results: Results, options: AnalysisOptions = AnalysisOptions()) -> Analysis:
    """The analysis of loaded results; `by` defaults to category when the probes carry
    categories (the report then breaks results down by it)."""
    if options.by is None and has_categories(results):
        options = replace(options, by="category")
    source = str(results.root) if results.root is not None else None
    return analyze(results, options, source=source)


def analysis_or_refusal(results: Results) -> tuple[Analysis | None, SpecabError | None]:
    """The end of a run's one analysis (it feeds the printed tables and the report), or why
    the data were refused (a boot without drafts, a bad manifest setting): the end of a run
    then prints pooled numbers labelled NOT A VERDICT instead of stopping. (None, None):
    no ok boot yet."""
    if results.ok_boots().empty:
        return None, None
    try:
        return analyze_results(results), None
    except SpecabError as exc:
        return None, exc


def has_categories(results: Results) -> bool:
    """Whether any probe carries a category (the report then breaks results down by it)."""
    col = results.probes.get("category")
    return col is not None and bool(col.notna().any())


def build_figures(
    results: Results, analysis: Analysis, identity: pd.DataFrame | None = None
) -> dict[str, Figure]:
    """The report's figures keyed by file stem, in reading order (notebook uses this too).
    `identity`: `output_identity`'s table, when the caller has it already."""
    arms = results.arms()
    base = analysis.baseline
    if identity is None:
        identity = output_identity(results.probes, base, arms)
    return {
        **({"fig0_history": plot_history(analysis.bisection)} if analysis.bisection else {}),
        "fig1_boots": plot_boot_strip(analysis),
        "fig2_forest": plot_forest(analysis),
        "fig3_positions": plot_positions(analysis),
        "fig4_variance": plot_variance(variance_table(analysis), analysis),
        "fig5_timing": plot_timing(results.boots, arms),
        "fig6_identity": plot_output_identity(identity, probe_temperature(results.manifest)),
        "fig7_speed": plot_speed(analysis),
        "fig8_accepted_length": plot_accepted_length(analysis),
        **({"fig9_categories": plot_categories(analysis)} if analysis.breakdown else {}),
        **({"fig10_drift": plot_drift(analysis)} if analysis.drift else {}),
        **({"fig11_selection": plot_selection(analysis)} if analysis.selection else {}),
    }


def render_figures(figures: Mapping[str, Figure]) -> list[ReportFigure]:
    out = []
    for stem, fig in figures.items():
        title, caption = CAPTIONS.get(stem, (stem, ""))
        out.append(ReportFigure(stem, title, caption, figure_png(fig)))
    return out


def render_report(
    results_dir: str | Path,
    out_dir: str | Path | None = None,
    options: AnalysisOptions = AnalysisOptions(),
) -> Path:
    """Load, analyze and write the report (see `write_report`); returns report.html's path.
    It reads the probe columns `analyze` reads and the output hashes (the identity table),
    so its analysis is `analyze`'s (at 10^6 probe rows, the other columns were 280 MB)."""
    results = load_results(results_dir, (*probe_columns(options.by), "output_sha256"))
    return write_report(results, analyze_results(results, options), out_dir)


def write_report(results: Results, analysis: Analysis, out_dir: str | Path | None = None) -> Path:
    """Write report.md, report.html, analysis.json and the PNGs of an analysis already made;
    return the report.html path. Everything is rendered before the first file is written."""
    if out_dir is not None:
        out = Path(out_dir)
    elif results.root is not None:
        out = results.root / "report"
    else:  # a caller's mistake, not a user's input
        raise ValueError("results built in memory have no directory: pass out_dir")
    identity = output_identity(results.probes, analysis.baseline, results.arms())
    figures = render_figures(build_figures(results, analysis, identity))
    traces = load_traces(results.root) if results.root is not None else []
    parts = sections(results, analysis, identity, traces)
    title = f"specab report: {results.experiment}"
    md, page = markdown_page(title, parts, figures), html_page(title, parts, figures)
    for f in figures:
        atomic_write_bytes(out / f"{f.stem}.png", f.png)
    atomic_write_bytes(
        out / "analysis.json",
        (json.dumps(analysis_json(analysis), indent=2, allow_nan=False) + "\n").encode(),
    )
    atomic_write_bytes(out / "report.md", md.encode())
    atomic_write_bytes(out / "report.html", page.encode())
    return out / "report.html"
