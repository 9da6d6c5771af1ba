"""The screening's pooled spread (`bench.stats.screen.spread`) by simulation against known
truth, through `decide_candidates`: its rates where every arm has one spread, and where one
arm's boots are noisier (the baseline, or a candidate, 2× and 3× the SD), with its two guards;
and a results directory's screening replays with the spread its manifest recorded."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.stats.screen import ScreenDesign, decide_candidates

CLEARED, LOWERED = 1, 2
REPS = 3000
ALPHA = 0.05
BOUND = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / REPS)  # fails at alpha + 3 MCSE


def _status(effects: list[float], sds: list[float], base_sd: float, looks: tuple[int, ...],
            seed: int) -> np.ndarray:  # fmt: skip
    """Statuses (REPS x candidates): candidate i's boots N(effects[i], sds[i]), the
    baseline's N(0, base_sd), one margin = 1."""
    rng = np.random.default_rng(seed)
    n, m = looks[-1], len(effects)
    base = base_sd * rng.standard_normal((REPS, n))
    noise = rng.standard_normal((REPS, m, n)) * np.asarray(sds)[None, :, None]
    cands = np.asarray(effects)[None, :, None] + noise
    design = ScreenDesign(looks, ALPHA, 1.0, m, "linear", "pooled")
    dec = decide_candidates(base, cands, np.full(REPS, n), np.full((REPS, m), n), design)
    return dec.status


# (candidates, the baseline's SD, the first candidate's SD): one spread, then one arm noisier
SPREADS = [(2, 1.0, 1.0), (4, 1.0, 1.0), (2, 2.0, 1.0), (4, 3.0, 1.0), (2, 1.0, 3.0), (4, 1.0, 2.0)]


@pytest.mark.parametrize("looks", [(3, 6), (3, 6, 10, 16)])
@pytest.mark.parametrize(("m", "base_sd", "cand_sd"), SPREADS)
def test_harmless_candidates_are_called_lowered_at_most_alpha_of_the_time(
    looks: tuple[int, ...], m: int, base_sd: float, cand_sd: float
) -> None:
    status = _status([0.0] * m, [cand_sd] + [1.0] * (m - 1), base_sd, looks, seed=2)
    assert (status == LOWERED).any(axis=1).mean() <= BOUND


@pytest.mark.parametrize("looks", [(3, 6), (3, 6, 10, 16)])
@pytest.mark.parametrize(("m", "base_sd", "cand_sd"), SPREADS)
def test_a_candidate_worse_by_the_margin_is_cleared_at_most_alpha_of_the_time(
    looks: tuple[int, ...], m: int, base_sd: float, cand_sd: float
) -> None:
    # the noisier candidate is the one worse by the margin; the others are harmless, so
    # their clears raise its level (Holm)
    status = _status([-1.0] + [0.0] * (m - 1), [cand_sd] + [1.0] * (m - 1), base_sd, looks, 1)
    assert (status[:, 0] == CLEARED).mean() <= BOUND


def test_without_the_guards_a_noisier_baseline_would_break_the_rate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the baseline's guard is for: the pooled spread without it, fed a baseline 3×
    noisier than four candidates, calls harmless ones lowered well above alpha (so the
    calibration above can fail)."""
    monkeypatch.setattr("bench.stats.screen.spread.BASELINE_SPREAD_LEVEL", 1e-12)
    status = _status([0.0] * 4, [1.0] * 4, 3.0, (3, 6), seed=2)
    assert (status == LOWERED).any(axis=1).mean() > BOUND


def test_a_pooled_look_waits_for_every_undecided_arms_boots() -> None:
    """The pooled spread is every arm's, so a look is taken once every undecided candidate
    has its boots: a plainly harmful candidate is not decided while another lags, and is at
    that same look once the other's third boot lands (so later boots never change it)."""
    rng = np.random.default_rng(4)
    base = rng.standard_normal(16)
    cands = np.stack([rng.standard_normal(16) - 20.0, rng.standard_normal(16)])
    design = ScreenDesign((3, 6, 10, 16), ALPHA, 1.0, 2, "linear", "pooled")
    lag = decide_candidates(base, cands, np.array(16), np.array([16, 2]), design)
    assert lag.look.tolist() == [-1, -1]
    both = decide_candidates(base, cands, np.array(16), np.array([16, 3]), design)
    assert both.look[0] == 0 and both.status[0] == LOWERED and both.pooled[0]
    welch = ScreenDesign((3, 6, 10, 16), ALPHA, 1.0, 2, "linear", "welch")
    alone = decide_candidates(base, cands, np.array(16), np.array([16, 2]), welch)
    assert alone.look[0] == 0 and not alone.pooled.any()  # Welch needs no other arm's boots
