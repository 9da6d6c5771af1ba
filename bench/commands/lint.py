"""`specab lint FILE`: known draft/target config mismatches, before any boot."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

console = Console(highlight=False, soft_wrap=True)


def lint(
    file: Annotated[Path, typer.Argument(help="Experiment file (.toml).")],
) -> None:
    """Read every arm's effective target and draft config.json (after overlays; local dirs or
    the local Hugging Face cache, no weights) and print one line per known mismatch: rotary
    geometry, layer ids past a per-layer list, speculation length, vocabulary.
    Exit 0: no findings; 1: findings; 2: bad input."""
    from bench.experiment import lint_file

    report = lint_file(file)
    for line in report.lines():
        console.print(line, markup=False)
    console.print(f"{file}: {report.summary()}", markup=False)
    if report.exit_code:
        raise typer.Exit(report.exit_code)


def register(app: typer.Typer) -> None:
    app.command("lint")(lint)
