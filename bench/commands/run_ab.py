"""`specab run-ab FILE`: B boots per arm through Ray, interleaved, resumable (logic in
`bench.run.driver.orchestrator`); `specab status DIR`: where such a run stands, read from its
results directory (`bench.store.campaign`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from bench.commands.options import (
    Address,
    ExperimentFile,
    Json,
    Quiet,
    Report,
    ResultsDir,
    ResultsDirOption,
    Resume,
    Slots,
    Track,
    flags_command,
)
from bench.errors import SpecabError

if TYPE_CHECKING:
    from bench.run import RunSummary


CompileCacheGb = Annotated[
    float,
    typer.Option(
        "--compile-cache-gb",
        min=0,
        envvar="SPECAB_COMPILE_CACHE_GB",
        help="At most this many GiB of kept compile caches per node, every experiment's "
        "together: before and after each boot the least recently used past it are removed, "
        "never one a running boot holds.",
    ),
]


@dataclass(frozen=True)
class RunFlags:
    """`specab run-ab`'s options, one field each (`flags_command` makes them Typer's)."""

    experiment_file: ExperimentFile
    results_dir: ResultsDirOption = None
    resume: Resume = False
    address: Address = None
    slots: Slots = None
    quiet: Quiet = False
    common_random_numbers: Annotated[
        bool,
        typer.Option(
            "--common-random-numbers",
            help="Same engine seed for every arm's boot b (default: independent seeds).",
        ),
    ] = False
    compile_cache: Annotated[
        bool,
        typer.Option(
            "--compile-cache/--no-compile-cache",
            help="Keep vLLM's compile cache across boots of an arm on a node.",
        ),
    ] = True
    compile_cache_gb: CompileCacheGb = 20.0  # compile_caches.DEFAULT_CACHE_GB (bench.run: Ray)
    report: Report = True
    duets: Annotated[
        bool,
        typer.Option(
            "--duets/--no-duets",
            help="On a node with two slots or more, launch boots in co-run groups that begin "
            "their probes together, for speed compared within them (default on).",
        ),
    ] = True
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Stop before anything is written when `specab lint` finds a known "
            "draft/target config mismatch (exit 2).",
        ),
    ] = False
    track: Track = None
    searching: Annotated[bool, typer.Option(hidden=True)] = False  # called by `bisect`


def run_ab(f: RunFlags) -> int:
    """Run an experiment: boots_per_arm boots of every arm, then print the verdict."""
    from bench.experiment import load_spec
    from bench.report import table_console
    from bench.run import RunOptions
    from bench.run import run_ab as run
    from bench.tracking import LiveTracker

    spec = load_spec(f.experiment_file)
    root = f.results_dir or Path("results") / spec.experiment.name
    console = table_console()
    note = lambda line: console.print(line, markup=False, soft_wrap=True)  # noqa: E731
    tracker = LiveTracker(f.track, root, note) if f.track else None
    if spec.bisect is not None and not f.searching:
        note(
            f"{f.experiment_file} has [bisect]: its arms are a history, and this runs its "
            "culprit search (as `specab bisect` does), booting only the points it asks for"
        )
    opts = RunOptions(
        results_dir=root,
        resume=f.resume,
        address=f.address,
        slots=f.slots,
        quiet=f.quiet,
        common_random_numbers=f.common_random_numbers,
        compile_cache=f.compile_cache,
        compile_cache_gb=f.compile_cache_gb,
        strict=f.strict,
        duets=f.duets,
        on_boot=tracker.boot_landed if tracker else None,
    )
    try:
        summary = run(f.experiment_file, opts, console)
    except BaseException:
        if tracker is not None:
            tracker.close()  # a refused file or a crash: nothing more to track
        raise
    rerun = f"specab run-ab {f.experiment_file} --results-dir {root}"
    rc = finish(summary, console, rerun, report=f.report)
    if tracker is not None:
        note(tracker.finish())
    return rc


def status(
    results_dir: ResultsDir,
    watch: Annotated[
        bool, typer.Option("--watch", help="Refresh until Ctrl-C (or the run ends).")
    ] = False,
    interval: Annotated[
        float, typer.Option("--interval", min=1.0, help="Seconds between refreshes.")
    ] = 10.0,
    as_json: Json = False,
) -> None:
    """Where a campaign stands, from its results directory alone (a login node can read
    it while a Slurm job writes): per arm ok, failed, in flight and hosts; who writes it;
    elapsed and ETA; the next look; the last failure's cause. Counts only, no verdicts."""
    import sys
    import time

    from rich.live import Live

    from bench.commands.options import results_dir_not_spec
    from bench.report.console import status_line, status_view
    from bench.store import campaign_status

    results_dir_not_spec(results_dir)
    if as_json:
        typer.echo(campaign_status(results_dir).model_dump_json(indent=2))
        return
    console = Console(highlight=False)
    if not watch:
        console.print(status_view(campaign_status(results_dir)))
        return
    if not console.is_terminal:  # a pipe or a log: one line per refresh, flushed
        while True:
            s = campaign_status(results_dir)
            typer.echo(status_line(s))
            sys.stdout.flush()
            if s.state != "running":
                return
            time.sleep(interval)
    with Live(status_view(campaign_status(results_dir)), console=console) as live:
        try:
            while True:
                time.sleep(interval)
                s = campaign_status(results_dir)
                live.update(status_view(s))
                if s.writer is None and all(a.ok >= (a.target or 0) for a in s.arms):
                    return
        except KeyboardInterrupt:
            return


def bisect(
    experiment_file: ExperimentFile,
    results_dir: ResultsDirOption = None,
    resume: Resume = False,
    address: Address = None,
    quiet: Quiet = False,
    report: Report = True,
    track: Track = None,
    compile_cache_gb: CompileCacheGb = 20.0,
) -> int:
    """Which change did it: the arms of a file with a \\[bisect] table, in order, are a
    history from the good end (first) to the bad end (last); boot the ends, then the points
    the search asks for, until one point is the first changed with probability >= 1 - alpha
    (or a range)."""
    from bench.experiment import load_spec

    if load_spec(experiment_file).bisect is None:
        raise SpecabError(
            "the file has no [bisect] table",
            file=experiment_file,
            field="bisect",
            fix='add [bisect] (e.g. metric = "acceptance_pos0"); its arms, in order, are the '
            "history (or run it as an A/B: specab run-ab)",
        )
    flags = RunFlags(experiment_file, results_dir, resume, address, None, quiet, report=report)
    return run_ab(
        replace(flags, duets=False, track=track, searching=True, compile_cache_gb=compile_cache_gb)
    )


def register(app: typer.Typer) -> None:
    app.command("status")(status)
    app.command("run-ab")(flags_command(RunFlags, run_ab))
    app.command("bisect")(bisect)


def finish(summary: RunSummary, console: Console, rerun: str, *, report: bool) -> int:
    """The end of a run: what stopped it, the verdict and report, the overhead; exit code."""
    from bench.report import analysis_or_refusal, print_end, write_report
    from bench.store import load_results

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
    results = load_results(summary.root)
    analysis, refusal = analysis_or_refusal(results)
    print_end(results, analysis, console, per_node=summary.per_node, refusal=refusal)
    if report and analysis is not None:
        console.print(f"report {write_report(results, analysis)}", markup=False, highlight=False)
    if summary.slots and summary.wall_s > 0:
        over = 1 - summary.busy_s / (summary.wall_s * summary.slots)
        console.print(
            f"wall {summary.wall_s:.1f}s, slots {summary.slots}, orchestration overhead {over:.1%}",
            markup=False,
        )
    return 0 if summary.complete else 1
