"""The barrier of a duet (co-run group): boots launched together on one node begin their
probes at once, so their measurement windows overlap and the machine's state over those
seconds (another tenant, its thermal state, the page cache) is common to both speeds.

One `StartGates` actor per run (the driver's, no CPU) holds every group's barrier; a boot
arrives after its warmup (`wait_at_gate`) and waits until every member has, until the driver
releases the group (a member ended before it arrived), or until it has waited as long as it
took to boot (at least a minute). Only a boot
whose whole group arrived records the group (`BootRecord.corun_group`): a group broken by a
failure leaves its survivors as boots measured alone, never as a false pair.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

# A ready boot waits for its partners at most as long as it took itself to get there, and at
# least this long: a partner slower than that would not overlap it much anyway, and a stalled
# one must not hold a healthy boot.
GATE_MIN_WAIT_S = 60.0


class StartGates:
    """Every duet's barrier (a Ray async actor: waiting members hold no thread). A group is
    together when all its members arrived before it broke; it breaks when a member's wait
    times out or the driver releases it for a member that ended before arriving."""

    def __init__(self) -> None:
        self._arrived: dict[str, set[str]] = {}
        self._size: dict[str, int] = {}
        self._broken: set[str] = set()
        self._open: dict[str, asyncio.Event] = {}

    def _event(self, group: str) -> asyncio.Event:
        return self._open.setdefault(group, asyncio.Event())

    def _break(self, group: str) -> None:
        self._broken.add(group)
        self._event(group).set()

    def _complete(self, group: str) -> bool:
        return len(self._arrived.get(group, ())) >= self._size.get(group, 2)

    async def arrive(self, group: str, member: str, size: int, timeout_s: float) -> bool:
        """Wait at `group`'s barrier; True when every member arrived (the probes start
        together), False when the group broke (this boot measures alone)."""
        self._size[group] = size
        self._arrived.setdefault(group, set()).add(member)
        gate = self._event(group)
        if self._complete(group) and group not in self._broken:
            gate.set()
        try:
            await asyncio.wait_for(gate.wait(), timeout_s)
        except TimeoutError:
            self._break(group)
        return group not in self._broken

    async def release(self, group: str) -> None:
        """A member's attempt ended: if it never arrived, its partners stop waiting."""
        if not self._complete(group):
            self._break(group)

    def ping(self) -> bool:
        return True


@dataclass(frozen=True)
class GateTicket:
    """What a boot of a duet carries: the run's gates actor, its group and the group's size."""

    gates: Any  # the StartGates actor handle
    group: str
    size: int


def start_gates() -> Any:
    """The run's StartGates actor, ready (on the driver's side; it dies with the driver)."""
    import ray

    actor: Any = ray.remote(StartGates).options(num_cpus=0, max_concurrency=1000).remote()
    ray.get(actor.ping.remote())
    return actor


def wait_at_gate(ticket: GateTicket, member: str, booted_s: float) -> str | None:
    """Arrive at the ticket's barrier `booted_s` seconds after this boot started; the group,
    when every member arrived, else None (this boot measured alone)."""
    import ray

    timeout = max(GATE_MIN_WAIT_S, booted_s)
    together = ray.get(ticket.gates.arrive.remote(ticket.group, member, ticket.size, timeout))
    return ticket.group if together else None
