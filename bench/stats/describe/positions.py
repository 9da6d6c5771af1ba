"""Positions k >= 0 (docs/statistics.md: secondary). Per arm: cumulative sum A_k / sum D and
conditional sum A_k / sum A_{k-1}, each with simultaneous intervals over positions (arm vs
baseline differences at k >= 1 are `bench.stats.compare`'s). Simultaneous critical values:
`bench.stats.methods.simultaneous_critical` (plain t for one position, Bonferroni-t at small
B, max-|t| otherwise). Works for any K >= 1."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.stats.inputs import ArmData
from bench.stats.methods import (
    DETERMINISTIC_RTOL,
    F,
    effective_boots,
    pseudo_values,
    simultaneous_critical,
)


@dataclass(frozen=True)
class PositionBand:
    """Estimates (K,) with simultaneous intervals; method names the critical value used."""

    estimate: F
    ci_low: F
    ci_high: F
    method: str


def position_pseudo_values(num: F, den: F) -> tuple[F, F, F]:
    """Estimates (K,), pseudo-values (B, K) and SEs (K,) of ratios num[:, k] / den[:, k]."""
    est, psi = pseudo_values(num.T, den.T)  # (K,), (K, B)
    b = num.shape[0]
    if b < 2:
        return est, psi.T, np.full(est.shape, np.nan)
    se = psi.std(axis=1, ddof=1) / np.sqrt(b)
    return est, psi.T, np.where(se <= DETERMINISTIC_RTOL * np.abs(est), 0.0, se)


def simultaneous_band(num: F, den: F, alpha: float) -> PositionBand:
    """Ratios of sums num[:, k] / den[:, k] over boots (B, K) with simultaneous intervals
    over the K positions (B - 1 df, fewer when a few boots carry most of the work)."""
    est, psi, se = position_pseudo_values(num, den)
    b = num.shape[0]
    if b < 2:
        nan = np.full(est.shape, np.nan)
        return PositionBand(est, nan, nan, "none")
    df = min(float(b), float(effective_boots(den[:, 0]))) - 1.0
    cov = np.atleast_2d(np.cov(psi.T, ddof=1)) / b
    crit, method = simultaneous_critical(cov, df, alpha)
    half = np.where(se == 0, 0.0, crit * se)
    return PositionBand(est, est - half, est + half, method)


def cumulative_band(ad: ArmData, alpha: float) -> PositionBand:
    num = ad.per_pos.sum(axis=1)  # (B, K)
    den = np.repeat(ad.drafts.sum(axis=1)[:, None], num.shape[1], axis=1)
    return simultaneous_band(num, den, alpha)


def drafted_band(ad: ArmData, alpha: float) -> PositionBand | None:
    """sum A_k / sum drafted_k: acceptance among the steps that drafted position k at all
    (ngram and dynamic speculation draft fewer than K). None without per_step_drafted; a
    position no step drafted has no estimate (NaN)."""
    if ad.drafted is None:
        return None
    num, den = ad.per_pos.sum(axis=1), ad.drafted.sum(axis=1, dtype=np.float64)  # (B, K)
    k = min(num.shape[1], den.shape[1])
    return reached_band(num[:, :k], den[:, :k], alpha)


def reached_band(num: F, den: F, alpha: float) -> PositionBand:
    """simultaneous_band over the positions whose denominator is not zero; NaN elsewhere."""
    reached = den.sum(axis=0) > 0
    est = np.full(num.shape[1], np.nan)
    lo, hi = est.copy(), est.copy()
    method = "none"
    if reached.any():
        band = simultaneous_band(num[:, reached], den[:, reached], alpha)
        est[reached], lo[reached], hi[reached] = band.estimate, band.ci_low, band.ci_high
        method = band.method
    return PositionBand(est, lo, hi, method)


def conditional_band(ad: ArmData, alpha: float) -> PositionBand:
    """sum A_k / sum A_{k-1} (position 0: / sum D). A position nobody reached (sum A_{k-1}
    = 0) has no estimate (NaN)."""
    num = ad.per_pos.sum(axis=1)
    den = np.concatenate([ad.drafts.sum(axis=1)[:, None], num[:, :-1]], axis=1)
    return reached_band(num, den, alpha)
