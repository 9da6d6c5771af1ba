"""Boots that drafted on too few of their requests: a drafter that proposes only sometimes
(a fallback path, a proposer disabled on some starts) measures something other than the
drafter, so such a boot is kept out of the acceptance verdicts and counted in speed, labelled.

A boot's share is the share of its compared prompts with at least one verify step. Below
`min_share` it is low. When every boot of an arm is low, none is left out: the arm itself
drafts rarely (an ngram drafter on prompts with few repeats), and a note says so instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench.records import METRIC
from bench.stats.inputs import ArmData, Dataset
from bench.stats.schema import Analysis, LowDraftingBoot


def drafting_shares(ad: ArmData) -> NDArray[np.float64]:
    """Per boot, the share of its compared prompts that drafted at all (NaN without any)."""
    with np.errstate(invalid="ignore"):
        return np.asarray((ad.drafts > 0).mean(axis=1), dtype=np.float64)


def low_drafting(ad: ArmData, min_share: float) -> tuple[list[LowDraftingBoot], str | None]:
    """The arm's low boots to leave out of acceptance, and a note when all of them are low
    (none left out then)."""
    if not ad.speculative or min_share <= 0:
        return [], None
    shares = drafting_shares(ad)
    low = [
        LowDraftingBoot(
            boot_id=b, share=float(s), requests=int(ad.drafts.shape[1]), min_share=min_share
        )
        for b, s in zip(ad.boot_ids, shares, strict=True)
        if np.isfinite(s) and s < min_share
    ]
    if low and len(low) == ad.n_boots:
        return [], (
            f"every boot of {ad.name} drafted on fewer than {min_share:.0%} of its requests "
            f"({', '.join(f'{x.share:.0%}' for x in low)}): its acceptance rests on the "
            "requests that drafted; if its drafter should propose on every request, that is "
            "the finding"
        )
    return low, None


def low_drafting_note(arm: str, low: list[LowDraftingBoot]) -> str:
    """One line for the analysis notes, the end of a run and the report."""
    min_share = low[0].min_share
    listed = ", ".join(f"{x.boot_id} ({x.share:.0%} of {x.requests})" for x in low)
    return (
        f"{arm}: {len(low)} boot(s) drafted on fewer than {min_share:.0%} of their requests "
        f"— {listed}: kept out of the acceptance verdicts, counted in tokens/s (a start-up "
        "whose drafter proposes only sometimes, or never, is itself a finding: see its log)"
    )


def low_drafting_boots(
    ds: Dataset, min_share: float
) -> tuple[dict[str, list[LowDraftingBoot]], list[str]]:
    """Per arm its boots that drafted on too few requests (those that drafted on none are out
    of `ds` already: share 0), and notes on arms where all did."""
    low, said = {}, []
    for arm, ad in ds.arms.items():
        boots, note = low_drafting(ad, min_share)
        none = [
            LowDraftingBoot(boot_id=b, share=0.0, requests=ds.compared_probes, min_share=min_share)
            for b in ds.undrafted.get(arm, [])
        ]
        if boots or none:
            low[arm] = none + boots
        if note:
            said.append(note)
    return low, said


def speed_of_every_boot(
    result: Analysis, speed: Analysis, low: Mapping[str, list[LowDraftingBoot]]
) -> Analysis:
    """`result` (acceptance without the low-drafting boots) with tokens/s from `speed`, the
    analysis of every boot: its speed comparisons, estimates and speedups."""

    def timed(metrics: Mapping[str, Any]) -> dict[str, Any]:
        return {m: v for m, v in metrics.items() if not METRIC[m].acceptance}

    by_key = {(c.arm, c.metric): c for c in speed.comparisons if not METRIC[c.metric].acceptance}
    every = {e.arm: e for e in speed.arms}
    arms = [
        e.model_copy(update={"metrics": {**e.metrics, **timed(every[e.arm].metrics)},
                             "low_drafting": low.get(e.arm, [])})
        for e in result.arms
    ]  # fmt: skip
    said = [low_drafting_note(a, v) for a, v in low.items()]
    return result.model_copy(
        update={
            "arms": arms,
            "comparisons": [by_key.get((c.arm, c.metric), c) for c in result.comparisons],
            "speedups": speed.speedups,
            "notes": [*said, *result.notes],
        }
    )
