"""The split-arm check (docs/statistics.md): the primary pipeline on splits of one arm's boots
into two pseudo-arms. Boots of one arm are exchangeable, so a claimed difference is a false
positive; a rate far above alpha points at drift or node effects that boot ordering missed.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations
from math import comb

import numpy as np
from numpy.typing import NDArray

from bench.errors import SpecabError
from bench.records import ALL_METRICS, METRIC, Results
from bench.stats.inputs import (
    AnalysisOptions,
    ArmData,
    arm_data,
    margin_for,
    resolve_settings,
)
from bench.stats.methods import CLAIMS, Est, estimate, family, log_estimate
from bench.stats.schema import SplitCheck

Idx = NDArray[np.int64]


def split_arm(
    results: Results,
    arm: str,
    options: AnalysisOptions = AnalysisOptions(),
    *,
    max_splits: int = 200,
    source: str | None = None,
) -> SplitCheck:
    """Run the primary pipeline on splits of one arm's boots into two pseudo-arms (an A/A
    check): how often is a difference claimed where there is none? All splits go through
    the product's family at once (one batch axis). `options`: alpha, margins and the seed
    of the splits drawn when there are more than `max_splits`; no baseline or looks."""
    arms = results.arms()
    s = resolve_settings(
        results.manifest, arms, replace(options, baseline=None, looks=None), source
    )
    if arm not in arms:
        raise SpecabError(f"no arm named {arm!r}", field="split_arm", fix=f"use one of {arms}")
    ad = arm_data(results.probes, results.boots, [arm], source).arms[arm]
    b = ad.n_boots
    if b < 4:
        raise SpecabError(
            f"arm {arm!r} has {b} ok boots; a split needs at least 4 (2 per pseudo-arm)",
            field="split_arm",
            fix="run more boots of that arm or choose another arm",
        )
    h = b // 2
    total = comb(b, h) // (2 if 2 * h == b else 1)
    rng = np.random.default_rng(options.seed)
    if total <= max_splits:
        splits = [c for c in combinations(range(b), h) if 2 * h != b or 0 in c]
    else:
        splits = [tuple(sorted(rng.choice(b, h, replace=False))) for _ in range(max_splits)]
    first = np.array(splits, dtype=np.int64)  # (S, h)
    rest = np.array([[i for i in range(b) if i not in c] for c in splits], dtype=np.int64)
    metrics = [m for m in ALL_METRICS if ad.has(m)]
    primary = [m for m in metrics if m in s.primary]
    claimed = {}
    # the primary family as analyze tests it (Holm across its metrics), then each secondary
    for group in [primary] + [[m] for m in metrics if m not in primary]:
        if group:
            pairs = [(*_halves(ad, m, first, rest), margin_for(m, s.margins[m])) for m in group]
            codes = family(pairs, s.alpha).code  # (S, metrics)
            claimed.update({m: np.isin(codes[:, i], CLAIMS) for i, m in enumerate(group)})
    n = len(splits)
    any_primary = np.any([claimed[m] for m in primary], axis=0) if primary else np.zeros(n)
    return SplitCheck(
        arm=arm,
        boots=b,
        splits=n,
        exhaustive=total <= max_splits,
        alpha=s.alpha,
        claimed_rate={m: float(claimed[m].mean()) for m in metrics},
        any_claimed_rate=float(any_primary.mean()),
        note="splits share boots, so they are not independent; a rate far above alpha "
        "(any primary metric, Holm across them) means boots are not exchangeable (drift, "
        "node effects)",
    )


def _halves(ad: ArmData, metric: str, first: Idx, rest: Idx) -> tuple[Est, Est]:
    """The metric's estimate on each pseudo-arm of every split (S, ...)."""
    if not METRIC[metric].acceptance:  # speed: compared on log boot values
        v = ad.speed()
        return log_estimate(v[first]), log_estimate(v[rest])
    num, den = ad.totals(metric)
    return estimate(num[first], den[first]), estimate(num[rest], den[rest])
