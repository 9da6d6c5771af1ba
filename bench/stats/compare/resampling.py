"""Beside the primary interval: boot-label permutation p (B >= 4 per arm), studentized
cluster bootstrap (B >= 10) and the pigeonhole "new prompts" interval, per comparison."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.records import REGISTRY
from bench.stats.inputs import ArmData
from bench.stats.methods import (
    F,
    cluster_bootstrap,
    permutation_test,
    pigeonhole_interval,
    pigeonhole_ratios,
    pigeonhole_weights,
)

# The metrics resampled: counts per draft, so the pigeonhole weights share one denominator.
RESAMPLED = tuple(m.name for m in REGISTRY if m.resampled)


@dataclass(frozen=True)
class Extras:
    permutation_p: float | None = None
    permutation_min_p: float | None = None
    permutation_exact: bool | None = None
    bootstrap_ci: tuple[float, float] | None = None
    new_prompts_ci: tuple[float, float] | None = None


@dataclass(frozen=True)
class Wanted:
    """One comparison asking for extras: arms, metric, observed difference and Welch df."""

    baseline: str
    arm: str
    metric: str
    difference: float
    df: float


def resampling_extras(
    wanted: list[Wanted | None],
    data: dict[str, ArmData],
    alpha: float,
    n_resamples: int,
    rng: np.random.Generator,
) -> list[Extras]:
    """Extras for each comparison (None: not resampled, e.g. deterministic or unreplicated)."""
    if n_resamples <= 0:
        return [Extras() for _ in wanted]
    usable = [a for a, ad in data.items() if ad.n_boots >= 2 and ad.speculative]
    star: dict[tuple[str, str], F] = {}
    if usable:
        n_p = data[usable[0]].drafts.shape[1]
        wp, wb = pigeonhole_weights(n_p, [data[a].n_boots for a in usable], n_resamples, rng)
        for a, w in zip(usable, wb, strict=True):
            ad = data[a]
            nums = [ad.cells(m)[0] for m in RESAMPLED]
            for m, r in zip(RESAMPLED, pigeonhole_ratios(nums, ad.drafts, wp, w), strict=True):
                star[(a, m)] = r
        del wp  # (M, P): 40 MB at 10^4 resamples x 10^3 prompts, before the permutations
    out = []
    for c in wanted:
        if c is None:
            out.append(Extras())
            continue
        di, dj = data[c.baseline], data[c.arm]
        ti, tj = di.totals(c.metric), dj.totals(c.metric)
        perm: tuple[float | None, float | None, bool | None] = (None, None, None)
        if min(di.n_boots, dj.n_boots) >= 4:
            perm = permutation_test(*ti, *tj, n_resamples, rng)
        boot = None
        if min(di.n_boots, dj.n_boots) >= 10:
            boot = cluster_bootstrap(*ti, *tj, alpha, n_resamples, rng)
        new = None
        key_i, key_j = (c.baseline, c.metric), (c.arm, c.metric)
        if key_i in star and key_j in star and np.isfinite(c.df):
            new = pigeonhole_interval(c.difference, star[key_j] - star[key_i], c.df, alpha)
        out.append(Extras(*perm, bootstrap_ci=boot, new_prompts_ci=new))
    return out
