"""Ray tasks in flight and the node slots they hold: the dispatch state of one run-ab.

The driver asks for a place (`reserve`: the next boot of the earliest pending block on the
node that balances arms best, see `pick_next`), builds the attempt, launches it there with
node affinity (`launch`) and gets finished attempts back (`finished`), which frees their
slots. Cancelling (graceful, then forced) also goes through here.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, MutableSequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bench.run._cluster import NodeSlots
from bench.run._ordering import PlannedBoot, pick_next
from bench.run._task import AttemptSpec, TaskResult


@dataclass(frozen=True)
class Place:
    """Where the next boot goes: the planned boot, its node and the slot on that node."""

    plan: PlannedBoot
    node: NodeSlots
    slot: int  # index among the node's slots (CPU pinning uses it)


@dataclass(frozen=True)
class InFlight:
    """A launched attempt, as the driver remembers it."""

    place: Place
    spec: AttemptSpec
    started_at: datetime
    t0: float  # monotonic launch time


class Dispatcher:
    """Owns the free slots per node, the per-node arm counts and the tasks in flight."""

    def __init__(
        self,
        nodes: list[NodeSlots],
        cap: int,
        options: dict[str, Any],
        task: Callable[[AttemptSpec], TaskResult],
    ) -> None:
        import ray

        self.cap = cap
        self._free = {n.node_id: set(range(n.slots)) for n in nodes}
        self._nodes = {n.node_id: n for n in nodes}
        self._per_node_arm: Counter[tuple[str, str]] = Counter()
        self._per_node_total: Counter[str] = Counter()
        self._remote = ray.remote(task)
        self._options = options
        self.inflight: dict[Any, InFlight] = {}

    def reserve(self, todo: MutableSequence[PlannedBoot]) -> Place | None:
        """Take the next boot off `todo` with a free slot for it, or None (all busy)."""
        if len(self.inflight) >= self.cap:
            return None
        free = {node_id: len(slots) for node_id, slots in self._free.items()}
        pick = pick_next(todo, free, self._per_node_arm, self._per_node_total)
        if pick is None:
            return None
        index, node_id = pick
        plan = todo[index]
        del todo[index]
        slot = min(self._free[node_id])
        self._free[node_id].discard(slot)
        return Place(plan, self._nodes[node_id], slot)

    def launch(self, place: Place, spec: AttemptSpec) -> InFlight:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        node_id = place.node.node_id
        strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
        ref = self._remote.options(**self._options, scheduling_strategy=strategy).remote(spec)
        self._per_node_arm[(node_id, place.plan.arm)] += 1
        self._per_node_total[node_id] += 1
        f = InFlight(place, spec, datetime.now(UTC), time.monotonic())
        self.inflight[ref] = f
        return f

    def finished(self, timeout_s: float) -> list[tuple[Any, InFlight]]:
        """Attempts that ended within `timeout_s` (at most one), their slots freed."""
        import ray

        if not self.inflight:
            return []
        ready, _ = ray.wait(list(self.inflight), num_returns=1, timeout=timeout_s)
        out = []
        for ref in ready:
            f = self.inflight.pop(ref)
            self._free[f.place.node.node_id].add(f.place.slot)
            out.append((ref, f))
        return out

    def cancel(self, *, force: bool) -> None:
        """Graceful: KeyboardInterrupt in the task, the server stops cleanly. Forced: the
        worker is killed, the boot's watchdog kills its server groups."""
        import ray

        refs = list(self.inflight)
        if not refs:
            return
        # Cancel only what is still running: cancelling a task whose reply is arriving races
        # in Ray's core worker ("Tried to complete task that was not pending", a fatal check
        # that kills the driver; ray-project/ray#54798). Finished ones are collected as usual.
        _, pending = ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in pending:
            ray.cancel(ref, force=force)

    def drop_all(self, timeout_s: float) -> None:
        """Wait briefly for force-cancelled tasks to end, then forget them."""
        import ray

        if self.inflight:
            ray.wait(list(self.inflight), num_returns=len(self.inflight), timeout=timeout_s)
        self.inflight.clear()
