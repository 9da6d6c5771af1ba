"""A results directory's screening (`Analysis.screening`, and what `run-ab` stops booting):
the looks of `design.decide_candidates` replayed on each arm's ok boots in launch order, so
`analyze` reports exactly what the driver decided, and `--resume` recomputes it from disk."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from bench.records import METRIC, Manifest, ManifestScreen, Results
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
    return ScreenDesign(
        tuple(section.looks), alpha, margin, candidates, section.spending, section.spread
    )


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


def _code_only(definition: dict[str, Any]) -> dict[str, Any]:
    """An arm's definition without its name and the diffs that run no code of their own (a
    diff that changes only comments, docstrings or layout, or one the build carries)."""
    patches = [
        p for p in definition.get("patches") or []
        if not (p.get("kind") == "diff" and (p.get("already_applied") or (
            p.get("files") and len(p.get("code_unchanged") or []) == len(p["files"]))))
    ]  # fmt: skip
    # the name, and whether a no-op patch may run, say nothing about the code that runs
    kept = {k: v for k, v in definition.items() if k not in ("name", "allow_noop_patches")}
    return {**kept, "patches": patches}


def same_code_candidates(manifest: Manifest, baseline: str) -> frozenset[str]:
    """Candidates that run the baseline's code: their definitions equal the baseline's once
    the diffs that change no executed code are left out."""
    defs = {a.name: _code_only(a.definition) for a in manifest.arms}
    if baseline not in defs:
        return frozenset()
    return frozenset(a for a, d in defs.items() if a != baseline and d == defs[baseline])


def screening(
    data: Mapping[str, ArmData],
    arms: list[str],
    baseline: str,
    section: ManifestScreen,
    alpha: float,
    same_code: frozenset[str] = frozenset(),
) -> Screening:
    """Every candidate's decision so far, with the numbers of the last look it reached; a
    candidate in `same_code` is cleared without a test (it runs the baseline's code), and
    the others are tested among themselves."""
    others = [a for a in arms if a != baseline and a not in same_code]
    rows = [
        ScreenCandidate(
            arm=a, same_code=True, boots=data[a].n_boots if a in data else 0, difference=None,
            ci_low=None, ci_high=None, status="cleared", within_margin=False,
            decided_at_look=None, nominal_alpha=None,
        )
        for a in arms if a in same_code and a != baseline
    ]  # fmt: skip
    if not others:
        return _said(section, baseline, alpha, rows, True, data, arms)
    design = screen_design(section, len(others), alpha)
    dec = _replay(data, baseline, others, design, section.metric)
    relative = METRIC[section.metric].relative
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
                spread=None if k < 0 else "pooled" if dec.pooled[i] else "welch",
            )
        )  # fmt: skip
    finished = bool(np.all((dec.look >= 0) | (dec.reached == len(design.looks) - 1)))
    return _said(section, baseline, alpha, rows, finished, data, arms)


def _said(
    section: ManifestScreen, baseline: str, alpha: float, rows: list[ScreenCandidate],
    finished: bool, data: Mapping[str, ArmData], arms: list[str],
) -> Screening:  # fmt: skip
    rows = sorted(rows, key=lambda r: arms.index(r.arm))
    cleared = sum(r.status == "cleared" for r in rows)
    lowered = [r.arm for r in rows if r.status == "lowered"]
    same = [r.arm for r in rows if r.same_code]
    reason = (
        f"{cleared} of {len(rows)} cleared, lowered: {', '.join(lowered) or 'none'}"
        + (
            f"; {', '.join(same)} run{'s' if len(same) == 1 else ''} the baseline's code (cleared "
            "without boots)"
            if same
            else ""
        )
        + ("" if finished else "; boots still wanted")
    )
    used = sum(data[a].n_boots for a in arms if a in data)
    return Screening(
        metric=section.metric, baseline=baseline, margin=section.margin, alpha=alpha,
        looks=list(section.looks), spread=section.spread, candidates=rows, finished=finished,
        boots_used=used, boots_fixed_design=len(arms) * section.looks[-1], reason=reason,
    )  # fmt: skip


def screen_dropped(results: Results, alpha: float) -> dict[str, str]:
    """Arms that need no more boots, and why: decided candidates, and the baseline once
    every candidate is decided."""
    section = results.manifest.screen
    assert section is not None, "a screening needs its [screen] section"
    arms = results.arms()
    baseline = results.manifest.baseline or arms[0]
    same = same_code_candidates(results.manifest, baseline)
    if results.ok_boots().empty:
        return {a: "cleared: runs the baseline's code" for a in same}
    data = arm_data(results.probes, results.boots, arms, None).arms
    s = screening(data, arms, baseline, section, alpha, same)
    out = {
        c.arm: "cleared: runs the baseline's code" if c.same_code
        else f"{c.status} at look {c.decided_at_look}"
        for c in s.candidates
        if c.decided_at_look is not None or c.same_code
    }  # fmt: skip
    if len(out) == len(s.candidates):
        out[baseline] = "every candidate decided"
    return out
