"""Duet pairing of speed: boots of two arms measured at the same time on one host (a co-run
group, `bench.stats.inputs.co_runs`) share what the machine did in those seconds, so their
difference is compared within the groups. The model is the one hosts use, with the co-run
group as the blocking factor: log tokens/s = arm + group, least squares on the two arms'
boots, pooled-residual SE on n - rank df (a boot that ran with neither arm of the pair is a
block of its own and informs nothing). Groups are nested in hosts, so this also adjusts for
hosts. Acceptance is never paired: its noise is the engine's seed, not the machine's.

The interval is calibrated by simulation through this code (tests/unit/test_duets.py):
A/A false claims stay within alpha with shared time effects, a slower slot taken by both
arms alike, groups broken by failed boots, and heavy-tailed group effects."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from bench.records import SPEED_METRIC
from bench.stats.compare.hosts import adjusted_difference, pseudo_pair
from bench.stats.inputs import ArmData, boot_values
from bench.stats.methods import Est

MIN_DUETS = 2  # groups holding both arms, fewest for a paired comparison


def blocks(ad: ArmData, tag: str) -> list[str]:
    """Each boot's co-run group; a boot that ran alone is a block of its own."""
    groups = ad.corun or [""] * ad.n_boots
    return [g or f"{tag}:alone:{i}" for i, g in enumerate(groups)]


def duet_pairs(
    data: Mapping[str, ArmData],
    baseline: str,
    others: Sequence[str],
    est: Mapping[str, Mapping[str, Est]],
) -> dict[tuple[str, str], tuple[Est, Est]]:
    """(arm, speed) -> the pair to compare within co-run groups, for every arm that shares at
    least MIN_DUETS groups with the baseline and has residual df left; others stay unpaired."""
    base = data[baseline]
    out: dict[tuple[str, str], tuple[Est, Est]] = {}
    for arm in others:
        ad = data[arm]
        if SPEED_METRIC not in est.get(baseline, {}) or SPEED_METRIC not in est.get(arm, {}):
            continue
        ya, yb = boot_values(base, SPEED_METRIC), boot_values(ad, SPEED_METRIC)  # log tokens/s
        ok_a, ok_b = np.isfinite(ya), np.isfinite(yb)
        ga = [g for g, ok in zip(blocks(base, "a"), ok_a, strict=True) if ok]
        gb = [g for g, ok in zip(blocks(ad, "b"), ok_b, strict=True) if ok]
        if len(set(ga) & set(gb)) < MIN_DUETS:
            continue
        sa = [v for v, ok in zip(_slots(base), ok_a, strict=True) if ok]
        sb = [v for v, ok in zip(_slots(ad), ok_b, strict=True) if ok]
        # the slot as a covariate where it is recorded and varies (a slower core, a GPU on
        # another PCIe switch); without it where it cannot be separated from the groups
        slotted = all(sa + sb) and len(set(sa + sb)) > 1
        diff, se, df = adjusted_difference(
            ya[ok_a], yb[ok_b], ga, gb, *((sa, sb) if slotted else ())
        )
        if slotted and not np.all(np.isfinite(se)):
            diff, se, df = adjusted_difference(ya[ok_a], yb[ok_b], ga, gb)
        if not np.all(np.isfinite(se)):
            continue
        out[(arm, SPEED_METRIC)] = pseudo_pair(
            np.asarray(diff), np.asarray(se), df, est[arm][SPEED_METRIC]
        )
    return out


def _slots(ad: ArmData) -> list[str]:
    return ad.slots or [""] * ad.n_boots
