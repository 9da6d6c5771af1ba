"""The pairwise terms multiple comparisons with the best are built from (`mcb`): for every
two configurations, the difference of their means, its SE and df. Welch terms compare each
configuration's own boots; where boots ran in co-run groups (duets) and speed is the
objective, the terms come from one fit within the groups instead
(`bench.stats.compare.pairwise_contrasts`: log tokens/s = configuration + group), so what a
group's boots shared cancels, as it does for an A/B comparison's speed. Broadcast over
leading batch axes like `mcb`, so the calibration replays many sweeps through this code."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from bench.stats.compare import MIN_DF, pairwise_contrasts

F = NDArray[np.float64]
B = NDArray[np.bool_]


@dataclass(frozen=True)
class PairTerms:
    """Axes (..., K) for `mean`, (..., K, K) for the rest: d_ij = mean_i - mean_j."""

    mean: F
    d: F
    se: F
    df: F


def pair_terms(mean: F, var: F, n: F) -> PairTerms:
    """d_ij = mean_i - mean_j, its Welch SE and Welch-Satterthwaite df."""
    v = np.where(n > 0, var / np.maximum(n, 1), np.inf)
    se2 = v[..., :, None] + v[..., None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(n > 1, v**2 / np.maximum(n - 1, 1), np.inf)
        df = se2**2 / (w[..., :, None] + w[..., None, :])
    pooled = np.maximum(n[..., :, None] + n[..., None, :] - 2, 1)
    df = np.where(np.isfinite(df) & (df > 0), df, pooled)  # identical boots: no Welch df
    return PairTerms(mean, mean[..., :, None] - mean[..., None, :], np.sqrt(se2), df)


def grouped_terms(
    values: F, groups: NDArray[np.int64], active: B, n: int, welch: PairTerms
) -> PairTerms:
    """The terms among the active configurations on the first `n` boots, compared within
    co-run groups (`groups`: (K, B) codes by boot index, -1 for a boot that ran alone);
    where the fit has fewer than MIN_DF residual df, `welch`'s. A configuration's mean
    becomes the first active one's plus its fitted difference (what `choose` ranks)."""
    *batch, k, width = values.shape
    rows_n = int(np.prod(batch, dtype=np.int64))
    flat = values.reshape(rows_n, k, width)[..., : min(n, width)]
    act = np.broadcast_to(active, (*batch, k)).reshape(rows_n, k)
    mean = np.broadcast_to(welch.mean, (*batch, k)).reshape(rows_n, k).copy()
    d, se, df = (
        np.broadcast_to(a, (*batch, k, k)).reshape(rows_n, k, k).copy()
        for a in (welch.d, welch.se, welch.df)
    )
    patterns: dict[bytes, list[int]] = {}  # replicates that share one design fit at once
    for r in range(rows_n):
        patterns.setdefault((act[r][:, None] & np.isfinite(flat[r])).tobytes(), []).append(r)
    for members in patterns.values():
        rows = np.asarray(members, dtype=np.int64)
        first = int(rows[0])
        arm_i, boot_i = np.nonzero(act[first][:, None] & np.isfinite(flat[first]))
        if len(set(arm_i.tolist())) < 2:
            continue
        codes = groups[arm_i, boot_i]
        labels = [
            f"g{c}" if c >= 0 else f"alone:{a}:{t}"
            for c, a, t in zip(codes, arm_i, boot_i, strict=True)
        ]
        y = flat[rows][:, arm_i, boot_i]
        names, dd, ss, dof = pairwise_contrasts(y, [str(a) for a in arm_i], labels)
        if dof < MIN_DF:
            continue
        idx = np.array([int(x) for x in names])
        pick = np.ix_(rows, idx, idx)
        d[pick], se[pick], df[pick] = dd, ss, dof
        mean[np.ix_(rows, idx)] = mean[rows, idx[0]][:, None] + dd[..., :, 0]
    return PairTerms(
        mean.reshape(*batch, k),
        d.reshape(*batch, k, k),
        se.reshape(*batch, k, k),
        df.reshape(*batch, k, k),
    )
