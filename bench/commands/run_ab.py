"""`specab run-ab FILE`: B boots per arm through Ray, interleaved, resumable (logic in
`bench.run.driver.orchestrator`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

if TYPE_CHECKING:
    from bench.run import RunSummary


def register(app: typer.Typer) -> None:
    @app.command("run-ab")
    def run_ab(
        experiment_file: Annotated[Path, typer.Argument(help="Experiment file (.toml).")],
        results_dir: Annotated[
            Path | None,
            typer.Option("--results-dir", help="Results directory (default results/<name>)."),
        ] = None,
        resume: Annotated[
            bool,
            typer.Option("--resume", help="Continue an existing results directory."),
        ] = False,
        address: Annotated[
            str | None,
            typer.Option(
                "--address", help="Existing Ray cluster (host:port or 'auto'); default: local."
            ),
        ] = None,
        slots: Annotated[
            int | None,
            typer.Option("--slots", min=1, help="At most this many boots at once."),
        ] = None,
        quiet: Annotated[
            bool, typer.Option("--quiet", help="One line per boot instead of a live table.")
        ] = False,
        common_random_numbers: Annotated[
            bool,
            typer.Option(
                "--common-random-numbers",
                help="Same engine seed for every arm's boot b (default: independent seeds).",
            ),
        ] = False,
        compile_cache: Annotated[
            bool,
            typer.Option(
                "--compile-cache/--no-compile-cache",
                help="Keep vLLM's compile cache across boots of an arm on a node.",
            ),
        ] = True,
        report: Annotated[
            bool, typer.Option("--report/--no-report", help="Render the report at the end.")
        ] = True,
        strict: Annotated[
            bool,
            typer.Option(
                "--strict",
                help="Stop before anything is written when `specab lint` finds a known "
                "draft/target config mismatch (exit 2).",
            ),
        ] = False,
    ) -> int:
        """Run an experiment: boots_per_arm boots of every arm, then print the verdict."""
        from bench.experiment import load_spec
        from bench.report import table_console
        from bench.run import RunOptions
        from bench.run import run_ab as run

        spec = load_spec(experiment_file)
        root = results_dir or Path("results") / spec.experiment.name
        console = table_console()
        opts = RunOptions(
            results_dir=root,
            resume=resume,
            address=address,
            slots=slots,
            quiet=quiet,
            common_random_numbers=common_random_numbers,
            compile_cache=compile_cache,
            strict=strict,
        )
        summary = run(experiment_file, opts, console)
        rerun = f"specab run-ab {experiment_file} --results-dir {root}"
        return finish(summary, console, rerun, report=report)


def finish(summary: RunSummary, console: Console, rerun: str, *, report: bool) -> int:
    """The end of a run: what stopped it, the verdict and report, the overhead; exit code."""
    from bench.report import print_end

    if summary.interrupted:
        console.print(f"interrupted; continue with: {rerun} --resume", markup=False)
        return 130
    if summary.stopped:  # soft wrap: the log tail's lines stay whole
        console.print(f"stopped: {summary.stopped}", markup=False, soft_wrap=True)
    for arm, boot in summary.lost:
        console.print(
            f"boot {boot} of arm {arm!r} failed experiment.max_attempts times; "
            "rerun with --resume to try again",
            markup=False,
        )
    print_end(summary.root, console, per_node=summary.per_node, report=report)
    if summary.slots and summary.wall_s > 0:
        over = 1 - summary.busy_s / (summary.wall_s * summary.slots)
        console.print(
            f"wall {summary.wall_s:.1f}s, slots {summary.slots}, orchestration overhead {over:.1%}",
            markup=False,
        )
    return 0 if summary.complete else 1
