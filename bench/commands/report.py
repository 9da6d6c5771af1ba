"""`specab report DIR`: write DIR/report/ (report.md, report.html, figures) from stored results."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bench.commands.options import (
    Alpha,
    Baseline,
    By,
    ExcludeBoot,
    Margin,
    MinDraftingShare,
    ResultsDir,
    check_share,
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
    by: By = None,
    exclude_boot: ExcludeBoot = None,
    min_drafting_share: MinDraftingShare = None,
) -> None:
    """Render the verdicts, provenance and figures of a results directory (broken down by
    category by default when the probes carry categories)."""
    from bench.commands.options import as_flags, margins_given, results_dir_not_spec
    from bench.report import render_report
    from bench.stats import AnalysisOptions

    results_dir_not_spec(results_dir)
    margins = margins_given(margin)
    with as_flags():
        options = AnalysisOptions(
            baseline=baseline,
            alpha=alpha,
            margins=margins,
            by=parse_by(by),
            exclude_boots=tuple(exclude_boot or ()),
            min_drafting_share=check_share(min_drafting_share, AnalysisOptions.min_drafting_share),
        )
        page = render_report(results_dir, out, options)
    typer.echo(f"report {page}")
    typer.echo(f"markdown {page.with_name('report.md')}")


def register(app: typer.Typer) -> None:
    app.command("report")(report)
