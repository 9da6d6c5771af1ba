"""`analyze --by category|probe_set`: the analysis repeated on each group of probes.

Each group gets the same boot-level statistics as the whole run, on that group's probes only:
a boot's acceptance and tokens/s are its ratios of sums over the group's probes; arms are
compared through boot-to-boot variation with the same families (Holm within the group's
primary family, and within each secondary metric's). Groups are secondary: nothing is
adjusted ACROSS groups, so with many categories some "differences" are expected by chance.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from bench.stats.compare.comparisons import build_comparison, explain
from bench.stats.compare.families import estimates, family_rows
from bench.stats.compare.primary import Primary
from bench.stats.compare.resampling import Extras
from bench.stats.describe import arm_metrics
from bench.stats.inputs import ArmData, Dataset, Prior, VerdictSettings
from bench.stats.schema import Breakdown, Group, GroupArm

NONE = "(none)"
NOTE = (
    "groups are secondary: each is analyzed like the whole run on its own probes (a boot's "
    "ratios of sums over them), with Holm within the group only — nothing is adjusted across "
    "groups, so with many groups expect some chance differences; read them as where to look"
)


def labels(ds: Dataset, by: str) -> list[str]:
    """Each compared prompt's group."""
    if by == "category":
        return [NONE if c is None else c for c in ds.categories]
    return [k.split("/", 1)[0] for k in ds.keys]


def breakdown(
    ds: Dataset,
    data: Mapping[str, ArmData],
    arms: list[str],
    s: VerdictSettings,
    by: str,
    power: float,
) -> Breakdown:
    """Per group of `ds`'s prompts, on the boots in `data` (the comparisons' boots: a
    sequential design's look)."""
    lab = np.asarray(labels(ds, by), dtype=object)
    others = [a for a in arms if a != s.baseline]
    groups = []
    for g in sorted(set(lab.tolist())):
        idx = np.flatnonzero(lab == g)
        part = {a: data[a].columns(idx) for a in arms}
        est = estimates(part, Prior())
        rows = family_rows(est, others, s, s.alpha, s.alpha)
        prim = Primary(part, est, others, rows, s.alpha, False)
        comps = [build_comparison(prim, r, s, power, Extras()) for r in rows]
        groups.append(
            Group(
                group=str(g),
                probes=idx.size,
                arms=[
                    GroupArm(arm=a, boots=ad.n_boots, metrics=arm_metrics(ad, s.alpha, Prior()))
                    for a, ad in part.items()
                ],
                comparisons=[c.model_copy(update={"why": explain(c, prim)}) for c in comps],
            )
        )
    return Breakdown.model_validate({"by": by, "groups": groups, "note": NOTE})
