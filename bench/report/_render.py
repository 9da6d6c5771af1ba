"""`specab report DIR`: DIR/report/ with report.md, a self-contained report.html and the PNGs.

Rendered only from what `store.load_results` reads and `stats.analyze` computes, so any
results directory can be re-rendered later. Everything is rendered in memory first and then
written file by file atomically: a failure leaves no half-written report.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from bench.records import METRICS
from bench.report._plots import plot_boot_strip, plot_forest, plot_positions
from bench.report._plots_runs import plot_output_identity, plot_timing, plot_variance
from bench.report._provenance import provenance
from bench.report._tables import (
    failed_attempts,
    identity_summary,
    output_identity,
    probe_temperature,
    variance_table,
    verdict_table,
)
from bench.stats import Analysis, MetricEstimate, analyze
from bench.store import Results, atomic_write_bytes, load_results


@dataclass(frozen=True)
class ReportFigure:
    """One rendered figure: file stem, heading, one-line caption and PNG bytes."""

    stem: str
    title: str
    caption: str
    png: bytes


def figure_png(fig: Figure) -> bytes:
    """PNG bytes of a figure via the Agg canvas (no pyplot, no file)."""
    buf = io.BytesIO()
    FigureCanvasAgg(fig).print_png(buf)
    return buf.getvalue()


def analyze_results(results: Results, **analyze_options: Any) -> Analysis:
    """The analysis of loaded results (options as `bench.stats.analyze`)."""
    opts = {k: v for k, v in analyze_options.items() if v is not None}
    return analyze(
        results.probes, results.boots, results.manifest, source=str(results.root), **opts
    )


def build_figures(results: Results, analysis: Analysis) -> dict[str, Figure]:
    """The report's figures keyed by file stem, in reading order (notebook uses this too)."""
    arms = results.arms()
    base = analysis.baseline
    return {
        "fig1_boots": plot_boot_strip(analysis),
        "fig2_forest": plot_forest(analysis),
        "fig3_positions": plot_positions(analysis),
        "fig4_variance": plot_variance(variance_table(analysis), analysis),
        "fig5_timing": plot_timing(results.boots, arms),
        "fig6_identity": plot_output_identity(
            output_identity(results.probes, base, arms), probe_temperature(results.manifest)
        ),
    }


CAPTIONS = {
    "fig1_boots": (
        "Per-boot acceptance",
        "Each point is one boot (ratio of sums over its probes) at its launch position; drift "
        "over time or a bad node shows as a trend or an outlier; a failed attempt leaves a gap "
        "(see the boot-time figure). Right: each arm's estimate and interval, computed from "
        "boot-to-boot variation (an arrow marks an interval cut at the metric's range).",
    ),
    "fig2_forest": (
        "Each arm minus baseline",
        "Difference with the interval its verdict rests on (thick: Holm-compatible across the "
        "family of primary metrics; for equivalent, the TOST interval) and the raw interval "
        "(dashed); the grey band is the pre-registered ± margin.",
    ),
    "fig3_positions": (
        "Acceptance per draft position",
        "Cumulative: share of drafts whose first k+1 tokens were all accepted. Conditional: "
        "acceptance at k given k−1 was accepted. Intervals hold jointly over positions; "
        "positions k ≥ 1 are secondary metrics.",
    ),
    "fig4_variance": (
        "Variance components and planning",
        "Standard deviations by source: the SD of a boot's metric (what the intervals use) "
        "and the crossed-ANOVA components of the per-(boot, prompt) cells. Prompts dominate "
        "a cell but are shared by every arm and cancel; the between-boot part does not. "
        "Right: boots per arm for the stated power at max(|difference|, margin).",
    ),
    "fig5_timing": (
        "Boot and probe time",
        "Seconds from server start to /health, and for the measured probes, per attempt; "
        "failed attempts are red crosses and listed with their errors.",
    ),
    "fig6_identity": (
        "Output identity",
        "Probes whose generated text (output_sha256) differs from the baseline's. For greedy "
        "probes different text means different work, so acceptance is not directly "
        "comparable; with sampling (temperature > 0) differences are expected.",
    ),
}


def render_figures(figures: Mapping[str, Figure]) -> list[ReportFigure]:
    out = []
    for stem, fig in figures.items():
        title, caption = CAPTIONS.get(stem, (stem, ""))
        out.append(ReportFigure(stem, title, caption, figure_png(fig)))
    return out


def render_report(
    results_dir: str | Path, out_dir: str | Path | None = None, **analyze_options: Any
) -> Path:
    """Load, analyze and write the report (see `write_report`); returns report.html's path.

    `analyze_options` go to `bench.stats.analyze` (baseline, alpha, margin_pos0, margin_length).
    """
    results = load_results(results_dir)
    return write_report(results, analyze_results(results, **analyze_options), out_dir)


def write_report(results: Results, analysis: Analysis, out_dir: str | Path | None = None) -> Path:
    """Write report.md, report.html, analysis.json and the PNGs of an analysis already made;
    return the report.html path. Everything is rendered before the first file is written."""
    out = Path(out_dir) if out_dir is not None else results.root / "report"
    figures = render_figures(build_figures(results, analysis))
    sections = _sections(results, analysis)
    md = _markdown(results, analysis, sections, figures)
    page = _html(results, analysis, sections, figures)
    for f in figures:
        atomic_write_bytes(out / f"{f.stem}.png", f.png)
    atomic_write_bytes(
        out / "analysis.json",
        (json.dumps(analysis.to_json(), indent=2, allow_nan=False) + "\n").encode(),
    )
    atomic_write_bytes(out / "report.md", md.encode())
    atomic_write_bytes(out / "report.html", page.encode())
    return out / "report.html"


# ---- text sections -------------------------------------------------------------------------

Section = tuple[str, str, pd.DataFrame | None]  # heading, paragraph, optional table


def _sections(results: Results, analysis: Analysis) -> list[Section]:
    arms = results.arms()
    base = analysis.baseline
    prov = provenance(results, base)
    verdicts = verdict_table(analysis)
    identity = output_identity(results.probes, base, arms)
    failed = failed_attempts(results.boots)
    notes = analysis.notes
    arm_rows = pd.DataFrame(
        [
            {
                "arm": a.arm,
                "boots": a.boots,
                "failed": a.failed_boots,
                "effective boots": "—" if a.effective_boots is None else f"{a.effective_boots:.1f}",
                **{m: _est(a.metrics.get(m)) for m in METRICS},
            }
            for a in analysis.arms
        ]
    )
    ident_text = identity_summary(identity, base, probe_temperature(results.manifest))
    where = (
        f"vLLM {', '.join(prov['vllm_versions']) or '—'}; hosts "
        f"{', '.join(prov['hosts']) or '—'}; GPUs {', '.join(prov['gpus']) or '—'}; "
        f"probe sets {', '.join(prov['probe_sets']) or '—'}; "
        f"spec sha256 {prov['spec_sha256'] or '—'}; specab {prov['specab_version'] or '—'}; "
        f"created {prov['created_at'] or '—'}."
    )
    return [
        (
            "Verdicts",
            f"Baseline **{base}**, α = {analysis.alpha}. Each verdict rests on the interval "
            "beside it (Holm-compatible across the primary family; TOST for equivalent); the "
            "raw interval is shown too."
            + ("" if len(verdicts) else " No comparison: only one arm has results."),
            verdicts,
        ),
        ("Arms", "Estimates with their intervals, from ok boots only.", arm_rows),
        ("Provenance", where, prov["arms"]),
        ("Output identity", ident_text, identity),
        *([("Notes", " ".join(f"{n.rstrip('.')}." for n in notes), None)] if notes else []),
        (
            "Failed attempts",
            f"{len(failed)} failed boot attempt(s); they are kept as records and excluded.",
            failed if len(failed) else None,
        ),
    ]


def _est(m: MetricEstimate | None) -> str:
    if m is None or m.estimate is None:
        return "—"
    lo, hi = m.ci_low, m.ci_high
    ci = f" [{lo:.4f}, {hi:.4f}]" if lo is not None and hi is not None else ""
    return f"{m.estimate:.4f}{ci}"


def _md_table(df: pd.DataFrame) -> str:
    def cell(v: Any) -> str:
        return " ".join(str(v).split()).replace("|", "\\|")

    head = "| " + " | ".join(cell(c) for c in df.columns) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def verdict_markdown(analysis: Analysis) -> str:
    """The verdict table as GitHub-flavoured markdown, for CI job summaries."""
    table = verdict_table(analysis).drop(columns=["method"])
    parts = [
        f"### specab {analysis.experiment}: each arm vs {analysis.baseline} (α = {analysis.alpha})",
        "",
        _md_table(table) if len(table) else "No comparison: only one arm has results.",
        "",
    ]
    parts += [f"- note: {n}" for n in analysis.notes]
    return "\n".join(parts).rstrip() + "\n"


def _markdown(
    results: Results,
    analysis: Analysis,
    sections: list[Section],
    figures: list[ReportFigure],
) -> str:
    parts = [f"# specab report: {results.experiment}", ""]
    for heading, text, table in sections:
        parts += [f"## {heading}", "", text, ""]
        if table is not None and len(table):
            parts += [_md_table(table), ""]
    parts += ["## Figures", ""]
    for f in figures:
        parts += [f"### {f.title}", "", f.caption, "", f"![{f.title}]({f.stem}.png)", ""]
    return "\n".join(parts)


_CSS = """
body{font-family:system-ui,sans-serif;max-width:1180px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.9em}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3} img{max-width:100%;border:1px solid #eee}
.caption{color:#444;max-width:60em}
"""


def _inline_md(text: str) -> str:
    """Escape, then turn **bold** into <strong>; the only markup the sections use."""
    out, bold = [], False
    for i, piece in enumerate(html.escape(text).split("**")):
        if i:
            out.append("</strong>" if bold else "<strong>")
            bold = not bold
        out.append(piece)
    return "".join(out)


def _html(
    results: Results,
    analysis: Analysis,
    sections: list[Section],
    figures: list[ReportFigure],
) -> str:
    title = html.escape(f"specab report: {results.experiment}")
    parts = [
        "<!doctype html>",
        f'<html lang="en"><head><meta charset="utf-8"><title>{title}</title>',
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{title}</h1>",
    ]
    for heading, text, table in sections:
        parts.append(f"<h2>{html.escape(heading)}</h2><p>{_inline_md(text)}</p>")
        if table is not None and len(table):
            parts.append(table.to_html(index=False, escape=True, border=0, na_rep="—"))
    parts.append("<h2>Figures</h2>")
    for f in figures:
        data = base64.b64encode(f.png).decode()
        parts.append(
            f"<h3>{html.escape(f.title)}</h3><p class='caption'>{html.escape(f.caption)}</p>"
            f'<img alt="{html.escape(f.title)}" src="data:image/png;base64,{data}">'
        )
    parts.append("</body></html>")
    return "\n".join(parts)
