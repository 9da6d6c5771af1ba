"""`specab reference save DIR NAME` (store a trusted run's per-boot values) and `specab gate DIR
--reference NAME` (non-inferiority of a new run against it: exit 0 pass, 1 fail, 2 refused).
Options and rendering only: the rules and statistics are `bench.stats.gate`'s, the files the
store's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bench.commands.options import (
    Json,
    Margin,
    ResultsDir,
    margins_given,
)
from bench.errors import SpecabError

if TYPE_CHECKING:
    import pandas as pd

    from bench.stats import Analysis

reference_app = typer.Typer(help="Trusted references for `specab gate`.")
STORE = Path("references")


def _analysis(results_dir: Path) -> tuple[Analysis, pd.DataFrame, str]:
    from bench import stats
    from bench.store import load_results

    res = load_results(results_dir)
    result = stats.analyze(res, source=str(results_dir))
    return result, res.ok_boots(), res.experiment


@reference_app.command("save")
def save(
    results_dir: ResultsDir,
    name: Annotated[str, typer.Argument(help="Reference name (letters, digits, . _ -).")],
    store: Annotated[Path, typer.Option("--store", help="Where references live.")] = STORE,
    replace: Annotated[bool, typer.Option("--replace", help="Overwrite NAME.")] = False,
) -> None:
    """Store DIR's per-boot values (per arm and metric), probe-set hash, K, vLLM version,
    hosts and date as reference NAME."""
    from bench.stats.gate import check_saveable, reference_arms
    from bench.store import save_reference

    result, ok, experiment = _analysis(results_dir)
    arms = reference_arms(result, ok)
    check_saveable(arms, str(results_dir))
    _, path = save_reference(
        store, name, arms, experiment=experiment, source=results_dir, replace=replace
    )
    boots = ", ".join(f"{a} ({len(e.boots)} boots)" for a, e in arms.items())
    typer.echo(f"saved reference {name}: {boots} -> {path}")


def gate(
    results_dir: ResultsDir,
    reference: Annotated[str, typer.Option("--reference", help="Reference NAME.")],
    store: Annotated[Path, typer.Option("--store", help="Where references live.")] = STORE,
    arm: Annotated[
        list[str] | None, typer.Option("--arm", help="NEW=REFERENCE arm pair (repeat).")
    ] = None,
    margin: Margin = None,
    alpha: Annotated[float, typer.Option("--alpha", help="One-sided level.")] = 0.05,
    as_json: Json = False,
) -> int:
    """Is the new run not worse than the trusted reference by the margins? Non-inferiority
    on boot values (Welch on the two boot samples), on pos0, mean length and tokens/s, and on
    any other metric given a --margin. Exit 0 pass, 1 fail."""
    from bench.stats.gate import gate as gate_run
    from bench.stats.gate import reference_arms
    from bench.store import load_reference

    if not 0 < alpha < 0.5:
        raise SpecabError(f"{alpha!r} is out of range", field="--alpha", fix="use e.g. 0.05")
    given = margins_given(margin)
    ref = load_reference(store, reference)
    result, ok, _ = _analysis(results_dir)
    new_arms = reference_arms(result, ok)
    margins = {**result.margins, **given}
    answer = gate_run(
        new_arms,
        ref,
        margins=margins,
        alpha=alpha,
        requested=arm,
        source=str(results_dir),
        also=given,
    )
    if as_json:
        typer.echo(json.dumps(answer.model_dump(), indent=2, allow_nan=False))
    else:
        from bench.report import render_gate

        render_gate(ref, new_arms, answer)
    return 0 if answer.passed else 1


def register(app: typer.Typer) -> None:
    app.add_typer(reference_app, name="reference")
    app.command("gate")(gate)
