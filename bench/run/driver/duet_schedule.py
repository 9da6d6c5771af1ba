"""Duet scheduling: on a node with two or more slots, the boots of a co-run group are launched
together into all of its slots and begin their probes at one barrier
(`bench.run.boot.start_gate`), so whatever the machine does over those seconds is shared by
the group and cancels in a comparison within it (Bulej et al., "Duet Benchmarking", 2020).

Which boots share a group: the first is the one `pick_next` chooses (earliest pending block,
the arm that ran least on that node); its partners come from the same or the next block, an
arm not yet in the group first, then one that puts the baseline in the group, then the pair
of arms that met least so far, then plan order. With as many arms as slots every group is one
block; with more arms than slots the groups rotate the pairs as an incomplete-block design
does, each arm meeting the baseline as often as the boots allow. Gang boots and one-slot nodes
keep the one-boot-at-a-time schedule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.run.boot import GateTicket, start_gates
from bench.run.driver.order import PlannedBoot


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


@dataclass
class Pairing:
    """Who has met whom in a group so far, and the run's gates (made at the first group)."""

    baseline: str
    alone: frozenset[str] = frozenset()  # arms measured without partners (reference arms)
    met: Counter[tuple[str, str]] = field(default_factory=Counter)
    groups: int = 0
    gates: Any = None  # the StartGates actor

    def partners(
        self,
        todo: Sequence[PlannedBoot],
        first: int,
        room: int,
        eligible: Callable[[PlannedBoot], bool],
    ) -> list[int]:
        """Indices into `todo` of up to `room` partners for `todo[first]` (see the module
        docstring for the order of preference)."""
        if room < 1 or not todo or todo[first].arm in self.alone:
            return []
        last_block = todo[0].block + 1
        window = [
            i
            for i, p in enumerate(todo)
            if i != first and p.block <= last_block and eligible(p) and p.arm not in self.alone
        ]
        chosen: list[int] = []
        arms = [todo[first].arm]
        for _ in range(room):
            left = [i for i in window if i not in chosen]
            if not left:
                break

            def rank(i: int) -> tuple[bool, bool, int, int, int]:
                arm = todo[i].arm
                with_baseline = self.baseline in arms or arm == self.baseline
                met = sum(self.met[_pair(arm, b)] for b in arms)
                return (arm in arms, not with_baseline, met, todo[i].block, i)

            best = min(left, key=rank)
            chosen.append(best)
            arms.append(todo[best].arm)
        return chosen

    def ticket(self, node: str, arms: Sequence[str]) -> GateTicket | None:
        """A group of these arms starts on `node`: its barrier (None for a lone boot), every
        pair of it counted."""
        if len(arms) < 2:
            return None
        if self.gates is None:
            self.gates = start_gates()
        self.count(arms)
        return GateTicket(self.gates, f"{node}/d{self.groups - 1}", len(arms))

    def count(self, arms: Sequence[str]) -> None:
        """A group of these arms started: it and every pair of it counted."""
        self.groups += 1
        for i, a in enumerate(arms):
            for b in arms[i + 1 :]:
                self.met[_pair(a, b)] += 1
