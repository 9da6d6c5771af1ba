"""Arm vs baseline at draft positions k >= 1: differences of cumulative acceptance with
simultaneous intervals over the positions (Welch SEs, the smallest Welch df across them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.stats.describe import position_pseudo_values
from bench.stats.inputs import ArmData, VerdictSettings
from bench.stats.methods import (
    effective_boots,
    simultaneous_critical,
    welch,
)
from bench.stats.schema import (
    PositionComparison,
)


def position_comparisons(
    data: dict[str, ArmData], arms: list[str], s: VerdictSettings
) -> list[PositionComparison]:
    base = data[s.baseline]
    return [
        PositionComparison(
            arm=a,
            baseline=s.baseline,
            position=p.position,
            difference=p.difference,
            ci_low=p.ci_low,
            ci_high=p.ci_high,
            method=p.method,
        )
        for a in arms
        if a != s.baseline and base.speculative and data[a].speculative
        for p in position_differences(base, data[a], s.alpha)
    ]


@dataclass(frozen=True)
class PositionDiff:
    position: int
    difference: float
    ci_low: float
    ci_high: float
    method: str


def position_differences(base: ArmData, arm: ArmData, alpha: float) -> list[PositionDiff]:
    """arm - baseline at positions 1..K-1 (common to both), simultaneous over those."""
    k = min(base.positions, arm.positions)
    if base.n_boots < 2 or arm.n_boots < 2 or k < 2:
        return []
    parts = []
    for ad in (base, arm):
        num = ad.per_pos.sum(axis=1)[:, :k]
        den = np.repeat(ad.drafts.sum(axis=1)[:, None], k, axis=1)
        est, psi, se = position_pseudo_values(num, den)
        dof = min(float(ad.n_boots), float(effective_boots(den[:, 0]))) - 1.0
        parts.append((est, np.atleast_2d(np.cov(psi.T, ddof=1)) / ad.n_boots, se, dof))
    (ei, ci, si, dfi), (ej, cj, sj, dfj) = parts
    se, df = welch(si, dfi, sj, dfj)
    sub = slice(1, None)  # positions >= 1 are the secondary family
    crit, method = simultaneous_critical((ci + cj)[sub, sub], float(np.min(df[sub])), alpha)
    out = []
    for pos in range(1, k):
        d = float(ej[pos] - ei[pos])
        half = 0.0 if se[pos] == 0 else crit * float(se[pos])
        out.append(PositionDiff(pos, d, d - half, d + half, f"welch_{method}"))
    return out
