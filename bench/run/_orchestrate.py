"""`specab run-ab`: B boots per arm through Ray — interleaved, fault tolerant, resumable.

The driver owns the plan and the results directory; Ray tasks (one per boot attempt, see
`bench.run._task`) only boot and measure. Each finished attempt is written at once
(atomically, one file per attempt), so killing the driver at any moment leaves a directory
that `--resume` completes: it counts ok boots per arm and runs only what is missing.

Failure policy: a failed attempt is recorded and retried (up to experiment.max_attempts per
boot in this run); an arm with more than experiment.max_failures_per_arm failed attempts in
this run stops the experiment. Ctrl-C / SIGTERM cancels every boot (graceful first, then
force; the per-boot watchdog kills server groups of force-killed workers).
"""

from __future__ import annotations

import signal
import time
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console

from bench.errors import SpecabError
from bench.experiment import load_spec
from bench.records import BootRecord, ProbeRecord, boot_file_stem
from bench.run._attempts import (
    InFlight,
    RunSummary,
    existing_attempts,
    failed_row,
    now_utc,
    stamp_row,
)
from bench.run._cluster import NodeSlots, cluster_slots, connect, task_options
from bench.run._ordering import PlannedBoot, engine_seed, missing_boots, pick_next, plan_order
from bench.run._progress import ProgressState, Running, make_progress
from bench.run._sequential import SequentialRun
from bench.run._task import AttemptSpec, TaskResult, run_attempt
from bench.store import ResultsWriter, atomic_write_bytes

CANCEL_GRACE_S = 30.0


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


class Driver:
    """One run-ab invocation. `run()` returns a RunSummary; user errors raise SpecabError."""

    def __init__(self, spec_file: Path, opts: RunOptions, console: Console) -> None:
        self.spec_file = Path(spec_file).resolve()
        self.opts = opts
        self.console = console
        self.spec = load_spec(self.spec_file)
        self.arms = [a.name for a in self.spec.arms]

    def _manifest(self) -> dict[str, Any]:
        """manifest.json's body; building it also validates arms and probe sets (cheap)."""
        from bench.run._boot import build_manifest

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

    def _task_spec_file(self) -> str:
        """Inside a Ray job with a working_dir (`ray job submit`), tasks on other nodes see
        their own copy of it: pass the experiment file relative to it."""
        import ray

        env = ray.get_runtime_context().runtime_env or {}
        if env.get("working_dir"):
            try:
                return str(self.spec_file.relative_to(Path.cwd().resolve()))
            except ValueError:
                pass
        return str(self.spec_file)

    def _seed(self, p: PlannedBoot) -> int | None:
        if not self.spec.server.per_boot_seed:
            return None
        return engine_seed(
            self.spec.experiment.seed,
            p.arm,
            p.boot,
            common_random_numbers=self.opts.common_random_numbers,
        )

    def run(self) -> RunSummary:
        import ray

        t_start = time.monotonic()
        root = Path(self.opts.results_dir)
        manifest = self._manifest()
        # An existing directory is validated (and refused without --resume) before Ray
        # starts; a new one is created only once the cluster can run a boot, so a user
        # error found on the way leaves nothing half-written.
        writer: ResultsWriter | None = None
        if self.opts.resume or (root / "manifest.json").exists():
            writer = ResultsWriter.create(root, manifest, resume=self.opts.resume)
        ok, last_attempt, order = existing_attempts(root) if writer else ({}, {}, 0)
        exp = self.spec.experiment
        plan = plan_order(self.arms, exp.boots_per_arm, exp.seed)
        todo = deque(missing_boots(plan, ok))
        summary = RunSummary(
            root=root,
            ok={a: len(ok.get(a, set()) & set(range(exp.boots_per_arm))) for a in self.arms},
            failed={a: 0 for a in self.arms},
        )
        self._seq = SequentialRun.open(root, exp.looks, self.arms) if exp.looks else None
        if self._seq is not None and self._seq.check(summary.ok, self.console.print):
            todo.clear()  # stopped at a look (now or in the run being resumed)
        if not todo:
            summary.wall_s = time.monotonic() - t_start
            return summary
        started_ray = connect(self.opts.address, num_cpus=self.opts.num_cpus)
        try:
            nodes = cluster_slots(self.spec.resources, self.spec_file)
            if writer is None:
                writer = ResultsWriter.create(root, manifest, resume=False)
            cap = sum(n.slots for n in nodes)
            if self.opts.slots:
                cap = min(cap, self.opts.slots)
            summary.slots = cap
            state = ProgressState(
                arms=self.arms,
                target={a: exp.boots_per_arm for a in self.arms},
                ok=dict(summary.ok),
                slots=cap,
            )
            with (
                _sigterm_as_interrupt(),
                make_progress(state, self.console, quiet=self.opts.quiet) as progress,
            ):
                t_loop = time.monotonic()
                try:
                    self._loop(writer, todo, nodes, cap, last_attempt, order, summary, progress)
                except KeyboardInterrupt:
                    summary.interrupted = True
                    progress.note(
                        "interrupted: stopping every boot (the directory stays resumable)"
                    )
                    self._cancel_all(writer, summary, progress)
                except SpecabError:  # a user mistake found inside a boot: stop the others
                    self._cancel_all(writer, summary, progress)
                    raise
                finally:
                    summary.loop_s = time.monotonic() - t_loop
        finally:
            if started_ray:
                ray.shutdown()
        summary.wall_s = time.monotonic() - t_start
        return summary

    # -- the dispatch loop -----------------------------------------------------------------

    def _loop(
        self,
        writer: ResultsWriter,
        todo: deque[PlannedBoot],
        nodes: list[NodeSlots],
        cap: int,
        last_attempt: dict[tuple[str, int], int],
        order: int,
        summary: RunSummary,
        progress: Any,
    ) -> None:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        remote = ray.remote(run_attempt)
        opts = task_options(self.spec.resources)
        exp = self.spec.experiment
        free = {n.node_id: n.slots for n in nodes}
        by_id = {n.node_id: n for n in nodes}
        slots_free = {n.node_id: set(range(n.slots)) for n in nodes}
        cpu_only = self.spec.resources.gpu == 0 and self.spec.resources.cpu >= 1
        per_node_arm: Counter[tuple[str, str]] = Counter()
        per_node_total: Counter[str] = Counter()
        attempts_here: Counter[tuple[str, int]] = Counter()
        driver_node = ray.get_runtime_context().get_node_id()
        task_spec_file = self._task_spec_file()
        self._inflight: dict[Any, InFlight] = {}
        while todo or self._inflight:
            while todo and len(self._inflight) < cap:
                pick = pick_next(todo, free, per_node_arm, per_node_total)
                if pick is None:
                    break
                index, node_id = pick
                p = todo[index]
                del todo[index]
                key = (p.arm, p.boot)
                attempt = last_attempt.get(key, 0) + 1
                last_attempt[key] = attempt
                attempts_here[key] += 1
                boot_id = boot_file_stem(p.arm, p.boot, attempt)
                slot = min(slots_free[node_id])
                slots_free[node_id].discard(slot)
                spec = AttemptSpec(
                    spec=self.spec,
                    spec_file=task_spec_file,
                    arm=p.arm,
                    boot=p.boot,
                    attempt=attempt,
                    order=order,
                    block=p.block,
                    engine_seed=self._seed(p),
                    boot_id=boot_id,
                    log_path=str(writer.log_path(boot_id)),
                    driver_node_id=driver_node,
                    compile_cache=self.opts.compile_cache,
                    cpu_slot=slot if cpu_only else None,
                )
                strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
                ref = remote.options(**opts, scheduling_strategy=strategy).remote(spec)
                node = by_id[node_id]
                self._inflight[ref] = InFlight(
                    p, attempt, boot_id, order, node, now_utc(), time.monotonic(), slot
                )
                order += 1
                free[node_id] -= 1
                per_node_arm[(node_id, p.arm)] += 1
                per_node_total[node_id] += 1
                progress.started(
                    boot_id, Running(p.arm, p.boot, attempt, node.label, time.monotonic())
                )
            ready, _ = ray.wait(list(self._inflight), num_returns=1, timeout=1.0)
            for ref in ready:
                f = self._inflight.pop(ref)
                free[f.node.node_id] += 1
                slots_free[f.node.node_id].add(f.slot)
                row = self._collect(writer, ref, f, summary, progress)
                if row["status"] == "ok":
                    continue
                if self._too_many_failures(f.plan.arm, row, summary):
                    progress.note(f"stopping: {summary.stopped}")
                    self._cancel_all(writer, summary, progress)
                    return
                key = (f.plan.arm, f.plan.boot)
                if attempts_here[key] < exp.max_attempts:
                    todo.appendleft(f.plan)  # retry next, keeping the block order intact
                else:
                    summary.lost.append(key)
            if self._seq is not None and self._seq.check(summary.ok, progress.note):
                todo.clear()  # sequential stop: launch nothing new, running boots finish
            progress.refresh()

    def _too_many_failures(self, arm: str, row: dict[str, Any], summary: RunSummary) -> bool:
        summary.failed[arm] += 1
        limit = self.spec.experiment.max_failures_per_arm
        if summary.failed[arm] <= limit:
            return False
        error = str(row.get("error") or "").strip().splitlines()
        summary.stopped = (
            f"arm {arm!r} had {summary.failed[arm]} failed attempts in this run, more than "
            f"experiment.max_failures_per_arm = {limit}; last error: "
            f"{error[0][:300] if error else '?'} (log: {row.get('log_path')}). "
            "Fix the cause, then rerun with --resume"
        )
        return True

    def _collect(
        self,
        writer: ResultsWriter,
        ref: Any,
        f: InFlight,
        summary: RunSummary,
        progress: Any,
        *,
        only_ok: bool = False,
    ) -> dict[str, Any]:
        """Turn a finished task into rows, write them, update progress; return the boot row.

        `only_ok` (while cancelling): write only boots that completed, not the cancellations.
        """
        import ray
        from ray.exceptions import RayError

        rel_log = f"logs/{f.boot_id}.log"  # relative to the results dir, as `specab boot` does
        probes: list[dict[str, Any]] = []
        try:
            res: TaskResult = ray.get(ref)
        except RayError as exc:  # worker or node died, task cancelled
            text = str(exc).strip()
            first = text.splitlines()[0] if text else ""
            row = failed_row(self.spec, f, f"ray: {type(exc).__name__}: {first}", rel_log)
        else:
            if res.user_error is not None:
                raise SpecabError(res.user_error)
            if res.log_bytes is not None:
                atomic_write_bytes(writer.log_path(f.boot_id), res.log_bytes)
            row = {**failed_row(self.spec, f, "", rel_log), **res.boot_row}
            if row["status"] == "ok":
                probes = res.probe_rows
        if only_ok and row["status"] != "ok":
            return row
        stamp_row(row, self.spec.experiment.name, f, rel_log, self._seed(f.plan))
        writer.write_boot(
            BootRecord.model_validate(row), [ProbeRecord.model_validate(r) for r in probes]
        )
        if row["status"] == "ok":
            summary.ok[f.plan.arm] += 1
            node_counts = summary.per_node.setdefault(f.node.label, {})
            node_counts[f.plan.arm] = node_counts.get(f.plan.arm, 0) + 1
        summary.busy_s += float(row.get("boot_seconds") or 0.0)
        summary.busy_s += float(row.get("probe_seconds") or 0.0)
        progress.finished(f.boot_id, row, time.monotonic() - f.t0)
        return row

    def _cancel_all(self, writer: ResultsWriter, summary: RunSummary, progress: Any) -> None:
        """Graceful cancel (KeyboardInterrupt in the task: the server stops cleanly), then
        force (the per-boot watchdog kills the server groups of force-killed workers). Boots
        that complete during the grace period are written; the rest are simply missing,
        which `--resume` reruns."""
        import ray

        inflight: dict[Any, InFlight] = getattr(self, "_inflight", {})
        for ref in inflight:
            ray.cancel(ref, force=False)
        deadline = time.monotonic() + CANCEL_GRACE_S
        try:
            while inflight and time.monotonic() < deadline:
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=0.5)
                for ref in ready:
                    self._collect(writer, ref, inflight.pop(ref), summary, progress, only_ok=True)
        except KeyboardInterrupt:
            pass  # a second Ctrl-C: go straight to force
        for ref in inflight:
            ray.cancel(ref, force=True)
        if inflight:
            ray.wait(list(inflight), num_returns=len(inflight), timeout=10.0)
        inflight.clear()


def run_ab(spec_file: Path, opts: RunOptions, console: Console | None = None) -> RunSummary:
    """Run (or resume) one experiment; see the module docstring."""
    return Driver(spec_file, opts, console or Console(stderr=True)).run()
