"""Screening candidates without an order against one baseline, one-sided, with looks.

At look k (n_k boots of the candidate and of the baseline, the first ones by launch order)
each candidate not yet decided is compared with the baseline on boot values: L and U are
the one-sided bounds of d = candidate − baseline at the look's nominal level, with the boot
spread pooled over every arm (`spread`: a pooled look waits for every undecided arm's boots)
or, with `spread = "welch"` or one candidate, each pair's own (Welch, as `gate` does).
**cleared** when L > −margin (not worse by more than the margin), **lowered** when U < 0
(worse than the baseline), else unresolved. A decided candidate gets no more boots; the
baseline is booted while any candidate is unresolved.

Error control: two families of m hypotheses, "worse by the margin or more" (rejected: the
candidate clears) and "not worse" (rejected: lowered). Each family is tested by Holm over the
candidates, each candidate's looks spending its share by `spending` (the group sequential
Holm procedure, Maurer & Bretz 2013): with j of a family's hypotheses rejected,
every other one is tested at α/(m − j) one-sided, its boundaries recomputed for that level,
and a rejection at a look lets the others be tested again at that look. So the chance of
clearing any candidate that is worse by the margin or more is ≤ α, and so is the chance of
calling lowered any candidate that is not worse, over every candidate and look. Calibrated
by simulation through `decide_candidates` (tests/unit/test_screen.py,
benchmarks/bench_screen.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from bench.records import PLAN_LOOKS, SCREEN_SPENDING, SCREEN_SPREAD, looks_ending_at
from bench.stats.methods import obf_boundaries, t_quantile, welch
from bench.stats.screen.spread import pooled_spread

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
    spending: str = SCREEN_SPENDING
    spread: str = SCREEN_SPREAD

    @cached_property
    def level_table(self) -> F:
        """[j, k]: the one-sided nominal level at look k of a hypothesis whose family has j
        rejected already (alpha / (candidates − j) spent over the looks by `spending`)."""
        rows = [obf_boundaries(self.looks, 2 * self.alpha / (self.candidates - j),
                               self.spending)[1] for j in range(self.candidates)]  # fmt: skip
        return np.asarray(rows, dtype=np.float64) / 2

    @property
    def levels(self) -> tuple[float, ...]:
        """Each look's level before any rejection: alpha / candidates spent over the looks."""
        return tuple(float(x) for x in self.level_table[0])


@dataclass(frozen=True)
class Decisions:
    """Per candidate (any leading batch axes, then candidates): the look that decided it
    (−1: none), its status, the numbers at the last look it reached (−1: none) and the
    one-sided level its deciding test used (NaN: undecided), Holm's raised level included,
    and whether that last look's spread was pooled over every arm."""

    look: Ints
    status: Ints
    reached: Ints
    difference: F
    low: F
    high: F
    level: F
    pooled: NDArray[np.bool_]


def decide_candidates(
    base: F, cands: F, n_base: Ints, n_cands: Ints, design: ScreenDesign
) -> Decisions:
    """Replay the looks. `base` (..., N) and `cands` (..., m, N): boot values in launch
    order (anything past a side's count is ignored); `n_base` (...) and `n_cands` (..., m):
    how many each has. A candidate is tested at a look once both sides have its boots."""
    base, cands = np.asarray(base, np.float64), np.asarray(cands, np.float64)
    shape = cands.shape[:-1]
    look = np.full(shape, -1, np.int64)
    reached = np.full(shape, -1, np.int64)
    cleared, lowered = np.zeros(shape, bool), np.zeros(shape, bool)  # each family's rejections
    d, lo, hi, used = (np.full(shape, np.nan) for _ in range(4))
    spread = np.zeros(shape, bool)
    n_base = np.asarray(n_base)[..., None]
    pooled = design.spread == "pooled" and design.candidates > 1
    for k, n in enumerate(design.looks):
        if n > cands.shape[-1] or n > base.shape[-1]:
            break
        usable = (np.asarray(n_cands) >= n) & (n_base >= n) & (look < 0)
        if pooled:  # the look waits for every undecided arm's n boots: its spread is theirs
            usable &= np.all(usable | (look >= 0), axis=-1, keepdims=True)
        if not usable.any():
            continue
        dk, se, df = _welch(cands[..., :n], base[..., None, :n])
        pooled_now = np.zeros(dk.shape, bool)
        if pooled:
            se, df, pooled_now = pooled_spread(cands, base, look, n, design.looks, se, df)
        while True:  # Holm: each rejection raises the others' level, at this look too
            lk = dk - _t(design, cleared, k, df) * se
            hk = dk + _t(design, lowered, k, df) * se
            new_clear = usable & ~cleared & ~lowered & (lk > -design.margin)
            new_low = usable & ~cleared & ~lowered & (hk < 0)
            if not (new_clear.any() or new_low.any()):
                break
            used = np.where(new_clear, _level(design, cleared, k), used)
            used = np.where(new_low, _level(design, lowered, k), used)
            cleared, lowered = cleared | new_clear, lowered | new_low
            look = np.where(new_clear | new_low, k, look)
        d, lo, hi = (np.where(usable, new, old) for new, old in ((dk, d), (lk, lo), (hk, hi)))
        reached = np.where(usable, k, reached)
        spread = np.where(usable, pooled_now, spread)
    status = np.where(lowered, LOWERED, np.where(cleared, CLEARED, UNRESOLVED))
    return Decisions(look, status.astype(np.int64), reached, d, lo, hi, used, spread)


def _welch(cands: F, base: F) -> tuple[F, F, F]:
    """Candidate − baseline along the last axis: difference, Welch SE and df."""
    with np.errstate(invalid="ignore", divide="ignore"):
        n_c, n_b = cands.shape[-1], base.shape[-1]
        se, df = welch(
            np.std(cands, axis=-1, ddof=1) / np.sqrt(n_c), n_c - 1,
            np.std(base, axis=-1, ddof=1) / np.sqrt(n_b), n_b - 1,
        )  # fmt: skip
        return cands.mean(axis=-1) - base.mean(axis=-1), se, df


def _level(design: ScreenDesign, rejected: NDArray[np.bool_], k: int) -> F:
    """Each candidate's one-sided level at look k: its family's Holm level, raised by the
    hypotheses that family has rejected so far."""
    j = np.minimum(rejected.sum(axis=-1), design.candidates - 1)
    return np.broadcast_to(design.level_table[j, k][..., None], rejected.shape)


def _t(design: ScreenDesign, rejected: NDArray[np.bool_], k: int, df: F) -> F:
    """Each candidate's one-sided t quantile at look k, at its family's Holm level."""
    with np.errstate(invalid="ignore"):
        return t_quantile(1 - _level(design, rejected, k), np.broadcast_to(df, rejected.shape))


def boots_spent(dec: Decisions, design: ScreenDesign) -> Ints:
    """Boots a finished screening took (per batch entry): each candidate to the look that
    decided it (the last one if none), the baseline to the latest of those."""
    last = len(design.looks) - 1
    n = np.asarray(design.looks)[np.where(dec.look >= 0, dec.look, last)]
    return np.asarray(n.sum(axis=-1) + n.max(axis=-1), dtype=np.int64)


def boots_one_harmful(design: ScreenDesign, shift: float, *, reps: int = 2000) -> float:
    """Mean boots of a screening by `design` when one candidate is worse than the baseline
    by `shift` boot SDs and the others are harmless, simulated through `decide_candidates`."""
    rng = np.random.default_rng(1)
    last, m = design.looks[-1], design.candidates
    base = rng.standard_normal((reps, last))
    cands = rng.standard_normal((reps, m, last))
    cands[:, 0, :] -= shift
    dec = decide_candidates(base, cands, np.full(reps, last), np.full((reps, m), last), design)
    return float(boots_spent(dec, design).mean())


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
        looks = looks_ending_at(last, PLAN_LOOKS)
        design = ScreenDesign(looks, alpha, margin / sd, candidates)
        base, cands = noise[:, 0, :last], noise[:, 1:, :last]
        n_cands = np.full((reps, candidates), last)
        dec = decide_candidates(base, cands, np.full(reps, last), n_cands, design)
        cleared = float((dec.status == CLEARED).mean())
        if cleared >= power:
            return design, float(boots_spent(dec, design).mean()), cleared
    return None
