"""Calibration of the speed comparison (output tokens/s, Welch on log boot values) by
simulation with a known truth: per-arm speed factors, boot-level lognormal latency noise
(`bench.simulate.generative`). The product's own `log_estimate` + `family` run on thousands of
simulated experiments at once. Limits: alpha + 2 MCSE (A/A false positives) and
1 - alpha - 2 MCSE (coverage of the true ratio)."""

from __future__ import annotations

import numpy as np
import pytest
from stats_calib_helpers import mcse

from bench.records import SPEED_METRIC
from bench.simulate import SimParams, simulate_speed_totals
from bench.stats.inputs import margin_for
from bench.stats.methods import CLAIMS, Family, family, log_estimate

ALPHA = 0.05
REPS = 2000
pytestmark = pytest.mark.slow

CASES = [
    ("lognormal boot noise (sigma 0.05)", SimParams()),
    ("noisy shared CPU (sigma 0.15)", SimParams(sigma_speed_boot=0.15)),
    ("heavy-tailed boot noise (t3)", SimParams(speed_boot_df=3.0)),
]


def _compare(factors: list[float], boots: int, params: SimParams, seed: int) -> Family:
    """Arm 1 vs arm 0 in REPS simulated experiments, through the product's functions."""
    rng = np.random.default_rng(seed)
    tokens, latency = simulate_speed_totals(rng, factors, boots, 100, params, REPS)
    speed = tokens / latency  # each boot's ratio of sums, (R, arms, B)
    pair = (log_estimate(speed[:, 0]), log_estimate(speed[:, 1]), margin_for(SPEED_METRIC, 0.02))
    return family([pair], ALPHA)


@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[0] for c in CASES])
@pytest.mark.parametrize("boots", [3, 5, 10])
def test_speed_aa_false_positive_rate(case: int, boots: int) -> None:
    label, params = CASES[case]
    f = _compare([1.0, 1.0], boots, params, seed=1000 + 10 * case + boots)
    claimed = np.isin(f.code[:, 0], CLAIMS)
    fpr = float(claimed.mean())
    limit = ALPHA + 2 * mcse(ALPHA, REPS)
    print(f"speed A/A {label} B={boots}: FPR {fpr:.4f} ± {mcse(fpr, REPS):.4f} (limit {limit:.4f})")
    assert fpr <= limit
    assert np.array_equal(claimed, f.p[:, 0] < ALPHA)  # one comparison: p and verdict agree


@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[0] for c in CASES])
@pytest.mark.parametrize("boots", [3, 5, 10])
def test_speed_interval_covers_the_true_ratio(case: int, boots: int) -> None:
    label, params = CASES[case]
    truth = 1.3 / 1.2  # the ratio of the arms' speed factors
    f = _compare([1.2, 1.3], boots, params, seed=2000 + 10 * case + boots)
    lo, hi = np.exp(f.lo[:, 0]), np.exp(f.hi[:, 0])
    cover = float(np.mean((lo <= truth) & (truth <= hi)))
    limit = 1 - ALPHA - 2 * mcse(ALPHA, REPS)
    width = float(np.median(hi - lo))
    print(
        f"speed coverage {label} B={boots}: {cover:.4f} ± {mcse(cover, REPS):.4f} "
        f"(limit {limit:.4f}); median interval width {width:.3f} (ratio units)"
    )
    assert cover >= limit
