"""The dispatch loop of one run-ab: launch attempts where the Dispatcher finds room, write
each finished one at once, retry failures, stop on limits, sequential looks or errors.

A failure certain to repeat stops the run at once instead of burning every retry
(`RepeatGuard`): an arm never ok here fails twice in a row before anything was measured
(before /health, at the patch check or its first request) with the same error (first line,
numbers blanked), or drafts nothing in two boots in a row. Nothing new is launched; running
boots finish and are written; `--resume` goes on once the cause is fixed. The driver is the
only writer; Ray tasks return records."""

from __future__ import annotations

import re
import time
from collections import Counter, deque
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.experiment import IMAGE_DIFFERS, Experiment
from bench.records import BootRecord, InFlightBoot, ProbeRecord
from bench.run.boot import IMAGE_UNREAD, BootRequest, GateTicket, failed_record
from bench.run.driver.bisection_run import BisectRun
from bench.run.driver.dispatch import Dispatcher
from bench.run.driver.duet_schedule import Pairing
from bench.run.driver.ledger import RunBooks, RunOptions
from bench.run.driver.order import InFlight, Place, PlannedBoot, boot_seed
from bench.run.driver.progress import Progress, Running
from bench.run.driver.repeat_guard import RepeatGuard, stop_message
from bench.run.driver.steering import Controller, steer
from bench.run.placement import AttemptSpec, TaskResult
from bench.store import atomic_write_bytes

CANCEL_GRACE_S = 30.0
_MEMBER_IMAGE = re.compile(  # a gang member's node lacks the arm's image, or holds another
    rf"^gang member \d+ .*(?:{re.escape(IMAGE_UNREAD)}|{re.escape(IMAGE_DIFFERS)}) \S+"
    r"(?: with \S+)? on node (?P<node>[^\s:]+)"
)
# Attempt errors that mean the node is gone (a dead node's raylet, a node Ray has removed).
_NODE_DEAD = ("ray: NodeDiedError", "ray: TaskUnschedulableError", "ray: NodeLost")


def _where(f: InFlight) -> str:
    """The attempt's node, or every member's node of a gang boot."""
    return ", ".join(n.label for n, _ in f.place.members) or f.place.node.label


def _in_flight(f: InFlight) -> InFlightBoot:
    """What `specab status` shows of a running attempt (from the claim)."""
    a = f.spec.request.attempt
    started = datetime.now(UTC) - timedelta(seconds=time.monotonic() - f.t0)
    return InFlightBoot(
        boot_id=a.boot_id, arm=a.arm, boot=a.boot, attempt=a.number, host=a.host,
        started_at=started.isoformat(timespec="seconds"),
    )  # fmt: skip


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


class RunLoop:
    """The dispatch loop of one run: launch, collect, write, retry, stop."""

    def __init__(
        self,
        spec: Experiment,
        spec_file: Path,
        opts: RunOptions,
        books: RunBooks,
        *,
        progress: Progress,
        dispatch: Dispatcher,
        seq: Controller,
    ) -> None:
        import ray

        self.spec, self.opts, self.spec_file = spec, opts, _task_spec_file(spec_file)
        self.writer, self.ledger, self.summary = books.writer, books.ledger, books.summary
        self.definitions, self.images = books.definitions, books.images
        self.progress, self.dispatch, self.seq = progress, dispatch, seq
        self.driver_node = str(ray.get_runtime_context().get_node_id())
        self.cpu_only = self.spec.resources.gpu == 0 and self.spec.resources.cpu >= 1
        self.tries: Counter[tuple[str, int]] = Counter()  # attempts in this run
        duets = opts.duets and dispatch.duets_possible()
        alone = frozenset(a.name for a in spec.arms if a.reference)  # no server to co-run
        self.pairing = Pairing(spec.experiment.baseline or "", alone) if duets else None
        self.repeat = RepeatGuard(arm for arm, boots in books.ledger.ok.items() if boots)

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
            self._launch_what_fits(todo)
            for ref, f in self.dispatch.finished(timeout_s=1.0):
                record = self._collect(ref, f)
                if record.status != "ok" and self._after_failure(f.place.plan, record, todo):
                    return
                if record.no_drafts and self.repeat.repeats(record):
                    self._stop_repeating(record, todo)
            for f in self.dispatch.on_dead_nodes():
                record = self._abandoned(f)
                if self._after_failure(f.place.plan, record, todo):
                    return
            if todo and not self.dispatch.can_place():
                self._no_nodes_left(todo)
                return
            steer(self.seq, todo, bool(self.dispatch.inflight), self.summary.ok, self.progress.note)
            self.writer.note_in_flight([_in_flight(f) for f in self.dispatch.inflight.values()])
            self.progress.refresh()

    def _launch_what_fits(self, todo: deque[PlannedBoot]) -> None:
        """Launch boots while there is room: one at a time, or a duet's group at once."""
        if self.pairing is None:
            while (place := self.dispatch.reserve(todo, self._held())) is not None:
                self._launch(place)
            return
        while group := self.dispatch.reserve_group(todo, self._held(), self.pairing):
            gate = self.pairing.ticket(group[0].node.label, [p.plan.arm for p in group])
            for place in group:
                self._launch(place, gate)

    def _no_nodes_left(self, todo: deque[PlannedBoot]) -> None:
        gone = ", ".join(self.dispatch.lost_nodes)
        self.summary.stopped = (
            f"no live Ray node left to run the remaining {len(todo)} boot(s): {gone} left the "
            "cluster. Bring nodes back (or start new ones), then rerun with --resume"
        )
        self.progress.note(f"stopping: {self.summary.stopped}")
        todo.clear()

    def _node_failed(self, f: InFlight, record: BootRecord) -> None:
        """After a failed attempt: it no longer counts towards its arm's share of the node,
        a node Ray reports dead takes no more boots, and a node that cannot read the arm's
        image takes none of that arm."""
        self.dispatch.uncount(f)
        error = record.error or ""
        member = _MEMBER_IMAGE.search(error)
        if error.startswith((IMAGE_UNREAD, IMAGE_DIFFERS)) or member is not None:
            where = self.dispatch.bar(f, member["node"] if member else "")
            self.progress.note(f"node {where} cannot serve arm {record.arm}'s image: no more there")
        if not error.startswith("ray:"):
            return
        dead = error.startswith(_NODE_DEAD)  # Ray's own words, before its node table agrees
        for label in self.dispatch.drop_lost(f, dead=dead):
            self.progress.note(
                f"node {label} left the cluster ({record.boot_id}: {record.error}); nothing "
                "more is placed there and its boots are retried on the live nodes"
            )

    def _held(self) -> set[str]:
        """Arms whose next attempt waits: a suspect arm with an attempt in flight, so that a
        failure certain to repeat costs two attempts, not one per free slot."""
        running = {f.spec.request.attempt.arm for f in self.dispatch.inflight.values()}
        return {arm for arm in running if self.repeat.suspect(arm)}

    def _launch(self, place: Place, gate: GateTicket | None = None) -> None:
        p, node = place.plan, place.node
        hosts = tuple(n.label for n, _ in place.members)  # a gang boot: every member's node
        attempt = self.ledger.claim(
            self.writer, p.arm, p.boot, block=p.block, host=node.label, member_hosts=hosts,
            slot=place.slot,
        )  # fmt: skip
        self.tries[(p.arm, p.boot)] += 1
        crn = self.opts.common_random_numbers
        seed = boot_seed(self.spec, p.arm, p.boot, common_random_numbers=crn)
        image = self.images.get(p.arm, "")
        spec = AttemptSpec(
            request=BootRequest(self.spec, self.spec_file, attempt, seed, gate, image),
            driver_log=str(self.writer.log_path(attempt.boot_id)),
            driver_node_id=self.driver_node,
            compile_cache=self.opts.compile_cache,
            compile_cache_gb=self.opts.compile_cache_gb,
            definition=self.definitions.get(p.arm, ""),
            cpu_slot=place.slot if self.cpu_only else None,
            member_slots=tuple(s if self.cpu_only else None for _, s in place.members[1:]),
        )
        f = self.dispatch.launch(place, spec)
        run = Running(p.arm, p.boot, attempt.number, node.label, f.t0)
        self.progress.started(attempt.boot_id, run)

    def _after_failure(self, p: PlannedBoot, record: BootRecord, todo: deque[PlannedBoot]) -> bool:
        """Retry the boot or give it up; True when the run must stop at once."""
        if self.summary.stopped:  # stopping already: running boots finish, nothing is retried
            self.summary.failed[p.arm] += 1
            return False
        if self._too_many_failures(p.arm, record):
            self.progress.note(f"stopping: {self.summary.stopped}")
            self._cancel_all()
            return True
        if self.repeat.repeats(record):
            if isinstance(self.seq, BisectRun) and self.seq.skip(record, todo, self.progress.note):
                return False  # a point of a history is passed over, as git bisect skip does
            self._stop_repeating(record, todo)
            return False
        if self.tries[(p.arm, p.boot)] < self.spec.experiment.max_attempts:
            todo.appendleft(p)  # retry next, keeping the block order intact
        else:
            self.summary.lost.append((p.arm, p.boot))
        return False

    def _stop_repeating(self, record: BootRecord, todo: deque[PlannedBoot]) -> None:
        self.summary.stopped = stop_message(record, self.writer.root)
        self.progress.note(f"stopping: {self.summary.stopped.splitlines()[0]}")
        todo.clear()  # launch nothing new; the boots running now finish and are written

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

    def _result(
        self, ref: Any, f: InFlight, cancelled: bool = False
    ) -> tuple[BootRecord, list[ProbeRecord]]:
        """The task's record and probes; a record of our own when the task produced none.
        A `cancelled` task's own error is the cancellation's doing, never raised: Ray's
        graceful cancel interrupts its code anywhere (seen: Ray's own SIGINT deferral raising
        TypeError as the task returned), and the error that stopped the run must stay the
        one the user sees."""
        import ray
        from ray.exceptions import RayError, RayTaskError, TaskCancelledError

        try:
            res: TaskResult = ray.get(ref)
        except RayError as exc:
            code_raised = isinstance(exc, RayTaskError) and not isinstance(exc, TaskCancelledError)
            if code_raised and not cancelled:
                raise  # the task's code raised: a bug, shown with its remote traceback
            text = str(exc).strip()  # worker or node died, task cancelled
            first = text.splitlines()[0] if text else ""
            error = f"ray: {type(exc).__name__} on {_where(f)}: {first}"
            return failed_record(f.spec.request, error, started_at=f.started_at), []
        if res.user_error is not None:
            if not cancelled:
                raise res.user_error
            return failed_record(f.spec.request, str(res.user_error), started_at=f.started_at), []
        assert res.record is not None, "a task returns a record or a user error"
        log = self.writer.log_path(res.record.boot_id)
        if res.log_bytes is not None:
            atomic_write_bytes(log, res.log_bytes)
        for name, data in res.member_logs.items():  # a gang boot's other members
            atomic_write_bytes(log.with_name(name), data)
        return res.record, res.probes

    def _abandoned(self, f: InFlight) -> BootRecord:
        """The record of an attempt given up because Ray lists its node dead."""
        error = (
            f"ray: NodeLost on {_where(f)}: the cluster marked the node dead (it stopped answering "
            "Ray's health checks) while the attempt ran; the attempt was given up"
        )
        record = failed_record(f.spec.request, error, started_at=f.started_at)
        self._write(record, [], f)
        return record

    def _collect(self, ref: Any, f: InFlight, *, only_ok: bool = False) -> BootRecord:
        """Write a finished attempt and count it; return its record.

        `only_ok` (while cancelling): write only boots that completed, not the cancellations.
        """
        record, probes = self._result(ref, f, cancelled=only_ok)
        if only_ok and record.status != "ok":
            return record
        self._write(record, probes, f)
        return record

    def _write(self, record: BootRecord, probes: list[ProbeRecord], f: InFlight) -> None:
        gate = f.spec.request.gate
        if gate is not None:  # its partners stop waiting for an attempt that has ended
            gate.gates.release.remote(gate.group)
        self.writer.write_boot(record, probes)
        if record.status != "ok":
            self._node_failed(f, record)
        arm, summary = record.arm, self.summary
        if record.status == "ok":
            summary.ok[arm] += 1
            if not record.no_drafts:  # a boot that drafted nothing proves nothing of the arm
                self.repeat.ok(arm)
            node_counts = summary.per_node.setdefault(f.place.node.label, {})
            node_counts[arm] = node_counts.get(arm, 0) + 1
        summary.busy_s += (record.boot_seconds or 0.0) + (record.probe_seconds or 0.0)
        self.progress.finished(record, time.monotonic() - f.t0)
        if self.opts.on_boot is not None:
            self.opts.on_boot(record, self.writer.results)

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
