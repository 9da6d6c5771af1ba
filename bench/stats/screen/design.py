"""Screening candidates without an order against one baseline, one-sided, with looks.

At look k (n_k boots of the candidate and of the baseline, the first ones by launch order)
each candidate not yet decided is compared with the baseline by Welch on boot values (as
`gate` does): L and U are the one-sided bounds of d = candidate − baseline at the look's
nominal level. **cleared** when L > −margin (not worse by more than the margin), **lowered**
when U < 0 (worse than the baseline), else unresolved. A decided candidate gets no more
boots; the baseline is booted while any candidate is unresolved.

Error control: each candidate's looks spend α/m one-sided (Bonferroni over the m
candidates) by O'Brien–Fleming, on each side. So the chance of clearing any candidate that
is worse by the margin or more is ≤ α, and so is the chance of calling lowered any candidate
that is not worse, over every candidate and look — whatever the other candidates do, since a
candidate's decisions rest on its own boots and the baseline's first n_k. Calibrated by
simulation through `decide_candidates` (tests/unit/test_screen.py, benchmarks/bench_screen.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from bench.stats.gate import gate_bounds
from bench.stats.methods import obf_boundaries

F = NDArray[np.float64]
Ints = NDArray[np.int64]
UNRESOLVED, CLEARED, LOWERED = 0, 1, 2
STATUS_NAMES = ("unresolved", "cleared", "lowered")


@dataclass(frozen=True)
class ScreenDesign:
    """A screening's looks, error rate, margin (on the comparison scale: a ratio metric's
    on log values) and number of candidates."""

    looks: tuple[int, ...]
    alpha: float
    margin: float
    candidates: int

    @cached_property
    def levels(self) -> tuple[float, ...]:
        """Each side's one-sided nominal level per look: O'Brien–Fleming spending of
        alpha / candidates."""
        _, nominal = obf_boundaries(self.looks, 2 * self.alpha / self.candidates)
        return tuple(p / 2 for p in nominal)


@dataclass(frozen=True)
class Decisions:
    """Per candidate (any leading batch axes, then candidates): the look that decided it
    (−1: none), its status, and the numbers at the last look it reached (−1: none)."""

    look: Ints
    status: Ints
    reached: Ints
    difference: F
    low: F
    high: F


def decide_candidates(
    base: F, cands: F, n_base: Ints, n_cands: Ints, design: ScreenDesign
) -> Decisions:
    """Replay the looks. `base` (..., N) and `cands` (..., m, N): boot values in launch
    order (anything past a side's count is ignored); `n_base` (...) and `n_cands` (..., m):
    how many each has. A candidate is tested at a look once both sides have its boots."""
    base, cands = np.asarray(base, np.float64), np.asarray(cands, np.float64)
    shape = cands.shape[:-1]
    look = np.full(shape, -1, np.int64)
    status = np.full(shape, UNRESOLVED, np.int64)
    reached = np.full(shape, -1, np.int64)
    d, lo, hi = (np.full(shape, np.nan) for _ in range(3))
    n_base = np.asarray(n_base)[..., None]
    for k, n in enumerate(design.looks):
        if n > cands.shape[-1] or n > base.shape[-1]:
            break
        usable = (np.asarray(n_cands) >= n) & (n_base >= n) & (look < 0)
        if not usable.any():
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            dk, lk, hk = gate_bounds(cands[..., :n], base[..., None, :n], design.levels[k])
        lowered = hk < 0
        code = np.where(lowered, LOWERED, np.where(lk > -design.margin, CLEARED, UNRESOLVED))
        d, lo, hi = (np.where(usable, new, old) for new, old in ((dk, d), (lk, lo), (hk, hi)))
        reached = np.where(usable, k, reached)
        decided = usable & (code != UNRESOLVED)
        look = np.where(decided, k, look)
        status = np.where(decided, code, status)
    return Decisions(look, status, reached, d, lo, hi)


def boots_spent(dec: Decisions, design: ScreenDesign) -> Ints:
    """Boots a finished screening took (per batch entry): each candidate to the look that
    decided it (the last one if none), the baseline to the latest of those."""
    last = len(design.looks) - 1
    n = np.asarray(design.looks)[np.where(dec.look >= 0, dec.look, last)]
    return np.asarray(n.sum(axis=-1) + n.max(axis=-1), dtype=np.int64)


def screen_boots(
    sd: float, margin: float, candidates: int, alpha: float, power: float, *, reps: int = 2000
) -> tuple[ScreenDesign, float, float] | None:
    """The smallest screening (looks 3, 6, 10, 16, … up to its last) in which a harmless
    candidate (no true difference) clears with probability ≥ `power`, by simulation through
    `decide_candidates` with boot values normal with SD `sd`: its design, the mean boots
    it takes when every candidate is harmless, and the share cleared. None past 200 boots."""
    if not (sd > 0 and margin > 0 and math.isfinite(sd)):
        return None
    rng = np.random.default_rng(0)  # the same draws for every size: a monotone search
    noise = rng.standard_normal((reps, candidates + 1, 200))
    for last in range(3, 201):
        looks = (*(n for n in (3, 6, 10, 16, 25, 40, 64, 100) if n < last), last)
        design = ScreenDesign(looks, alpha, margin / sd, candidates)
        base, cands = noise[:, 0, :last], noise[:, 1:, :last]
        n_cands = np.full((reps, candidates), last)
        dec = decide_candidates(base, cands, np.full(reps, last), n_cands, design)
        cleared = float((dec.status == CLEARED).mean())
        if cleared >= power:
            return design, float(boots_spent(dec, design).mean()), cleared
    return None
