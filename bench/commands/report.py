"""`specab report DIR`: write DIR/report/ (report.md, report.html, figures) from stored results."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bench.commands.options import (
    Alpha,
    Baseline,
    By,
    Margin,
    MarginLength,
    MarginPos0,
    MarginSpeed,
    ResultsDir,
    parse_by,
)


def report(
    results_dir: ResultsDir,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write the report here instead of DIR/report/."),
    ] = None,
    baseline: Baseline = None,
    alpha: Alpha = None,
    margin: Margin = None,
    margin_pos0: MarginPos0 = None,
    margin_length: MarginLength = None,
    margin_speed: MarginSpeed = None,
    by: By = None,
) -> None:
    """Render the verdicts, provenance and figures of a results directory (broken down by
    category by default when the probes carry categories)."""
    from bench.commands.options import as_flags, margins_given, results_dir_not_spec
    from bench.report import render_report
    from bench.stats import AnalysisOptions

    results_dir_not_spec(results_dir)
    margins = margins_given(margin, margin_pos0, margin_length, margin_speed)
    with as_flags():
        options = AnalysisOptions(
            baseline=baseline,
            alpha=alpha,
            margin_pos0=margins.get("acceptance_pos0"),
            margin_length=margins.get("mean_accepted_length"),
            margin_speed=margins.get("output_tokens_per_s"),
            by=parse_by(by),
        )
        page = render_report(results_dir, out, options)
    typer.echo(f"report {page}")
    typer.echo(f"markdown {page.with_name('report.md')}")


def register(app: typer.Typer) -> None:
    app.command("report")(report)
