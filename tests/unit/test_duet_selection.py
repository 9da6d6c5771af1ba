"""A sweep's selection with speed compared within co-run groups (`pair_terms.grouped_terms`
through `replay_looks`, what run-ab eliminates with and analyze reports), calibrated by
simulation against known truth on the schedule run-ab's dispatcher makes (four
configurations on two slots: every pair of them meets equally often). Log tokens/s =
configuration + group (shared by the boots measured together) + own noise: the MCB intervals
still cover simultaneously, a wrong choice stays within alpha, and the best is found far
more often than without the groups at the same noise. MCSE = sqrt(p (1 - p) / R)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.run.driver import Dispatcher, Pairing, plan_order
from bench.run.placement import NodeSlots
from bench.stats.select import replay_looks, spend

ALPHA, R, K, B = 0.05, 2000, 4, 6
GROUP_SD, OWN_SD = 0.06, 0.02
MARGIN = -math.log1p(-0.05)


def _mcse(p: float) -> float:
    return math.sqrt(p * (1 - p) / R)


def _duet_groups(k: int, boots: int) -> np.ndarray:
    """(k, boots) group codes from run-ab's own duet dispatch on one two-slot node."""
    d = Dispatcher([NodeSlots("n1", "a", 2)], 2, {}, lambda a: None)  # type: ignore[arg-type,return-value]
    arms = [f"c{i}" for i in range(k)]
    todo, pairing = plan_order(arms, boots, seed=5), Pairing(arms[0])
    codes = np.full((k, boots), -1, dtype=np.int64)
    while todo:
        group = d.reserve_group(todo, (), pairing)
        pairing.count([p.plan.arm for p in group])
        for p in group:
            codes[arms.index(p.plan.arm), p.plan.boot] = pairing.groups - 1
            d._slot_arm[("n1", p.slot, p.plan.arm)] += 1
            d._per_node_arm[("n1", p.plan.arm)] += 1
            d._per_node_total["n1"] += 1
        for p in group:
            d._free["n1"].add(p.slot)
    return codes


GROUPS = _duet_groups(K, B)


def _values(theta: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shared = GROUP_SD * rng.standard_normal((R, int(GROUPS.max()) + 1))
    own = OWN_SD * rng.standard_normal((R, K, B))
    return theta[None, :, None] + shared[:, GROUPS] + own


def _replay(values: np.ndarray, looks: tuple[int, ...], paired: bool, fixed: bool = False):  # type: ignore[no-untyped-def]
    # the configurations just beyond the margin are the cheaper ones: a wrong proof of any
    # of them within the margin would ship it (the least favourable case for the guarantee)
    cost = np.broadcast_to(np.array([3.0, 0.0, 1.0, 2.0]), (R, K))
    levels = (ALPHA,) if fixed else spend(looks, ALPHA)
    groups = GROUPS if paired else None
    return replay_looks(
        values, cost, looks, levels, margin=MARGIN, cheapest=True, fixed=fixed, groups=groups
    )


def test_the_schedule_pairs_every_two_configurations_equally() -> None:
    pairs = {}
    for g in range(int(GROUPS.max()) + 1):
        members = tuple(sorted(np.nonzero((g == GROUPS).any(axis=1))[0].tolist()))
        pairs[members] = pairs.get(members, 0) + 1
    assert set(pairs.values()) == {2} and len(pairs) == 6  # 4 choose 2, twice each


def test_paired_mcb_intervals_cover_simultaneously() -> None:
    theta = np.array([0.0, -0.02, -0.06, -0.10])
    rep = _replay(_values(theta, 1), (B,), paired=True, fixed=True)
    truth = theta - np.array([np.delete(theta, i).max() for i in range(K)])
    cover = np.all((rep.lower <= truth) & (truth <= rep.upper), axis=-1).mean()
    assert cover >= 1 - ALPHA - 2 * _mcse(1 - ALPHA)


@pytest.mark.parametrize(("looks", "fixed"), [((3, B), False), ((B,), True)])
def test_a_wrong_choice_stays_within_alpha_and_the_best_is_found_far_more_often(
    looks: tuple[int, ...], fixed: bool
) -> None:
    """The best and three cheaper configurations just beyond the 5 % margin: shipping one of
    them is the wrong claim (paired 2.4-2.7 %, unpaired 0.3-0.5 % in this simulation); the
    paired selection proves the best in ~100 % of experiments, the unpaired in ~45 %."""
    t = np.array([0.0, -0.052, -0.052, -0.052])
    values = _values(t, 3)
    paired, plain = _replay(values, looks, True, fixed), _replay(values, looks, False, fixed)
    for rep in (paired, plain):
        chosen = rep.chosen >= 0
        worse = chosen & (t[np.maximum(rep.chosen, 0)] < t.max() - MARGIN)
        assert worse.mean() <= ALPHA + 2 * _mcse(ALPHA)
    found_paired, found_plain = (paired.chosen >= 0).mean(), (plain.chosen >= 0).mean()
    assert found_paired >= 0.9 and found_paired >= 1.5 * found_plain, (found_paired, found_plain)
