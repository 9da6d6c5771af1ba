"""`specab report DIR`: write DIR/report/ (report.md, report.html, figures) from stored results."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report(
        results_dir: Annotated[
            Path, typer.Argument(help="Results directory (results/<experiment>).")
        ],
        out: Annotated[
            Path | None,
            typer.Option("--out", help="Write the report here instead of DIR/report/."),
        ] = None,
        baseline: Annotated[
            str | None, typer.Option("--baseline", help="Baseline arm (default: manifest).")
        ] = None,
        alpha: Annotated[
            float | None, typer.Option("--alpha", help="Significance level (default: manifest).")
        ] = None,
        margin_pos0: Annotated[
            float | None,
            typer.Option("--margin-pos0", help="Margin for acceptance at position 0."),
        ] = None,
        margin_length: Annotated[
            float | None,
            typer.Option("--margin-length", help="Margin for mean accepted length (tokens)."),
        ] = None,
        margin_speed: Annotated[
            float | None,
            typer.Option("--margin-speed", help="Relative margin for tokens/s (0.02 = 2 %)."),
        ] = None,
        by: Annotated[
            str | None,
            typer.Option(
                "--by", help="Break down by category or probe_set (default: category if any)."
            ),
        ] = None,
    ) -> None:
        """Render the verdicts, provenance and figures of a results directory."""
        from bench.commands.options import as_flags, results_dir_not_spec
        from bench.report import render_report

        results_dir_not_spec(results_dir)
        with as_flags():
            page = render_report(
                results_dir,
                out,
                baseline=baseline,
                alpha=alpha,
                margin_pos0=margin_pos0,
                margin_length=margin_length,
                margin_speed=margin_speed,
                by=by,
            )
        typer.echo(f"report {page}")
        typer.echo(f"markdown {page.with_name('report.md')}")
