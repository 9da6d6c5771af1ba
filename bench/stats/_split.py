"""The split-arm check (STATISTICS.md): the primary pipeline on splits of one arm's boots
into two pseudo-arms. Boots of one arm are exchangeable, so a claimed difference is a false
positive; a rate far above alpha points at drift or node effects that boot ordering missed.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations
from math import comb
from typing import Any

import numpy as np
import pandas as pd

from bench.errors import SpecabError
from bench.stats._compare import arm_metric, comparisons
from bench.stats._data import METRICS, Settings, arm_data, arm_names, resolve_settings
from bench.stats._text import clean


def split_arm(
    probes: pd.DataFrame,
    boots: pd.DataFrame,
    manifest: Mapping[str, Any],
    arm: str,
    *,
    alpha: float | None = None,
    margin_pos0: float | None = None,
    margin_length: float | None = None,
    max_splits: int = 200,
    seed: int = 0,
    source: str | None = None,
) -> dict[str, Any]:
    """Run the primary pipeline on splits of one arm's boots into two pseudo-arms (an A/A
    check): how often is a difference claimed where there is none?"""
    arms = arm_names(manifest, boots)
    s = resolve_settings(
        manifest,
        arms,
        baseline=None,
        alpha=alpha,
        margin_pos0=margin_pos0,
        margin_length=margin_length,
        looks=None,
    )
    data = arm_data(probes, boots, arms, source)
    if arm not in data:
        raise SpecabError(f"no arm named {arm!r}", field="--split-arm", fix=f"use one of {arms}")
    ad = data[arm]
    b = ad.n_boots
    if b < 4:
        raise SpecabError(
            f"arm {arm!r} has {b} ok boots; a split needs at least 4 (2 per pseudo-arm)",
            field="--split-arm",
            fix="run more boots of that arm or choose another arm",
        )
    h = b // 2
    total = comb(b, h) // (2 if 2 * h == b else 1)
    rng = np.random.default_rng(seed)
    if total <= max_splits:
        splits = [c for c in combinations(range(b), h) if 2 * h != b or 0 in c]
    else:
        splits = [tuple(sorted(rng.choice(b, h, replace=False))) for _ in range(max_splits)]
    claims = {m: 0 for m in METRICS}
    any_claim = 0
    for first in splits:
        rest = [i for i in range(b) if i not in first]
        sub = {"A": ad.subset(list(first), "A"), "B": ad.subset(rest, "B")}
        ss = Settings("A", s.alpha, s.margins, None)
        stats = {(a, m): arm_metric(sub[a], m, {}) for a in sub for m in METRICS}
        comps = comparisons(stats, ["A", "B"], "A", ss.alpha, ss.margins)
        claimed = [c for c in comps if c["verdict"] not in ("equivalent", "inconclusive")]
        for c in claimed:
            claims[c["metric"]] += 1
        any_claim += bool(claimed)
    n = len(splits)
    return clean(
        {
            "arm": arm,
            "boots": b,
            "splits": n,
            "exhaustive": total <= max_splits,
            "alpha": s.alpha,
            "claimed_rate": {m: claims[m] / n for m in METRICS},
            "any_claimed_rate": any_claim / n,
            "note": "splits share boots, so they are not independent; a rate far above alpha "
            "(Holm across both metrics) means boots are not exchangeable (drift, node effects)",
        }
    )
