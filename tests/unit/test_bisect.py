"""The culprit search (`bench.stats.bisect`) calibrated by simulation through the product's
own `run_search`, on 32-point histories with a known truth: a step of δ = 2 boot SDs is
named in ≥ 95 % of searches and a wrong point in ≤ α (+ 2 MCSE); a history without a step
is called changed in ≤ α; a flaky point (heavy-tailed boots) or one next to the culprit that
cannot be built does not raise the error. `benchmarks/bench_bisect.py` prints the full
table, with three peers' rules on the same histories."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.stats.bisect import (
    BisectSettings,
    between_levels,
    credible_range,
    culprit_posterior,
    run_search,
)

pytestmark = pytest.mark.slow
ALPHA, N, REPS = 0.05, 32, 400


def _mcse(p: float) -> float:
    return math.sqrt(p * (1 - p) / REPS)


def _search(kind: str, seed: int, slots: int = 1) -> tuple[dict[str, float], float]:
    """Shares of searches that named the culprit, gave a range holding it, or were wrong
    (a wrong point, a range without it, a change where there is none); the mean boots."""
    rng = np.random.default_rng(seed)
    tally = {"right": 0, "range": 0, "wrong": 0, "missed": 0}
    boots = 0
    for _ in range(REPS):
        c = int(rng.integers(2, N - 1))
        levels = np.where(np.arange(N) >= c, 2.0, 0.0) if kind != "no step" else np.zeros(N)
        flaky = int(rng.choice([p for p in range(1, N - 1) if p != c]))
        unavailable = {c - 1} if kind == "unbuildable" else set()

        def draw(point: int, k: int, levels: np.ndarray = levels, flaky: int = flaky) -> np.ndarray:
            if kind == "flaky" and point == flaky:
                return levels[point] + 2 * rng.standard_t(3, k) / math.sqrt(3)
            return levels[point] + rng.standard_normal(k)

        settings = BisectSettings(n_points=N, alpha=ALPHA, slots=slots)
        step, points, _ = run_search(draw, settings, unavailable)
        boots += points.size
        if kind == "no step":
            tally["right" if step.outcome == "not_reproduced" else "wrong"] += 1
        elif step.outcome == "culprit":
            tally["right" if step.first == c else "wrong"] += 1
        elif step.outcome == "range":
            assert step.first is not None and step.last is not None
            tally["range" if step.first <= c <= step.last else "wrong"] += 1
        else:
            tally["missed"] += 1
    return {k: v / REPS for k, v in tally.items()}, boots / REPS


def test_a_two_sd_step_is_named_with_the_error_held() -> None:
    shares, boots = _search("one step", 1)
    print(f"δ = 2 SD: {shares}, {boots:.1f} boots")
    assert shares["right"] >= 0.95 - 2 * _mcse(0.95)
    assert shares["wrong"] <= ALPHA + 2 * _mcse(ALPHA)
    # fixed-B bisection needs B = 10 for this success: 2 x 10 + 10 x 5 = 70 boots
    assert boots <= 35


def test_several_slots_ask_several_points_and_keep_the_error() -> None:
    """With two slots the search asks two points a round (at the posterior's thirds): the
    same stopping rule, so the same error, for a few more boots and half the rounds."""
    shares, boots = _search("one step", 4, slots=2)
    assert shares["right"] >= 0.95 - 2 * _mcse(0.95)
    assert shares["wrong"] <= ALPHA + 2 * _mcse(ALPHA)
    assert boots <= 40


def test_no_step_is_called_a_change_at_most_alpha() -> None:
    shares, _ = _search("no step", 2)
    assert shares["wrong"] <= ALPHA + 2 * _mcse(ALPHA)


@pytest.mark.parametrize("kind", ["flaky", "unbuildable"])
def test_a_flaky_or_unbuildable_point_keeps_the_error(kind: str) -> None:
    shares, boots = _search(kind, 3)
    print(f"{kind}: {shares}, {boots:.1f} boots")
    assert shares["wrong"] <= ALPHA + 2 * _mcse(ALPHA)
    if kind == "unbuildable":  # the culprit or the point before it: a range of two
        assert shares["range"] >= 0.9 and boots <= 45
    else:
        assert shares["right"] >= 0.9


def test_the_posterior_follows_the_boots() -> None:
    """Uniform where nothing tells candidates apart; on one point once boots on both sides
    of it differ; the credible range is the shortest run holding the level."""
    points = np.array([0, 0, 0, 9, 9, 9])
    values = np.array([0.0, 0.1, -0.1, 2.0, 2.1, 1.9])
    p = culprit_posterior(points, values, 10)
    assert np.allclose(p, 1 / 9)  # no boot between the ends: every candidate alike
    p = culprit_posterior(np.r_[points, 4, 5], np.r_[values, 0.05, 2.02], 10)
    assert int(np.argmax(p)) + 1 == 5 and p.max() > 0.99
    assert credible_range(np.array([0.0, 0.5, 0.48, 0.02]), 0.95) == (2, 3)


def test_a_point_between_the_two_levels_is_said_to_be_neither() -> None:
    """Two steps: the points from 4 on a level between the ends', from 6 on the bad level.
    The one-step search names one step; the points at the middle level are "neither"."""
    rng = np.random.default_rng(5)
    levels = np.array([0.0] * 4 + [1.5] * 2 + [3.0] * 4)
    points = np.repeat(np.arange(10), 6)
    values = levels[points] + 0.3 * rng.standard_normal(points.size)
    assert between_levels(points, values, 10, ALPHA) in ([4, 5], [4], [5])
    one = np.array([0.0] * 5 + [3.0] * 5)[points] + 0.3 * rng.standard_normal(points.size)
    assert between_levels(points, one, 10, ALPHA) == []  # one step: nothing in between
