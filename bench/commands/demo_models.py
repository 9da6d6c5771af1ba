"""`specab demo-models DIR [--train] [--drafters]`: build the demo's tokenizer, target,
draft and drafters."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from bench.errors import SpecabError


def demo_models(
    out_dir: Annotated[
        Path, typer.Argument(help="Directory to write tokenizer/, target/, draft/.")
    ],
    train: Annotated[
        bool,
        typer.Option(
            "--train",
            help="Run the fixed training recipe (minutes on CPU) instead of random weights.",
        ),
    ] = False,
    drafters: Annotated[
        bool,
        typer.Option(
            "--drafters",
            help="Only add the DFlash and EAGLE-3 drafters and the Qwen3-Next MTP target "
            "(random weights) to an existing demo models directory (arms/methods/); with "
            "--train, also train the DFlash drafter and the EAGLE-3 head against its target "
            "(dflash-trained/, eagle3-trained/).",
        ),
    ] = False,
) -> None:
    """Build the tiny demo models (Hugging Face dirs vLLM loads offline)."""
    from bench.demo import build_demo_models, build_method_models, train_drafters

    if out_dir.exists() and not out_dir.is_dir():
        raise SpecabError(
            "exists and is not a directory", file=out_dir, fix="pass a directory path"
        )
    t0 = time.monotonic()
    if drafters:
        built = build_method_models(out_dir)
        if train:
            built.extend(train_drafters(out_dir))
        for path in built:
            typer.echo(f"{path.name:<9} {path}")
        typer.echo(f"built in {time.monotonic() - t0:.1f} s")
        return
    models = build_demo_models(out_dir, train=train)
    typer.echo(f"target    {models.target}")
    typer.echo(f"draft     {models.draft}")
    typer.echo(f"tokenizer {models.tokenizer}")
    typer.echo(f"built in {time.monotonic() - t0:.1f} s")


def register(app: typer.Typer) -> None:
    app.command("demo-models")(demo_models)
