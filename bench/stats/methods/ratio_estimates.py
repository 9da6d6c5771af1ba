"""Ratio-of-sums estimates over boots with a leverage-robust (delete-one-boot jackknife) SE and
Kish's effective boots (docs/statistics.md). Arrays whose LAST axis is boots, with any leading
batch axes, so calibration runs thousands of simulated experiments in one call.

What the answers mean: an estimate and its SE are for the ratio-of-sums metric *on this
probe set*, with boots as the unit of replication; nothing at all when an arm has one boot
(no between-boot variance: "unreplicated")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

F = NDArray[np.float64]


X = NDArray[np.float64] | float  # arrays or scalars (np.float64 is a float)


# Identical boots leave ~1e-16 relative rounding in the pseudo-values; a real difference of
# one count in 1e8 drafts is ~1e-8. Anything below this share of the estimate is no variance.
DETERMINISTIC_RTOL = 1e-10


def pseudo_values(num: F, den: F) -> tuple[F, F]:
    """Ratio of sums R = sum(num)/sum(den) over boots and the delete-one-boot jackknife
    pseudo-values psi_b = B R - (B - 1) R_(-b). Their SD / sqrt(B) is the jackknife SE, which
    accounts for leverage: a boot carrying most drafts cannot hide its own deviation (with
    equal drafts per boot psi_b - R equals the linearized value (num_b - R den_b)/mean(den))."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    n_tot, d_tot = num.sum(axis=-1, keepdims=True), den.sum(axis=-1, keepdims=True)
    ratio = n_tot[..., 0] / d_tot[..., 0]
    b = num.shape[-1]
    if b < 2:
        return ratio, np.broadcast_to(ratio[..., None], num.shape).copy()
    with np.errstate(divide="ignore", invalid="ignore"):
        loo = (n_tot - num) / (d_tot - den)
    return ratio, b * ratio[..., None] - (b - 1) * loo


def effective_boots(den: F) -> F:
    """Kish's effective number of boots (sum D)^2 / sum D^2: B for equal work per boot, near
    1 when one boot carries almost every draft."""
    den = np.asarray(den, dtype=np.float64)
    out: F = den.sum(axis=-1) ** 2 / (den**2).sum(axis=-1)
    return out


@dataclass(frozen=True)
class ArmStats:
    """One arm's estimate of a ratio metric (arrays over any batch axes).

    `se` is the jackknife SE (NaN when B = 1, exactly 0 when the boots are identical within
    DETERMINISTIC_RTOL); `sd` = se * sqrt(B_eff) is the SD of one boot of average work (what
    planning and a prior from an A/A run use); `df` = min(B, B_eff) - 1 keeps intervals
    conservative when a few boots carry most of the work."""

    ratio: F
    se: F
    sd: F
    df: F
    b_eff: F
    boots: int


def arm_stats(num: F, den: F) -> ArmStats:
    ratio, psi = pseudo_values(num, den)
    b = psi.shape[-1]
    b_eff = effective_boots(den)
    if b < 2:
        nan = np.full(ratio.shape, np.nan)
        return ArmStats(ratio, nan, nan, nan, b_eff, b)
    se = psi.std(axis=-1, ddof=1) / np.sqrt(b)
    se = np.where(se <= DETERMINISTIC_RTOL * np.abs(ratio), 0.0, se)
    df = np.minimum(float(b), b_eff) - 1.0
    return ArmStats(ratio, se, se * np.sqrt(b_eff), df, b_eff, b)
