"""Calibration of the selection (docs/statistics.md, "Selection") by simulation against known
truth, on the product's own code: `replay_looks` is what run-ab eliminates with and analyze
reports. Boot values are normal on the log scale with unequal SDs across configurations
(every other one 2x); MCSE = sqrt(p (1 - p) / R)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.stats.select import boots_to_select, mcb, replay_looks, spend

ALPHA = 0.05
R = 2000


def _mcse(p: float) -> float:
    return math.sqrt(p * (1 - p) / R)


def _run(theta, sd, looks, *, seed, margin=0.05, cheapest=True, cost=None):
    rng = np.random.default_rng(seed)
    theta, sd = np.asarray(theta, float), np.asarray(sd, float)
    k = theta.size
    values = theta[None, :, None] + sd[None, :, None] * rng.standard_normal((R, k, looks[-1]))
    c = np.broadcast_to(np.arange(k, dtype=float) if cost is None else np.asarray(cost), (R, k))
    m = -math.log1p(-margin)
    return replay_looks(values, c, looks, spend(looks, ALPHA), margin=m, cheapest=cheapest)


def _least_favourable(k: int, sd: float, margin: float = 0.05):
    """The best leads every other configuration by exactly the margin (the hardest case
    for a wrong claim), in the middle of the cost order."""
    m = -math.log1p(-margin)
    theta = np.full(k, -m)
    theta[k // 2] = 0.0
    sds = np.full(k, sd) * np.where(np.arange(k) % 2, 1.0, 2.0)
    return theta, sds, k // 2


@pytest.mark.parametrize("k", [3, 5, 10])
@pytest.mark.parametrize("b", [3, 5, 10])
def test_a_wrong_choice_is_claimed_at_most_alpha(k: int, b: int) -> None:
    theta, sds, best = _least_favourable(k, 0.03)
    rep = _run(theta, sds, (b,), seed=k * 100 + b)
    wrong = float(((rep.chosen >= 0) & (rep.chosen != best)).mean())
    assert wrong <= ALPHA + 2 * _mcse(ALPHA)


@pytest.mark.parametrize(
    ("k", "sd", "margin"), [(3, 0.02, 0.05), (5, 0.02, 0.1), (10, 0.02, 0.05), (3, 0.05, 0.1)]
)
def test_correct_selection_at_the_planned_boots(k: int, sd: float, margin: float) -> None:
    theta, sds, best = _least_favourable(k, sd, margin)
    b = boots_to_select(float(sds.max()), -math.log1p(-margin), k, ALPHA)
    assert 3 <= b <= 10, b  # the calibration covers B = 3-10
    rep = _run(theta, sds, (b,), seed=b + k, margin=margin)
    pcs = float((rep.chosen == best).mean())
    assert pcs >= 1 - ALPHA - 2 * _mcse(1 - ALPHA)


@pytest.mark.parametrize("k", [3, 5, 10])
@pytest.mark.parametrize("b", [3, 5, 10])
def test_equal_configurations_never_yield_a_single_winner_more_than_alpha(k: int, b: int) -> None:
    sds = np.full(k, 0.05) * np.where(np.arange(k) % 2, 1.0, 2.0)
    rep = _run(np.zeros(k), sds, (b,), seed=7 * k + b)
    alone = float((rep.subset.sum(axis=-1) == 1).mean())
    assert alone <= ALPHA + 2 * _mcse(ALPHA)


@pytest.mark.parametrize("b", [3, 10])
def test_mcb_intervals_cover_simultaneously(b: int) -> None:
    rng = np.random.default_rng(b)
    theta = np.array([0.0, -0.01, -0.05, -0.2, 0.02])
    sd = np.array([0.05, 0.1, 0.05, 0.1, 0.05])
    y = theta[None, :, None] + sd[None, :, None] * rng.standard_normal((R, theta.size, b))
    fit = mcb(y.mean(-1), y.var(-1, ddof=1), np.full((R, theta.size), float(b)),
              np.ones((R, theta.size), bool), ALPHA)  # fmt: skip
    others = np.array([np.delete(theta, i).max() for i in range(theta.size)])
    truth = theta - others
    cover = np.all((fit.lower <= truth) & (truth <= fit.upper), axis=-1).mean()
    assert cover >= 1 - ALPHA - 2 * _mcse(1 - ALPHA)


def test_looks_keep_the_error_rate_and_save_boots_at_equal_pcs() -> None:
    """A spread of configurations: elimination drops the clearly worse ones early."""
    theta = np.array([0.0, -0.1, -0.2, -0.3, -0.4])
    sds = np.full(5, 0.05) * np.where(np.arange(5) % 2, 1.0, 1.5)
    fixed = _run(theta, sds, (10,), seed=1)
    seq = _run(theta, sds, (3, 5, 7, 10), seed=1)
    pcs_fixed, pcs_seq = float((fixed.chosen == 0).mean()), float((seq.chosen == 0).mean())
    saved = 1 - seq.boots.sum(-1).mean() / fixed.boots.sum(-1).mean()
    assert pcs_seq >= pcs_fixed - 2 * _mcse(pcs_fixed)
    assert saved >= 0.30, saved
    # the least favourable case across looks: a wrong claim stays below alpha
    t2, s2, best = _least_favourable(5, 0.03)
    rep = _run(t2, s2, (3, 6, 10), seed=5)
    wrong = float(((rep.chosen >= 0) & (rep.chosen != best)).mean())
    assert wrong <= ALPHA + 2 * _mcse(ALPHA)


def test_spending_sums_to_alpha_and_is_back_loaded() -> None:
    levels = spend((3, 6, 10), ALPHA)
    assert sum(levels) == pytest.approx(ALPHA)
    assert levels[0] < levels[1] < levels[2]
    assert spend((10,), ALPHA) == pytest.approx((ALPHA,))


def test_best_estimate_tie_break_stops_only_on_a_clear_best() -> None:
    theta, sds, best = _least_favourable(3, 0.01, 0.1)
    rep = _run(theta, sds, (3, 6), seed=3, margin=0.1, cheapest=False)
    assert float((rep.chosen == best).mean()) > 0.9
    assert np.all(rep.subset[rep.stopped & (rep.taken == 1)].sum(-1) == 1)
