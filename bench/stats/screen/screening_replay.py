"""A results directory's screening (`Analysis.screening`, and what `run-ab` stops booting):
the looks of `design.decide_candidates` replayed on each arm's ok boots in launch order, so
`analyze` reports exactly what the driver decided, and `--resume` recomputes it from disk."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from bench.records import METRIC, ManifestScreen, Results
from bench.stats.inputs import ArmData, arm_data, boot_values
from bench.stats.schema import ScreenCandidate, Screening
from bench.stats.screen.design import (
    LOWERED,
    STATUS_NAMES,
    Decisions,
    ScreenDesign,
    decide_candidates,
)


def screen_design(section: ManifestScreen, candidates: int, alpha: float) -> ScreenDesign:
    """The design on the comparison scale (a ratio metric's margin on log values)."""
    margin, _ = METRIC[section.metric].margin_scale(section.margin)
    return ScreenDesign(tuple(section.looks), alpha, margin, candidates)


def _replay(
    data: Mapping[str, ArmData], baseline: str, others: list[str], design: ScreenDesign, metric: str
) -> Decisions:
    vals = {a: _values(data[a], metric) for a in [baseline, *others]}
    width = max(design.looks[-1], *(v.size for v in vals.values()))

    def pad(v: np.ndarray) -> np.ndarray:
        return np.concatenate([v, np.full(width - v.size, np.nan)])

    cands = np.stack([pad(vals[a]) for a in others])
    counts = np.array([vals[a].size for a in others], dtype=np.int64)
    n_base = np.full((), vals[baseline].size, dtype=np.int64)
    return decide_candidates(pad(vals[baseline]), cands, n_base, counts, design)


def _values(ad: ArmData, metric: str) -> np.ndarray:
    if ad.n_boots == 0:
        return np.zeros(0)
    v = np.asarray(boot_values(ad, metric), dtype=np.float64)
    return v[np.isfinite(v)]


def screening(
    data: Mapping[str, ArmData],
    arms: list[str],
    baseline: str,
    section: ManifestScreen,
    alpha: float,
) -> Screening:
    """Every candidate's decision so far, with the numbers of the last look it reached."""
    others = [a for a in arms if a != baseline]
    design = screen_design(section, len(others), alpha)
    dec = _replay(data, baseline, others, design, section.metric)
    relative = METRIC[section.metric].relative
    rows = []
    for i, arm in enumerate(others):
        k, decided = int(dec.reached[i]), int(dec.look[i])
        d, lo, hi = (
            None if k < 0 else math.expm1(float(x)) if relative else float(x)
            for x in (dec.difference[i], dec.low[i], dec.high[i])
        )
        rows.append(
            ScreenCandidate(
                arm=arm, boots=design.looks[k] if k >= 0 else 0, difference=d, ci_low=lo,
                ci_high=hi,
                status=STATUS_NAMES[int(dec.status[i])],
                within_margin=bool(dec.status[i] == LOWERED and dec.low[i] > -design.margin),
                decided_at_look=decided + 1 if decided >= 0 else None,
                nominal_alpha=float(dec.level[i]) if decided >= 0 else None,
            )
        )  # fmt: skip
    last = len(design.looks) - 1
    finished = bool(np.all((dec.look >= 0) | (dec.reached == last)))
    cleared = sum(r.status == "cleared" for r in rows)
    lowered = [r.arm for r in rows if r.status == "lowered"]
    reason = f"{cleared} of {len(rows)} cleared, lowered: {', '.join(lowered) or 'none'}" + (
        "" if finished else "; boots still wanted"
    )
    used = sum(data[a].n_boots for a in [baseline, *others])
    return Screening(
        metric=section.metric, baseline=baseline, margin=section.margin, alpha=alpha,
        looks=list(design.looks), candidates=rows, finished=finished, boots_used=used,
        boots_fixed_design=(len(others) + 1) * design.looks[-1], reason=reason,
    )  # fmt: skip


def screen_dropped(results: Results, alpha: float) -> dict[str, str]:
    """Arms that need no more boots, and why: decided candidates, and the baseline once
    every candidate is decided."""
    section = results.manifest.screen
    assert section is not None, "a screening needs its [screen] section"
    arms = results.arms()
    baseline = results.manifest.baseline or arms[0]
    if results.ok_boots().empty:
        return {}
    data = arm_data(results.probes, results.boots, arms, None).arms
    s = screening(data, arms, baseline, section, alpha)
    out = {
        c.arm: f"{c.status} at look {c.decided_at_look}"
        for c in s.candidates
        if c.decided_at_look is not None
    }
    if len(out) == len(s.candidates):
        out[baseline] = "every candidate decided"
    return out
