"""Where in an ordered history a metric changed: the posterior probability of each point being
the first changed one, from every boot measured so far.

Model: one step. Points before the culprit c share one level, points from c on another, and
every boot varies around its point's level with one SD (the boot-to-boot spread, the same
along the history). With flat priors on the two levels, 1/SD on the SD and every candidate c
equally likely a priori, integrating them out leaves

    P(c | boots) ∝ (n_before(c) · n_after(c))^(-1/2) · RSS(c)^(-(n - 2)/2)

where n_before and n_after count the boots at points before and from c, n all boots, and
RSS(c) is the residual sum of squares of the two-level fit. A point not yet booted adds
nothing: candidates between two booted points stay equally likely until a boot between
them tells them apart. Pure arrays, no Ints/O.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
from numpy.typing import NDArray

from bench.stats.methods import t_quantile

F = NDArray[np.float64]
Ints = NDArray[np.int64]


def culprit_posterior(points: Ints, values: F, n_points: int, excluded: Collection[int] = ()) -> F:
    """P(c = k) for k = 1 .. n_points - 1 (index k - 1): the first point at the second
    level, given boot values at `points` (the history's indices, 0 the good end). Needs a
    boot at both ends; uniform where the boots cannot tell candidates apart. `excluded`:
    points that cannot be the first changed (they run the same code as the point before)."""
    pts, val = np.asarray(points, dtype=np.int64), np.asarray(values, dtype=np.float64)
    counts = np.bincount(pts, minlength=n_points).astype(np.float64)
    sums: F = np.bincount(pts, weights=val, minlength=n_points).astype(np.float64)
    squares: F = np.bincount(pts, weights=val * val, minlength=n_points).astype(np.float64)
    return posterior_of_sums(counts, sums, squares, excluded)


def posterior_of_sums(counts: F, sums: F, squares: F, excluded: Collection[int] = ()) -> F:
    """`culprit_posterior` from each point's boots, their sum and sum of squares (all the
    one-step model reads of them)."""
    n = float(counts.sum())
    before = np.cumsum(counts)[:-1]  # boots at points before candidate k = 1 .. N - 1
    sum_b, sq_b = np.cumsum(sums)[:-1], np.cumsum(squares)[:-1]
    sum_a, sq_a = sums.sum() - sum_b, squares.sum() - sq_b
    after = n - before
    cands = np.arange(1, counts.size)
    with np.errstate(divide="ignore", invalid="ignore"):
        rss = (sq_b - sum_b**2 / before) + (sq_a - sum_a**2 / after)
        rss = np.maximum(rss, 1e-300)  # two exact levels: the data decide outright
        logp = -0.5 * (np.log(before) + np.log(after) + (n - 2) * np.log(rss))
    keep = (before > 0) & (after > 0)
    if excluded:
        keep &= ~np.isin(cands, list(excluded))
    logp = np.where(keep, logp, -np.inf)
    logp -= logp.max()
    p = np.exp(logp)
    out: F = p / p.sum()
    return out


def credible_range(posterior: F, level: float) -> tuple[int, int]:
    """The shortest run of consecutive candidates (first, last point) holding `level`."""
    cum = np.concatenate([[0.0], np.cumsum(posterior)])
    starts = np.arange(posterior.size)
    ends = np.searchsorted(cum, cum[starts] + level - 1e-12, side="left")
    ok = ends <= posterior.size
    if not ok.any():
        return (1, posterior.size)
    width = np.where(ok, ends - starts, posterior.size + 1)
    lo = int(np.argmin(width))  # the first of the shortest, as a left-to-right scan finds
    return (lo + 1, int(ends[lo]))


def between_levels(
    points: Ints, values: F, n_points: int, alpha: float, posterior: F | None = None
) -> list[int]:
    """Points whose boots sit between the two levels, off their own side's level beyond
    chance (t at alpha over the points tested, Bonferroni): a second change near them, which
    the one-step model cannot name. The sides are those of the most probable culprit; each
    point is tested against the other boots of its side, with the SD pooled over both.
    `posterior`: `culprit_posterior` of these boots, when the caller has it."""
    pts = np.asarray(points, dtype=np.int64)
    val = np.asarray(values, dtype=np.float64)
    post = culprit_posterior(pts, val, n_points) if posterior is None else posterior
    c = int(np.argmax(post)) + 1
    before, after = val[pts < c], val[pts >= c]
    if before.size < 2 or after.size < 2:
        return []
    low, high = float(before.mean()), float(after.mean())
    resid = np.concatenate([before - low, after - high])
    sd = float(np.sqrt(resid @ resid / max(resid.size - 2, 1)))
    inner = [m for m in np.unique(pts) if 0 < m < n_points - 1]
    if not inner or sd <= 0:
        return []
    crit = float(t_quantile(1 - alpha / (2 * len(inner)), resid.size - 2))
    out = []
    for m in inner:
        mine = val[pts == m]
        side = before if m < c else after
        rest = side.size - mine.size
        if rest < 1:
            continue
        level = (float(side.sum()) - float(mine.sum())) / rest
        t = (float(mine.mean()) - level) / (sd * np.sqrt(1 / mine.size + 1 / rest))
        toward = (high - low) * (1 if m < c else -1)
        if abs(t) > crit and t * toward > 0:
            out.append(int(m))
    return out
