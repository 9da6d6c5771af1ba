"""Ray tasks in flight and the node slots they hold: the dispatch state of one run-ab.

The driver asks for a place (`reserve`: the next boot of the earliest pending block on the
node that balances arms best, see `pick_next`), builds the attempt, launches it there with
node affinity (`launch`) and gets finished attempts back (`finished`), which frees their
slots. Cancelling (graceful, then forced) also goes through here.

Gang boots (`[resources] nodes = N`) take a slot on N distinct nodes of one fabric group
(`NodeSlots.fabric`: nodes of two linked pairs never mix): the head goes where `pick_next`
puts it among nodes whose group has N free (the node where that arm was head least often, so
the head rotates over the nodes), the other members to the free nodes of its group where the
arm ran least (then fewest boots, then name). One placement group per boot, STRICT_SPREAD,
each bundle pinned to its chosen node (label `ray.io/node-id`); the task runs in bundle 0
and starts the other members in the others; the group is removed when the task ends, which
also ends its members' actors.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Collection, MutableSequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from bench.run.driver.duet_schedule import Pairing
from bench.run.driver.order import InFlight, Place, PlannedBoot, pick_next
from bench.run.placement import AttemptSpec, NodeSlots, TaskResult, placement_failed

PLACE_TIMEOUT_S = 120.0  # a gang's placement group on nodes with free slots is ready at once
NODE_CHECK_S = 2.0  # how often in-flight attempts are checked against Ray's live nodes


class Dispatcher:
    """Owns the free slots per node, the per-node arm counts and the tasks in flight."""

    def __init__(
        self,
        nodes: list[NodeSlots],
        cap: int,
        options: dict[str, Any],
        task: Callable[[AttemptSpec], TaskResult],
        *,
        gang: int = 1,
        bundle: dict[str, float] | None = None,
    ) -> None:
        import ray

        self.cap = cap
        self.gang = gang
        self._bundle = bundle or {}
        self._free = {n.node_id: set(range(n.slots)) for n in nodes}
        self._nodes = {n.node_id: n for n in nodes}
        self._per_node_arm: Counter[tuple[str, str]] = Counter()  # head (or single) role
        self._member_arm: Counter[tuple[str, str]] = Counter()  # any member of a gang
        self._per_node_total: Counter[str] = Counter()
        self._slot_arm: Counter[tuple[str, int, str]] = Counter()  # (node, slot, arm) launches
        self._barred: set[tuple[str, str]] = set()  # (node, arm): the node cannot run it
        self.lost_nodes: list[str] = []  # labels of nodes that left the cluster mid-run
        self._checked = 0.0  # when on_dead_nodes last asked Ray for its node table
        self._remote = ray.remote(task)
        self._failed = ray.remote(placement_failed)
        self._options = options
        self.inflight: dict[Any, InFlight] = {}

    def reserve(
        self, todo: MutableSequence[PlannedBoot], hold: Collection[str] = ()
    ) -> Place | None:
        """Take the next boot off `todo` with a free slot for it, or None (all busy, or only
        boots of arms in `hold` are eligible)."""
        if len(self.inflight) >= self.cap:
            return None
        free = self._gang_room({node_id: len(slots) for node_id, slots in self._free.items()})
        if sum(1 for k in free.values() if k > 0) < self.gang:
            return None
        pick = pick_next(
            todo, free, self._per_node_arm, self._per_node_total, hold, self._barring()
        )
        if pick is None:
            return None
        index, node_id = pick
        plan = todo[index]
        fabric = self._nodes[node_id].fabric
        barred = self._barring()  # a member's node is barred like a head's (its image)
        others = sorted(
            (
                n
                for n, k in free.items()
                if k > 0
                and n != node_id
                and self._fabric(n) == fabric
                and (n, plan.arm) not in barred
            ),
            key=lambda n: (self._member_arm[(n, plan.arm)], self._per_node_total[n], n),
        )[: self.gang - 1]
        if len(others) < self.gang - 1:  # its members' nodes are busy: wait for them
            return None
        del todo[index]
        taken = []
        for n in (node_id, *others):
            taken.append((self._nodes[n], self._take_slot(n, plan.arm)))
        members = tuple(taken) if self.gang > 1 else ()
        return Place(plan, taken[0][0], taken[0][1], members)

    def _take_slot(self, node_id: str, arm: str) -> int:
        """Counterbalanced: the free slot this arm ran in least on this node (a slower core
        or GPU then falls on every arm alike instead of becoming an arm effect)."""
        slot = min(self._free[node_id], key=lambda s: (self._slot_arm[(node_id, s, arm)], s))
        self._free[node_id].discard(slot)
        return slot

    def reserve_group(
        self, todo: MutableSequence[PlannedBoot], hold: Collection[str], pairing: Pairing
    ) -> list[Place]:
        """Duets (`duet_schedule`): the next boot and its partners into a node whose slots are
        all free (a one-slot node: one boot, as `reserve`); [] when no node has room."""
        if len(self.inflight) >= self.cap:
            return []
        whole = {n: len(s) for n, s in self._free.items() if len(s) == self._nodes[n].slots}
        barred = self._barring()
        pick = pick_next(todo, whole, self._per_node_arm, self._per_node_total, hold, barred)
        if pick is None:
            return []
        index, node_id = pick
        room = min(len(self._free[node_id]), self.cap - len(self.inflight)) - 1
        others = pairing.partners(
            todo, index, room, lambda p: p.arm not in hold and (node_id, p.arm) not in barred
        )
        plans = [todo[i] for i in (index, *others)]
        for i in sorted((index, *others), reverse=True):
            del todo[i]
        return [Place(p, self._nodes[node_id], self._take_slot(node_id, p.arm)) for p in plans]

    def bar(self, f: InFlight, label: str = "") -> str:
        """The attempt's node (or its gang member's named `label`) cannot run its arm (its
        image is not there, or not the head's): its boots go elsewhere. Returns the label."""
        node = next((n for n, _ in f.place.members if n.label == label), f.place.node)
        self._barred.add((node.node_id, f.place.plan.arm))
        return node.label

    def _barring(self) -> set[tuple[str, str]]:
        """The bars in force: none for an arm every live node is barred from (its boots then
        fail where they land, and its attempts run out, rather than wait forever)."""
        live = set(self._free)
        open_arms = {  # at least one boot's worth of nodes (a gang's: `gang`) left unbarred
            a for _, a in self._barred if sum((m, a) not in self._barred for m in live) >= self.gang
        }
        return {(n, a) for n, a in self._barred if a in open_arms}

    def _fabric(self, node_id: str) -> str:
        return self._nodes[node_id].fabric

    def _gang_room(self, free: dict[str, int]) -> dict[str, int]:
        """The free slots of nodes whose fabric group has a free slot on `gang` nodes."""
        if self.gang == 1:
            return free
        busy = Counter(self._fabric(n) for n, k in free.items() if k > 0)
        return {n: k for n, k in free.items() if busy[self._fabric(n)] >= self.gang}

    def duets_possible(self) -> bool:
        """Single-node boots, two at a time at least, on a node with two slots or more."""
        most = max((n.slots for n in self._nodes.values()), default=0)
        return self.gang == 1 and self.cap >= 2 and most >= 2

    def can_place(self) -> bool:
        """Enough live nodes remain for one boot (a gang: `gang` of one fabric group)."""
        groups = Counter(self._fabric(n) for n in self._free)
        return max(groups.values(), default=0) >= self.gang

    def drop_lost(self, f: InFlight, *, dead: bool = False) -> list[str]:
        """Labels of this attempt's nodes that Ray no longer lists alive (a single node's
        attempt: also when `dead`, Ray's error said so before its node table did); their
        slots are dropped, so no retry is pinned to a dead node (node affinity fails there)."""
        # A gang's error does not say which member's node died: ask Ray's node table.
        alive = set() if dead and not f.place.members else _alive_nodes()
        gone = [n for n, _ in _slots_of(f) if n.node_id in self._free and n.node_id not in alive]
        for n in gone:
            del self._free[n.node_id]
            self.lost_nodes.append(n.label)
        return [n.label for n in gone]

    def on_dead_nodes(self) -> list[InFlight]:
        """Attempts in flight on a node Ray lists dead, taken out of flight (checked every
        NODE_CHECK_S). Ray itself may never fail them: a node cut off the network leaves the
        task's call hanging with no reply, so the driver gives the attempt up here."""
        import ray

        now = time.monotonic()
        if not self.inflight or now - self._checked < NODE_CHECK_S:
            return []
        self._checked = now
        alive = _alive_nodes()
        out = []
        for ref, f in list(self.inflight.items()):
            if all(n.node_id in alive for n, _ in _slots_of(f)):
                continue
            del self.inflight[ref]
            self._release(f)
            with contextlib.suppress(Exception):  # best effort: the node may never hear it
                ray.cancel(ref, force=True)
            out.append(f)
        return out

    def uncount(self, f: InFlight) -> None:
        """A failed attempt does not count towards its arm's share of a node: the retry is
        balanced as if the attempt had never run."""
        self._per_node_arm[(f.place.node.node_id, f.place.plan.arm)] -= 1
        for n, slot in _slots_of(f):
            self._member_arm[(n.node_id, f.place.plan.arm)] -= 1
            self._per_node_total[n.node_id] -= 1
            self._slot_arm[(n.node_id, slot, f.place.plan.arm)] -= 1

    def _placement_group(self, place: Place) -> tuple[Any, str | None]:
        """The gang's placement group, ready; or None and why it could not be placed."""
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group

        pg = placement_group(
            [dict(self._bundle) for _ in place.members],
            strategy="STRICT_SPREAD",
            bundle_label_selector=[{"ray.io/node-id": n.node_id} for n, _ in place.members],
        )
        ready, _ = ray.wait([pg.ready()], timeout=PLACE_TIMEOUT_S)
        if ready:
            return pg, None
        remove_placement_group(pg)
        where = ", ".join(n.label for n, _ in place.members)
        return None, f"placement group on {where} not ready within {PLACE_TIMEOUT_S:.0f} s"

    def launch(self, place: Place, spec: AttemptSpec) -> InFlight:
        from ray.util.scheduling_strategies import (
            NodeAffinitySchedulingStrategy,
            PlacementGroupSchedulingStrategy,
        )

        node_id = place.node.node_id
        pg = None
        if self.gang > 1:
            pg, why = self._placement_group(place)
            if pg is None:
                ref = self._failed.options(num_cpus=0).remote(spec, f"gang placement: {why}")
            else:
                strategy: Any = PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=0)
                members = {k: v for k, v in self._options.items() if k != "max_retries"}
                spec = replace(spec, member_options=members)
                opts = {**self._options, "scheduling_strategy": strategy}
                ref = self._remote.options(**opts).remote(spec)
        else:
            strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
            ref = self._remote.options(**self._options, scheduling_strategy=strategy).remote(spec)
        self._per_node_arm[(node_id, place.plan.arm)] += 1
        for n, slot in place.members or ((place.node, place.slot),):
            self._member_arm[(n.node_id, place.plan.arm)] += 1
            self._per_node_total[n.node_id] += 1
            self._slot_arm[(n.node_id, slot, place.plan.arm)] += 1
        f = InFlight(place, spec, datetime.now(UTC), time.monotonic(), pg)
        self.inflight[ref] = f
        return f

    def _release(self, f: InFlight) -> None:
        for n, slot in _slots_of(f):
            if n.node_id in self._free:  # not a node that left the cluster
                self._free[n.node_id].add(slot)
        if f.group is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(f.group)  # also ends any member actor still in it

    def finished(self, timeout_s: float) -> list[tuple[Any, InFlight]]:
        """Attempts that ended within `timeout_s` (at most one), their slots freed."""
        import ray

        if not self.inflight:
            return []
        ready, _ = ray.wait(list(self.inflight), num_returns=1, timeout=timeout_s)
        out = []
        for ref in ready:
            f = self.inflight.pop(ref)
            self._release(f)
            out.append((ref, f))
        return out

    def cancel(self, *, force: bool) -> None:
        """Graceful: KeyboardInterrupt in the task, the server stops cleanly. Forced: the
        worker is killed, the boot's watchdog kills its server groups (a gang: Ray ends the
        members' actors with their owner, and each member's watchdog kills its member)."""
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
        for f in self.inflight.values():
            self._release(f)
        self.inflight.clear()


def _slots_of(f: InFlight) -> tuple[tuple[NodeSlots, int], ...]:
    """Every (node, slot) the attempt holds: a gang's members, else its one node."""
    return f.place.members or ((f.place.node, f.place.slot),)


def _alive_nodes() -> set[str]:
    import ray

    return {str(n["NodeID"]) for n in ray.nodes() if n.get("Alive")}
