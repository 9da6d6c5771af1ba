"""Duet scheduling (`bench.run.driver.duet_schedule`, `Dispatcher.reserve_group`) and the
barrier its groups meet at (`bench.run.boot.StartGates`): groups fill a node whose slots are
all free, pair every arm with the baseline as often as the boots allow, keep the slots
counterbalanced and the block interleaving; a member that never arrives breaks its group
instead of holding its partners; only a group whose members all arrived is recorded."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from bench.run.boot import StartGates
from bench.run.driver import Dispatcher, Pairing, plan_order
from bench.run.placement import NodeSlots
from bench.stats.inputs import corun_groups


def _dispatcher(nodes: list[NodeSlots], cap: int) -> Dispatcher:
    return Dispatcher(nodes, cap, {}, lambda a: None)  # type: ignore[arg-type,return-value]


def _schedule(arms: list[str], boots: int, slots: int, seed: int = 0) -> list[list[tuple]]:
    """Every group the dispatcher forms for a whole run on one node, members freed at once
    after each group (what launch() and a finished attempt count, without Ray)."""
    d = _dispatcher([NodeSlots("n1", "a", slots)], slots)
    todo = plan_order(arms, boots, seed=seed)
    pairing = Pairing(arms[0])
    groups = []
    while todo:
        earliest = todo[0].block
        group = d.reserve_group(todo, (), pairing)
        assert group, "a node with every slot free always takes a group"
        assert all(p.plan.block <= earliest + 1 for p in group)  # interleaving kept
        pairing.count([p.plan.arm for p in group])
        groups.append([(p.plan.arm, p.plan.boot, p.slot) for p in group])
        for p in group:
            d._slot_arm[("n1", p.slot, p.plan.arm)] += 1
            d._per_node_arm[("n1", p.plan.arm)] += 1
            d._per_node_total["n1"] += 1
        assert d.reserve_group(todo, (), pairing) == []  # no new group while it runs
        for p in group:
            d._free["n1"].add(p.slot)
    return groups


def test_as_many_arms_as_slots_every_group_is_the_baseline_and_the_arm() -> None:
    groups = _schedule(["base", "fix"], boots=8, slots=2, seed=2)
    assert len(groups) == 8
    assert all(sorted(a for a, _, _ in g) == ["base", "fix"] for g in groups)
    used = Counter((a, s) for g in groups for a, _, s in g)
    for arm in ("base", "fix"):  # counterbalanced: each arm in each slot about as often
        assert abs(used[(arm, 0)] - used[(arm, 1)]) <= 1, dict(used)


def test_more_arms_than_slots_rotate_the_pairs_and_favour_the_baseline() -> None:
    groups = _schedule(["base", "x", "y"], boots=12, slots=2, seed=1)
    assert sum(len(g) for g in groups) == 36  # every boot placed once
    pairs = Counter(tuple(sorted(a for a, _, _ in g)) for g in groups if len(g) == 2)
    assert all(len(set(a for a, _, _ in g)) == len(g) for g in groups)  # distinct arms
    assert pairs[("base", "x")] >= 5 and pairs[("base", "y")] >= 5, pairs
    assert pairs[("base", "x")] + pairs[("base", "y")] > pairs[("x", "y")], pairs


def test_one_slot_nodes_and_a_cap_of_one_keep_one_boot_at_a_time() -> None:
    d = _dispatcher([NodeSlots("n1", "a", 1), NodeSlots("n2", "b", 1)], 2)
    assert not d.duets_possible()
    todo = plan_order(["base", "fix"], 2, seed=0)
    group = d.reserve_group(todo, (), Pairing("base"))
    assert len(group) == 1
    assert not _dispatcher([NodeSlots("n1", "a", 4)], 1).duets_possible()
    assert _dispatcher([NodeSlots("n1", "a", 4)], 2).duets_possible()


def test_the_cap_bounds_a_group() -> None:
    d = _dispatcher([NodeSlots("n1", "a", 4)], 3)
    group = d.reserve_group(plan_order(["base", "x", "y", "z"], 2, seed=0), (), Pairing("base"))
    assert len(group) == 3 and "base" in {p.plan.arm for p in group}


def test_the_barrier_opens_when_every_member_arrived() -> None:
    async def go() -> tuple[list[bool], float]:
        gates = StartGates()
        t0 = asyncio.get_running_loop().time()
        early = asyncio.create_task(gates.arrive("g", "a", 2, 30.0))
        await asyncio.sleep(0.3)
        assert not early.done()  # waits for its partner
        late = await gates.arrive("g", "b", 2, 30.0)
        await gates.release("g")  # a member that finished: the group stays together
        return [await early, late], asyncio.get_running_loop().time() - t0

    together, waited = asyncio.run(go())
    assert together == [True, True] and waited < 5.0


def test_a_member_that_ended_or_stalled_breaks_the_group_for_everyone() -> None:
    async def released() -> list[bool]:
        gates = StartGates()
        waiting = asyncio.create_task(gates.arrive("g", "a", 2, 30.0))
        await asyncio.sleep(0.1)
        await gates.release("g")  # the driver: member b ended before it arrived
        return [await waiting, await gates.arrive("g", "b", 2, 30.0)]

    async def timed_out() -> list[bool]:
        gates = StartGates()
        alone = await gates.arrive("g", "a", 2, 0.2)
        late = await gates.arrive("g", "b", 2, 30.0)  # came after a measured alone
        return [alone, late]

    assert asyncio.run(released()) == [False, False]  # neither is recorded in a group
    assert asyncio.run(timed_out()) == [False, False]


def _boot(boot_id: str, start_s: float, end_s: float, group: str | None, status: str = "ok"):  # type: ignore[no-untyped-def]
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    return {
        "boot_id": boot_id, "host": "h", "status": status, "corun_group": group,
        "ready_at": t0 + timedelta(seconds=start_s), "finished_at": t0 + timedelta(seconds=end_s),
    }  # fmt: skip


@pytest.mark.parametrize("partner_status", ["ok", "failed"])
def test_recorded_duets_are_the_groups_and_a_lone_survivor_is_no_pair(partner_status: str) -> None:
    boots = pd.DataFrame(
        [
            _boot("a0", 0, 100, "h/d0"),
            _boot("b0", 2, 100, "h/d0", partner_status),
            # recorded groups win over windows: c0 overlaps a0 but was not in its duet
            _boot("c0", 50, 150, None),
            _boot("d0", 60, 150, None),
        ]
    )
    groups = corun_groups(boots)
    if partner_status == "ok":
        assert groups["a0"] == groups["b0"] == "h/d0"
    else:
        assert "a0" not in groups and "b0" not in groups
    assert groups["c0"] == groups["d0"] != "h/d0"
