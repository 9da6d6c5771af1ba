"""The primary family, vectorized: every non-baseline arm vs the baseline on each primary
metric, Welch intervals, Holm across the family, the Holm-compatible interval each verdict
rests on, and the verdicts. `analyze`, `decide`, the split-arm check and the calibration
suite all call `estimate` + `family`, so they cannot disagree.

Arrays carry any leading batch axes (replicates, splits) and the family on the last axis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from bench.stats.methods.intervals import interval, t_pvalue, welch
from bench.stats.methods.multiplicity import holm, holm_level
from bench.stats.methods.ratio_estimates import DETERMINISTIC_RTOL, F, arm_stats
from bench.stats.methods.verdicts import verdict_codes


@dataclass(frozen=True)
class Est:
    """One arm's estimate of one metric (ratio part), arrays over batch axes."""

    ratio: F
    se: F  # NaN: unreplicated; 0: identical boots (deterministic)
    sd: F  # SD of one boot of average work
    df: F
    b_eff: F  # Kish effective boots
    boots: int
    prior_used: bool


def estimate(num: F, den: F, prior_sd: float | None = None, prior_df: float | None = None) -> Est:
    """Estimate from boot totals (..., B). With B = 1 a prior SD (from an A/A run, with its
    df) stands in for the missing between-boot variance."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    if num.shape[-1] == 0:
        nan = np.full(num.shape[:-1], np.nan)
        return Est(nan, nan, nan, nan, nan, 0, False)
    s = arm_stats(num, den)
    if s.boots == 1 and prior_sd is not None:
        full = np.full(s.ratio.shape, float(prior_sd))
        df = np.full(s.ratio.shape, float(prior_df) if prior_df is not None else np.inf)
        return Est(s.ratio, full, full, df, s.b_eff, 1, True)
    return Est(s.ratio, s.se, s.sd, s.df, s.b_eff, s.boots, False)


def log_estimate(values: F) -> Est:
    """Estimate of a log-scale metric from per-boot values (..., B) > 0, e.g. a boot's output
    tokens/s: the mean of the log values (the log of the geometric mean), SE = SD / sqrt(B),
    df = B - 1. Every boot weighs the same: a boot's speed is a property of the boot (its
    node, placement, neighbours), not of how many tokens it produced. Non-positive or
    non-finite values give NaN (no estimate)."""
    v = np.asarray(values, dtype=np.float64)
    b = v.shape[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(np.isfinite(v) & (v > 0), np.log(v), np.nan)
    if b == 0:
        nan = np.full(v.shape[:-1], np.nan)
        return Est(nan, nan, nan, nan, nan, 0, False)
    mean = y.mean(axis=-1)
    beff = np.full(mean.shape, float(b))
    if b == 1:
        nan = np.full(mean.shape, np.nan)
        return Est(mean, nan, nan, nan, beff, 1, False)
    sd = y.std(axis=-1, ddof=1)
    sd = np.where(sd <= DETERMINISTIC_RTOL, 0.0, sd)  # log scale: already relative
    return Est(mean, sd / np.sqrt(b), sd, np.full(mean.shape, b - 1.0), beff, b, False)


Margin = float | tuple[float, float]  # symmetric, or (below 0, above 0) as magnitudes


@dataclass(frozen=True)
class Family:
    """Comparisons on the last axis (C), in the order of the pairs given to `family`."""

    diff: F
    se: F
    df: F
    p: F  # raw two-sided Welch p; NaN when not testable (deterministic, unreplicated)
    p_adj: F  # Holm across the family
    lo: F  # raw (1 - alpha) interval (the contract's ci_low / ci_high)
    hi: F
    lo2: F  # (1 - 2 alpha) interval: TOST for equivalence
    hi2: F
    v_lo: F  # the interval a difference claim rests on: Holm-compatible level
    v_hi: F
    level: F  # its two-sided level alpha / max(m - s, 1), per comparison
    code: NDArray[np.int64]  # index into VERDICTS
    deterministic: NDArray[np.bool_]
    unreplicated: NDArray[np.bool_]
    no_boots: NDArray[np.bool_]


def _stack(values: Sequence[F | float]) -> F:
    if not values:  # one arm: an empty family
        return np.zeros(0)
    return np.stack(np.broadcast_arrays(*[np.asarray(v, dtype=np.float64) for v in values]), -1)


def _margins(pairs: Sequence[tuple[Est, Est, Margin]]) -> tuple[F, F]:
    down = [m if isinstance(m, float | int) else m[0] for _, _, m in pairs]
    up = [m if isinstance(m, float | int) else m[1] for _, _, m in pairs]
    return _stack(down), _stack(up)


def family(pairs: Sequence[tuple[Est, Est, Margin]], alpha: float) -> Family:
    """Compare each (baseline, arm, margin) pair: difference arm - baseline. A margin is a
    number (symmetric) or (below, above) magnitudes, e.g. a relative margin on a log ratio."""
    ri, rj = _stack([b.ratio for b, _, _ in pairs]), _stack([a.ratio for _, a, _ in pairs])
    se_i, se_j = _stack([b.se for b, _, _ in pairs]), _stack([a.se for _, a, _ in pairs])
    df_i, df_j = _stack([b.df for b, _, _ in pairs]), _stack([a.df for _, a, _ in pairs])
    margin_down, margin = _margins(pairs)
    no_boots = np.isnan(ri) | np.isnan(rj)
    diff = rj - ri
    se, df = welch(se_i, df_i, se_j, df_j)
    # Both sides' SE from one prior SD: one variance estimate, not two independent ones, so
    # the difference keeps the prior's df (Welch-Satterthwaite would double it).
    shared = _stack([float(b.prior_used and a.prior_used) for b, a, _ in pairs]).astype(bool)
    df = np.where(shared, np.minimum(df_i, df_j), df)
    unrep = ~no_boots & (np.isnan(se_i) | np.isnan(se_j))
    det = (se_i == 0) & (se_j == 0)
    p = t_pvalue(diff, se, df)
    p_adj = holm(p) if p.shape[-1] else p
    level = np.broadcast_to(np.asarray(holm_level(p_adj, alpha))[..., None], p.shape)
    lo, hi = interval(diff, se, df, alpha)
    lo2, hi2 = interval(diff, se, df, 2.0 * alpha)
    v_lo, v_hi = interval(diff, se, df, level)
    claimed = (v_lo > 0) | (v_hi < 0)  # for identical boots: the exact difference is not 0
    code = verdict_codes(
        diff, v_lo, v_hi, lo2, hi2, margin, claimed=claimed, margin_down=margin_down
    )
    return Family(
        diff, se, df, p, p_adj, lo, hi, lo2, hi2, v_lo, v_hi, level, code, det, unrep, no_boots
    )
