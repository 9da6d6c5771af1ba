"""`specab run-ab`: B boots per arm through Ray — interleaved, fault tolerant, resumable.

The driver owns the plan and the results directory; Ray tasks (one per boot attempt, see
`bench.run._task`) only boot and measure. Each finished attempt is written at once
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
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console

from bench.experiment import load_spec
from bench.records import BootRecord, ProbeRecord
from bench.run._attempts import Ledger, RunSummary
from bench.run._boot import BootRequest, build_manifest, failed_record
from bench.run._cluster import cluster_slots, connect, task_options
from bench.run._dispatch import Dispatcher, InFlight, Place
from bench.run._ordering import PlannedBoot, boot_seed, missing_boots, plan_order
from bench.run._progress import Progress, ProgressState, Running, make_progress
from bench.run._sequential import SequentialRun
from bench.run._task import AttemptSpec, TaskResult, run_attempt
from bench.store import ResultsWriter, atomic_write_bytes

CANCEL_GRACE_S = 30.0
Task = Callable[[AttemptSpec], TaskResult]


@dataclass(frozen=True)
class RunOptions:
    results_dir: Path
    resume: bool = False
    address: str | None = None
    slots: int | None = None  # cap on concurrent boots (default: what the cluster fits)
    quiet: bool = False
    common_random_numbers: bool = False
    compile_cache: bool = True
    num_cpus: int | None = None  # local Ray only


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (batch schedulers, `kill`) takes the same clean path as Ctrl-C."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _task_spec_file(spec_file: Path) -> str:
    """Inside a Ray job with a working_dir (`ray job submit`), tasks on other nodes see
    their own copy of it: pass the experiment file relative to it."""
    import ray

    env = ray.get_runtime_context().runtime_env or {}
    if env.get("working_dir"):
        try:
            return str(spec_file.relative_to(Path.cwd().resolve()))
        except ValueError:
            pass
    return str(spec_file)


class Driver:
    """One run-ab invocation. `run()` returns a RunSummary; user errors raise SpecabError.

    `task` is what each Ray task runs (a seam for fault-injection tests)."""

    def __init__(
        self, spec_file: Path, opts: RunOptions, console: Console, *, task: Task = run_attempt
    ) -> None:
        self.spec_file = Path(spec_file).resolve()
        self.opts = opts
        self.console = console
        self.spec = load_spec(self.spec_file)
        self.arms = [a.name for a in self.spec.arms]
        self.task = task

    def _manifest(self) -> dict[str, Any]:
        """manifest.json's body; building it also validates arms and probe sets (cheap)."""
        manifest = dict(build_manifest(self.spec, self.spec_file))
        manifest.setdefault(
            "orchestration",
            {
                "order": "blocks of one boot per arm, shuffled within block by experiment.seed",
                "common_random_numbers": self.opts.common_random_numbers,
                "per_boot_seed": self.spec.server.per_boot_seed,
            },
        )
        return manifest

    def run(self) -> RunSummary:
        t_start = time.monotonic()
        root = Path(self.opts.results_dir)
        manifest = self._manifest()
        # An existing directory is validated (and refused without --resume) before Ray
        # starts; a new one is created only once the cluster can run a boot, so a user
        # error found on the way leaves nothing half-written.
        writer: ResultsWriter | None = None
        if self.opts.resume or (root / "manifest.json").exists():
            writer = ResultsWriter.create(root, manifest, resume=self.opts.resume)
        ledger = Ledger.read(root) if writer else Ledger()
        exp = self.spec.experiment
        plan = plan_order(self.arms, exp.boots_per_arm, exp.seed)
        todo = deque(missing_boots(plan, ledger.ok))
        summary = RunSummary(
            root=root,
            ok={a: len(ledger.ok.get(a, set()) & set(range(exp.boots_per_arm))) for a in self.arms},
            failed={a: 0 for a in self.arms},
        )
        seq = SequentialRun.open(root, exp.looks, self.arms) if exp.looks else None
        if seq is not None and seq.check(summary.ok, self.console.print):
            todo.clear()  # stopped at a look (now or in the run being resumed)
        if todo:
            self._run_on_ray(manifest, writer, ledger, todo, summary, seq)
        summary.wall_s = time.monotonic() - t_start
        return summary

    def _run_on_ray(
        self,
        manifest: dict[str, Any],
        writer: ResultsWriter | None,
        ledger: Ledger,
        todo: deque[PlannedBoot],
        summary: RunSummary,
        seq: SequentialRun | None,
    ) -> None:
        import ray

        started_ray = connect(self.opts.address, num_cpus=self.opts.num_cpus)
        try:
            nodes = cluster_slots(self.spec.resources, self.spec_file)
            if writer is None:
                writer = ResultsWriter.create(summary.root, manifest, resume=False)
            cap = sum(n.slots for n in nodes)
            if self.opts.slots:
                cap = min(cap, self.opts.slots)
            summary.slots = cap
            state = ProgressState(
                arms=self.arms,
                target={a: self.spec.experiment.boots_per_arm for a in self.arms},
                ok=dict(summary.ok),
                slots=cap,
            )
            dispatch = Dispatcher(nodes, cap, task_options(self.spec.resources), self.task)
            with (
                _sigterm_as_interrupt(),
                make_progress(state, self.console, quiet=self.opts.quiet) as progress,
            ):
                run = _Loop(self, writer, ledger, summary, progress, dispatch, seq)
                run.run(todo)
        finally:
            if started_ray:
                ray.shutdown()


class _Loop:
    """The dispatch loop of one run: launch, collect, write, retry, stop."""

    def __init__(
        self,
        driver: Driver,
        writer: ResultsWriter,
        ledger: Ledger,
        summary: RunSummary,
        progress: Progress,
        dispatch: Dispatcher,
        seq: SequentialRun | None,
    ) -> None:
        import ray

        self.spec, self.opts = driver.spec, driver.opts
        self.writer, self.ledger, self.summary = writer, ledger, summary
        self.progress, self.dispatch, self.seq = progress, dispatch, seq
        self.spec_file = _task_spec_file(driver.spec_file)
        self.driver_node = str(ray.get_runtime_context().get_node_id())
        res = self.spec.resources
        self.cpu_only = res.gpu == 0 and res.cpu >= 1
        self.tries: Counter[tuple[str, int]] = Counter()  # attempts in this run

    def run(self, todo: deque[PlannedBoot]) -> None:
        t_loop = time.monotonic()
        try:
            self._loop(todo)
        except KeyboardInterrupt:
            self.summary.interrupted = True
            self.progress.note("interrupted: stopping every boot (the directory stays resumable)")
            self._cancel_all()
        except BaseException:  # a user mistake found inside a boot, or a bug: stop the others
            self._cancel_all()
            raise
        finally:
            self.summary.loop_s = time.monotonic() - t_loop

    def _loop(self, todo: deque[PlannedBoot]) -> None:
        while todo or self.dispatch.inflight:
            while (place := self.dispatch.reserve(todo)) is not None:
                self._launch(place)
            for ref, f in self.dispatch.finished(timeout_s=1.0):
                record = self._collect(ref, f)
                if record.status != "ok" and self._after_failure(f.place.plan, record, todo):
                    return
            if self.seq is not None and self.seq.check(self.summary.ok, self.progress.note):
                todo.clear()  # sequential stop: launch nothing new, running boots finish
            self.progress.refresh()

    def _launch(self, place: Place) -> None:
        p, node = place.plan, place.node
        attempt = self.ledger.claim(self.writer, p.arm, p.boot, block=p.block, host=node.label)
        self.tries[(p.arm, p.boot)] += 1
        crn = self.opts.common_random_numbers
        seed = boot_seed(self.spec, p.arm, p.boot, common_random_numbers=crn)
        spec = AttemptSpec(
            request=BootRequest(self.spec, self.spec_file, attempt, seed),
            driver_log=str(self.writer.log_path(attempt.boot_id)),
            driver_node_id=self.driver_node,
            compile_cache=self.opts.compile_cache,
            cpu_slot=place.slot if self.cpu_only else None,
        )
        f = self.dispatch.launch(place, spec)
        run = Running(p.arm, p.boot, attempt.number, node.label, f.t0)
        self.progress.started(attempt.boot_id, run)

    def _after_failure(self, p: PlannedBoot, record: BootRecord, todo: deque[PlannedBoot]) -> bool:
        """Retry the boot or give it up; True when the run must stop."""
        if self._too_many_failures(p.arm, record):
            self.progress.note(f"stopping: {self.summary.stopped}")
            self._cancel_all()
            return True
        if self.tries[(p.arm, p.boot)] < self.spec.experiment.max_attempts:
            todo.appendleft(p)  # retry next, keeping the block order intact
        else:
            self.summary.lost.append((p.arm, p.boot))
        return False

    def _too_many_failures(self, arm: str, record: BootRecord) -> bool:
        summary = self.summary
        summary.failed[arm] += 1
        limit = self.spec.experiment.max_failures_per_arm
        if summary.failed[arm] <= limit:
            return False
        error = (record.error or "").strip().splitlines()
        summary.stopped = (
            f"arm {arm!r} had {summary.failed[arm]} failed attempts in this run, more than "
            f"experiment.max_failures_per_arm = {limit}; last error: "
            f"{error[0][:300] if error else '?'} (log: {record.log_path}). "
            "Fix the cause, then rerun with --resume"
        )
        return True

    def _result(self, ref: Any, f: InFlight) -> tuple[BootRecord, list[ProbeRecord]]:
        """The task's record and probes; a record of our own when the task produced none."""
        import ray
        from ray.exceptions import RayError, RayTaskError, TaskCancelledError

        try:
            res: TaskResult = ray.get(ref)
        except RayError as exc:
            if isinstance(exc, RayTaskError) and not isinstance(exc, TaskCancelledError):
                raise  # the task's code raised: a bug, shown with its remote traceback
            text = str(exc).strip()  # worker or node died, task cancelled
            error = f"ray: {type(exc).__name__}: {text.splitlines()[0] if text else ''}"
            return failed_record(f.spec.request, error, started_at=f.started_at), []
        if res.user_error is not None:
            raise res.user_error
        assert res.record is not None, "a task returns a record or a user error"
        if res.log_bytes is not None:
            atomic_write_bytes(self.writer.log_path(res.record.boot_id), res.log_bytes)
        return res.record, res.probes

    def _collect(self, ref: Any, f: InFlight, *, only_ok: bool = False) -> BootRecord:
        """Write a finished attempt and count it; return its record.

        `only_ok` (while cancelling): write only boots that completed, not the cancellations.
        """
        record, probes = self._result(ref, f)
        if only_ok and record.status != "ok":
            return record
        self.writer.write_boot(record, probes)
        arm, summary = record.arm, self.summary
        if record.status == "ok":
            summary.ok[arm] += 1
            node_counts = summary.per_node.setdefault(f.place.node.label, {})
            node_counts[arm] = node_counts.get(arm, 0) + 1
        summary.busy_s += (record.boot_seconds or 0.0) + (record.probe_seconds or 0.0)
        self.progress.finished(record, time.monotonic() - f.t0)
        return record

    def _cancel_all(self) -> None:
        """Graceful cancel, then force. Boots that complete during the grace period are
        written; the rest are simply missing, which `--resume` reruns."""
        self.dispatch.cancel(force=False)
        deadline = time.monotonic() + CANCEL_GRACE_S
        try:
            while self.dispatch.inflight and time.monotonic() < deadline:
                for ref, f in self.dispatch.finished(timeout_s=0.5):
                    self._collect(ref, f, only_ok=True)
        except KeyboardInterrupt:
            pass  # a second Ctrl-C: go straight to force
        finally:
            self.dispatch.cancel(force=True)
            self.dispatch.drop_all(timeout_s=10.0)


def run_ab(spec_file: Path, opts: RunOptions, console: Console | None = None) -> RunSummary:
    """Run (or resume) one experiment; see the module docstring."""
    return Driver(spec_file, opts, console or Console(stderr=True)).run()
