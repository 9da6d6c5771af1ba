"""Draft lengths: how many tokens each verify step proposed. Draft models always propose K;
ngram and dynamic speculation propose fewer, and then vLLM's per-position acceptance
(A_k / drafts) counts a position that was never drafted as rejected. These parts come from
the per-request `per_step_drafted` counts (`drafted_per_pos`); /metrics has no
drafted-per-position, so without them only the mean draft length is known."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from bench.stats.inputs import ArmData
from bench.stats.schema import DraftLengthShare

# Mean draft lengths of two compared arms that differ by more than this (tokens per step)
# make their per-position acceptances differences of drafting as much as of acceptance.
DRAFT_LENGTH_NOTE_TOKENS = 0.05


def drafted_shares(ad: ArmData) -> list[float] | None:
    """sum drafted_k / sum D per position, or None without per_step_drafted."""
    if ad.drafted is None:
        return None
    d = float(ad.drafts.sum())
    return [
        float(x) / d if d else float("nan") for x in ad.drafted.sum(axis=(0, 1), dtype=np.float64)
    ]


def draft_lengths(ad: ArmData) -> list[DraftLengthShare]:
    """Verify steps by tokens drafted (0..K): drafted_(j-1) - drafted_j steps drafted j."""
    if ad.drafted is None or not ad.speculative:
        return []
    reach = [float(ad.drafts.sum()), *ad.drafted.sum(axis=(0, 1), dtype=np.float64).tolist(), 0.0]
    total = reach[0]
    return [
        DraftLengthShare(drafted=j, share=(reach[j] - reach[j + 1]) / total if total else None)
        for j in range(len(reach) - 1)
    ]


def mean_draft_length(ad: ArmData) -> float | None:
    d = float(ad.drafts.sum())
    if ad.draft_tokens is None or not ad.speculative or d <= 0:
        return None
    return float(ad.draft_tokens.sum()) / d


def draft_length_notes(data: Mapping[str, ArmData], arms: list[str], baseline: str) -> list[str]:
    """A note per arm whose mean draft length differs from the baseline's."""
    base = mean_draft_length(data[baseline]) if baseline in data else None
    if base is None:
        return []
    notes = []
    for a in arms:
        mine = mean_draft_length(data[a]) if a != baseline else None
        if mine is None or abs(mine - base) <= DRAFT_LENGTH_NOTE_TOKENS:
            continue
        notes.append(
            f"{a} drafts {mine:.2f} tokens per step, {baseline} {base:.2f}: a difference in "
            "acceptance per position may be a difference in drafting (compare "
            "per_position.among_drafted, acceptance among the steps that drafted position k)"
        )
    return notes
