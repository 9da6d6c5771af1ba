"""Launch order and per-boot engine seeds: pure functions of the experiment seed; and where a
planned boot goes (`Place`) and how a launched one is remembered (`InFlight`).

Blocks of one boot per arm, shuffled within each block, so slow drift over the run (thermal
state, a noisy neighbour, a node that joins late) is spread evenly over the arms instead of
masquerading as an arm effect. Everything here is deterministic, so `--resume` re-derives the
same plan and the same seeds.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bench.experiment import Experiment
from bench.run.placement import AttemptSpec, NodeSlots

_SEED_SPACE = 2**31 - 1  # vLLM's --seed is a C int on some backends


@dataclass(frozen=True)
class PlannedBoot:
    """One boot of the plan: arm, its 0-based index within the arm, and its block."""

    arm: str
    boot: int
    block: int
    position: int  # index in the planned dispatch order (0-based)


def _block_rng(seed: int, block: int) -> random.Random:
    # A string seed is hashed with SHA-512 by `random`, stable across Python versions.
    return random.Random(f"specab-order:{seed}:{block}")


def plan_order(arms: Sequence[str], boots_per_arm: int, seed: int) -> list[PlannedBoot]:
    """Blocks b = 0..B-1, each holding one boot b of every arm, shuffled within the block."""
    if len(set(arms)) != len(arms):
        raise ValueError("arm names must be unique")
    out: list[PlannedBoot] = []
    for block in range(boots_per_arm):
        names = list(arms)
        _block_rng(seed, block).shuffle(names)
        for name in names:
            out.append(PlannedBoot(arm=name, boot=block, block=block, position=len(out)))
    return out


def missing_boots(plan: Sequence[PlannedBoot], ok: Mapping[str, set[int]]) -> list[PlannedBoot]:
    """The planned boots that have no `ok` row yet, in plan order (what `--resume` runs)."""
    return [p for p in plan if p.boot not in ok.get(p.arm, set())]


def engine_seed(seed: int, arm: str, boot: int, *, common_random_numbers: bool = False) -> int:
    """The engine `--seed` of one boot, derived from (experiment seed, arm, boot).

    With `common_random_numbers`, every arm's boot b gets the same engine seed, so arms in
    one block share their random streams (a variance-reduction device; it only helps when the
    arms consume random numbers identically, and on bit-stable CPU boots it makes the arms'
    boot-to-boot noise identical rather than independent). Default off: independent seeds.
    """
    key = (
        f"specab-engine:{seed}:{boot}"
        if common_random_numbers
        else f"specab-engine:{seed}:{arm}:{boot}"
    )
    digest = hashlib.sha256(key.encode()).digest()
    return int.from_bytes(digest[:8], "big") % _SEED_SPACE


def boot_seed(
    spec: Experiment, arm: str, boot: int, *, common_random_numbers: bool = False
) -> int | None:
    """The engine seed one boot runs with: `engine_seed` when server.per_boot_seed is on,
    else None (the server's own default). One rule for `specab boot` and run-ab."""
    if not spec.server.per_boot_seed:
        return None
    return engine_seed(spec.experiment.seed, arm, boot, common_random_numbers=common_random_numbers)


def pick_next(
    todo: Sequence[PlannedBoot],
    free: Mapping[str, int],
    per_node_arm: Mapping[tuple[str, str], int],
    per_node_total: Mapping[str, int],
    held: Collection[str] = (),
    barred: Collection[tuple[str, str]] = (),
) -> tuple[int, str] | None:
    """Choose (index into todo, node) for the next dispatch, or None when no slot is free
    (or every eligible boot belongs to an arm in `held`: one that waits for its attempt in
    flight to show whether its failure repeats). A (node, arm) pair in `barred` is never
    chosen: that node cannot run that arm (its image is not there).

    Only boots of the earliest pending block are eligible, so the block interleaving holds.
    Within it, the (boot, free node) pair whose arm has run fewest times on that node wins,
    then the node with fewest boots overall, then plan order and node name. Greedy
    "first boot to first free node" is not enough: whichever node frees up first would get
    whatever arm is next, and an arm can land on one node twice (a node effect that
    masquerades as an arm effect).
    """
    nodes = sorted(n for n, k in free.items() if k > 0)
    if not todo or not nodes:
        return None
    block = todo[0].block
    window = [i for i, p in enumerate(todo) if p.block == block and p.arm not in held]
    if not window:
        return None
    pairs = [(i, n) for i in window for n in nodes if (n, todo[i].arm) not in barred]
    if not pairs:
        return None
    i, node = min(
        pairs,
        key=lambda c: (
            per_node_arm.get((c[1], todo[c[0]].arm), 0),
            per_node_total.get(c[1], 0),
            c[0],
            c[1],
        ),
    )
    return i, node


@dataclass(frozen=True)
class Place:
    """Where the next boot goes: the planned boot, its node and the slot on that node (for
    a gang boot: the head's; `members` holds every member's node and slot, head first)."""

    plan: PlannedBoot
    node: NodeSlots
    slot: int  # index among the node's slots (CPU pinning uses it)
    members: tuple[tuple[NodeSlots, int], ...] = ()


@dataclass(frozen=True)
class InFlight:
    """A launched attempt, as the driver remembers it."""

    place: Place
    spec: AttemptSpec
    started_at: datetime
    t0: float  # monotonic launch time
    group: Any = None  # a gang boot's placement group
