"""`specab run-ab`: B boots per arm through Ray — interleaved, fault tolerant, resumable.

The driver owns the plan and the results directory; Ray tasks (one per boot attempt, see
`bench.run.placement.task`) only boot and measure. Each finished attempt is written at once
(atomically, one file per attempt), so killing the driver at any moment leaves a directory
that `--resume` completes: it counts ok boots per arm and runs only what is missing.

Failure policy: a failed attempt is recorded and retried (up to experiment.max_attempts per
boot in this run); an arm with more than experiment.max_failures_per_arm failed attempts in
this run stops the experiment. A user mistake found inside a boot (SpecabError) and a bug
(any other exception raised by the task) stop the run at once; the bug with its traceback.
Ctrl-C / SIGTERM cancels every boot (graceful first, then force; the per-boot watchdog kills
server groups of force-killed workers).
"""

from __future__ import annotations

import signal
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from types import FrameType

from rich.console import Console

from bench.errors import SpecabError
from bench.experiment import (
    Preflight,
    build_manifest,
    image_id,
    load_experiment,
    preflight,
    resume_changes,
)
from bench.records import BOOT_SCHEMA, PROBE_SCHEMA, Manifest, Results
from bench.run.boot import built_for_preflight
from bench.run.driver.bisection_run import BisectRun
from bench.run.driver.dispatch import Dispatcher
from bench.run.driver.elimination import SelectionRun
from bench.run.driver.ledger import Ledger, RunBooks, RunOptions, RunSummary
from bench.run.driver.looks import SequentialRun
from bench.run.driver.loop import RunLoop
from bench.run.driver.order import PlannedBoot, missing_boots, plan_order
from bench.run.driver.progress import ProgressState, make_progress
from bench.run.driver.steering import Controller
from bench.run.placement import (
    AttemptSpec,
    TaskResult,
    bundle,
    cluster_slots,
    connect,
    disconnect,
    gang_capacity,
    local_session,
    run_attempt,
    task_options,
)
from bench.stats import screen_dropped
from bench.store import ResultsWriter

Task = Callable[[AttemptSpec], TaskResult]


# SIGTERM: batch schedulers, `kill`. SIGUSR1: cluster/specab.sbatch's trap asking a driver
# that runs in an image (a Slurm step of its own) to stop, where a TERM would be the step's end.
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGUSR1 take the same clean path as Ctrl-C."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    try:
        old = [signal.signal(s, handler) for s in _STOP_SIGNALS]
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        for s, was in zip(_STOP_SIGNALS, old, strict=True):
            signal.signal(s, was)


class Driver:
    """One run-ab invocation. `run()` returns a RunSummary; user errors raise SpecabError.

    `task` is what each Ray task runs (a seam for fault-injection tests)."""

    def __init__(
        self, spec_file: Path, opts: RunOptions, console: Console, *, task: Task = run_attempt
    ) -> None:
        self.spec_file = Path(spec_file).resolve()
        self.opts = opts
        self.console = console
        self.spec = load_experiment(self.spec_file)
        self.arms = [a.name for a in self.spec.arms]
        self.task = task
        self._writer: ResultsWriter | None = None  # holds the results directory's claim
        self._built: Manifest | None = None  # the run's manifest, once built

    def _preflight(self) -> Preflight:
        """Every user mistake before anything is written."""
        cluster = self.opts.address is not None
        arms = built_for_preflight(self.spec, self.spec_file)  # the rest: checked when built
        return preflight(self.spec_file, spec=self.spec, arms=arms, cluster=cluster)

    def _lint(self, checked: Preflight) -> None:
        """Preflight's warnings and lint's findings (known draft/target config mismatches),
        which stop the run only with --strict."""
        for line in (*checked.warnings, *checked.advice):
            self.console.print(line, markup=False, soft_wrap=True)
        report = checked.lint(self.spec_file)
        self.console.print(f"lint: {report.summary()}", markup=False)
        for line in report.lines():
            self.console.print(f"  {line}", markup=False, soft_wrap=True)
        if self.opts.strict and report.warnings:
            first = report.warnings[0]
            raise SpecabError(
                f"lint: {report.summary()} (listed above); --strict stops on findings",
                file=self.spec_file,
                field=f"arms({first.arm}) {first.field}",
                fix="apply the fixes listed above, or run without --strict",
            )

    def _manifest(self) -> Manifest:
        """manifest.json; building it also validates arms and probe sets (cheap)."""
        return build_manifest(
            self.spec,
            self.spec_file,
            orchestration={
                "common_random_numbers": self.opts.common_random_numbers,
                "per_boot_seed": self.spec.server.per_boot_seed,
            },
        )

    def run(self) -> RunSummary:
        t_start = time.monotonic()
        root = Path(self.opts.results_dir)
        checked = self._preflight()
        # each container arm's image as the driver's node holds it (its definition was read
        # there): the content every boot's nodes must hold, where the driver has it
        self._images = {a.name: image_id(a.container) or "" for a in checked.arms if a.container}
        manifest = self._manifest()
        # An existing directory is checked (refused without --resume, or when this run would
        # mix versions of an arm) before Ray starts; a new one is created only once the
        # cluster can run a boot, so a user error found on the way leaves nothing written.
        exists = ResultsWriter.check_root(root)
        self._announce(root, exists)
        self._lint(checked)
        try:
            return self._run(root, manifest, exists, t_start)
        finally:
            if self._writer is not None:
                self._writer.close()  # the directory's claim: released however the run ends

    def _announce(self, root: Path, exists: bool) -> None:
        """Where the results go, first: absolute, new or how far a resume has come; and a
        directory of this experiment beside its file when this run writes elsewhere."""
        per_arm = self.spec.experiment.boots_per_arm
        target = per_arm * len(self.arms)
        if exists:
            ok = Ledger.read(root).ok
            done = sum(len({b for b in ok.get(a, set()) if b < per_arm}) for a in self.arms)
            state = f"resuming: {done} of {target} boots ok" if self.opts.resume else "exists"
        else:
            state = f"new: {target} boots"
        self.console.print(f"results: {root.resolve()} ({state})", markup=False, soft_wrap=True)
        beside = self.spec_file.resolve().parent / "results" / self.spec.experiment.name
        if beside != root.resolve() and (beside / "manifest.json").is_file():
            self.console.print(
                f"note: {beside} holds results of this experiment too; pass --results-dir "
                f"{beside} --resume to continue that one",
                markup=False,
                soft_wrap=True,
            )

    def _results(self) -> Results:
        """The results so far, from the writer's memory (it read the directory once); none
        before the directory exists."""
        if self._writer is None:
            empty = BOOT_SCHEMA.empty_table().to_pandas(), PROBE_SCHEMA.empty_table().to_pandas()
            assert self._built is not None
            return Results(manifest=self._built, boots=empty[0], probes=empty[1])
        return self._writer.results()

    def _claim_name(self) -> str:
        return "run-ab --resume" if self.opts.resume else "run-ab"

    def _run(self, root: Path, manifest: Manifest, exists: bool, t_start: float) -> RunSummary:
        writer: ResultsWriter | None = None
        ledger = Ledger()
        if exists:  # claimed first: the ledger is read once no other driver can write it
            writer = self._writer = ResultsWriter.create(
                root,
                manifest,
                resume=self.opts.resume,
                compare=lambda old: resume_changes(
                    old, manifest, where=root, proven=Ledger.read(root).proven_arms()
                ),
                claim=self._claim_name(),
            )
            ledger = Ledger.read(root)
        exp = self.spec.experiment
        per_arm = self.spec.bisect.most_boots if self.spec.bisect else exp.boots_per_arm
        plan = plan_order(self.arms, per_arm, exp.seed)
        todo = deque(missing_boots(plan, ledger.ok))
        summary = RunSummary(
            root=root,
            ok={a: len(ledger.ok.get(a, set()) & set(range(per_arm))) for a in self.arms},
            failed={a: 0 for a in self.arms},
        )
        self._built = manifest
        seq = self._controller(root, exists, todo, summary)
        if todo:
            self._run_on_ray(manifest, writer, ledger, todo, summary, seq)
        summary.wall_s = time.monotonic() - t_start
        return summary

    def _controller(
        self, root: Path, exists: bool, todo: deque[PlannedBoot], summary: RunSummary
    ) -> Controller:
        """What decides, as boots land, which planned boots still run: sequential looks, a
        sweep's eliminations or a culprit search; the todo as it stands now."""
        exp = self.spec.experiment
        if self.spec.bisect is not None:  # boots are held back until the search asks
            search = BisectRun.start(self.arms, todo, exp.alpha, 1, current=self._results)
            todo.clear()
            search.advance(todo, False, self.console.print)
            return search
        seq: SequentialRun | SelectionRun | None = None
        if self.spec.screen is not None:  # decided candidates get no more boots
            looks = self.spec.screen.design_looks(exp.boots_per_arm)
            drop = partial(screen_dropped, alpha=exp.alpha)
            seq = SelectionRun(
                root, looks, self.arms, current=self._results, drop=drop, label="screening"
            )
            seq.dropped = dict(drop(self._results()))  # same code as the baseline: no boots
            for arm, why in sorted(seq.dropped.items()):
                self.console.print(f"screening: no more boots for {arm}: {why}")
        elif exp.looks and self.spec.sweep is not None:  # the looks eliminate configurations
            seq = SelectionRun(root, tuple(exp.looks), self.arms, current=self._results)
        elif exp.looks:
            seq = SequentialRun.open(root, exp.looks, self.arms, current=self._results)
        if seq is not None and exists and seq.check(summary.ok, self.console.print):
            todo.clear()  # stopped at a look (now or in the run being resumed)
        if isinstance(seq, SelectionRun):
            seq.prune(todo)
        return seq

    def _run_on_ray(
        self,
        manifest: Manifest,
        writer: ResultsWriter | None,
        ledger: Ledger,
        todo: deque[PlannedBoot],
        summary: RunSummary,
        seq: Controller,
    ) -> None:
        started_ray = connect(self.opts.address, num_cpus=self.opts.num_cpus)
        session = local_session() if started_ray and self.opts.address is None else None
        try:
            nodes = cluster_slots(self.spec.resources, self.spec_file)
            if writer is None:
                writer = self._writer = ResultsWriter.create(
                    summary.root, manifest, resume=False, claim=self._claim_name()
                )
            res = self.spec.resources
            cap = gang_capacity(nodes, res.nodes)
            if self.opts.slots:
                cap = min(cap, self.opts.slots)
            summary.slots = cap
            if isinstance(seq, BisectRun):  # several points at once, one per slot
                seq.slots = cap
            state = ProgressState(
                arms=self.arms,
                target={a: self.spec.experiment.boots_per_arm for a in self.arms},
                ok=dict(summary.ok),
                slots=cap,
                open_ended=isinstance(seq, BisectRun),
            )
            dispatch = Dispatcher(
                nodes, cap, task_options(res), self.task, gang=res.nodes, bundle=bundle(res)
            )
            with (
                _sigterm_as_interrupt(),
                make_progress(state, self.console, quiet=self.opts.quiet) as progress,
            ):
                RunLoop(
                    self.spec,
                    self.spec_file,
                    self.opts,
                    RunBooks(writer, ledger, summary, _definitions(manifest), self._images),
                    progress=progress,
                    dispatch=dispatch,
                    seq=seq,
                ).run(todo)
        finally:
            if started_ray:
                disconnect(session)


def _definitions(manifest: Manifest) -> dict[str, str]:
    """Each arm's definition hash, as this run writes it: the key of its compile cache."""
    return {a.name: a.definition_sha256 for a in manifest.arms}


def run_ab(spec_file: Path, opts: RunOptions, console: Console | None = None) -> RunSummary:
    """Run (or resume) one experiment; see the module docstring."""
    return Driver(spec_file, opts, console or Console(stderr=True)).run()
