"""`specab lint FILE`: known draft/target config mismatches, before any boot."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from bench.commands.options import ExperimentFile

console = Console(highlight=False, soft_wrap=True)


def lint(
    file: ExperimentFile,
    cluster: Annotated[
        bool,
        typer.Option(
            "--cluster",
            help="The boots run on cluster nodes: validate's checks as `validate --cluster` "
            "(a model or build refusal only this machine has is a warning).",
        ),
    ] = False,
    configs_only: Annotated[
        bool,
        typer.Option(
            "--configs-only",
            help="Read the config.json files only, without validate's checks first (no vLLM "
            "import: a typo vLLM would refuse is not found).",
        ),
    ] = False,
) -> None:
    """Known draft/target config mismatches, after validate's checks.

    Reads every arm's effective target and draft config.json (after overlays; local dirs or
    the local Hugging Face cache, no weights) and prints one line per known mismatch: rotary
    geometry, layer ids past a per-layer list, speculation length, vocabulary. A mistake
    validate finds exits 2 with validate's line. Exit 0: no findings; 1: findings; 2: bad
    input."""
    from bench.experiment import lint_file, preflight

    report = lint_file(file) if configs_only else preflight(file, cluster=cluster).lint(file)
    for line in report.lines():
        console.print(line, markup=False)
    checked = "config.json files only (--configs-only: validate's checks not run)"
    summary = report.summary() + (f"; {checked}" if configs_only else "")
    console.print(f"{file}: {summary}", markup=False)
    if report.exit_code:
        raise typer.Exit(report.exit_code)


def register(app: typer.Typer) -> None:
    app.command("lint")(lint)
