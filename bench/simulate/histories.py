"""Simulated histories with a known culprit, searched by the product's own `run_search`: the
calibration of "which change did it" (tests) and its benchmark share this one generator and
tally, so the two cannot measure different things.

A history of `n_points` points has one step of `step` boot SDs at its culprit (uniform over
1 .. n_points - 1 unless fixed), boots normal or t with 3 df (scaled to the SD), and a boot
SD of `bad_sd` from the culprit on. Other kinds: no step; two steps of half the size each;
a flaky point (t3 boots at twice the SD) that is not the culprit; the point before the
culprit unbuildable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from bench.stats.bisect import BisectSettings, run_search

HistoryKind = Literal["one step", "no step", "two steps", "flaky point", "unbuildable"]


@dataclass(frozen=True)
class HistoryCase:
    """One row of the calibration: the history and the search's settings."""

    step: float  # in boot SDs of the good side
    n_points: int = 32
    culprit: int | None = None  # None: uniform over 1 .. n_points - 1
    tails: Literal["normal", "t3"] = "normal"
    bad_sd: float = 1.0  # the boots' SD from the culprit on
    slots: int = 1
    kind: HistoryKind = "one step"

    @property
    def label(self) -> str:
        parts = [self.kind if self.kind != "one step" else f"δ = {self.step:g} SD"]
        parts += [f"{self.n_points} points"]
        if self.culprit is not None:
            parts.append(f"culprit at {self.culprit}")
        if self.tails != "normal":
            parts.append(f"{self.tails} boots")
        if self.bad_sd != 1.0:
            parts.append(f"SD {self.bad_sd:g} after the change")
        if self.slots != 1:
            parts.append(f"{self.slots} slots")
        return ", ".join(parts)


@dataclass(frozen=True)
class SearchTally:
    """What the searches of one case answered."""

    searches: int
    named: int  # named a culprit
    named_wrong: int  # ... that is not one of the history's culprits
    ranges: int  # gave a range of points
    ranges_without: int  # ... that holds none of the culprits
    not_reproduced: int  # said the ends do not differ
    changed_claims_wrong: int  # a culprit or range on a history without a step
    boots: float  # mean boots a search used

    @property
    def wrong_among_named(self) -> float:
        return self.named_wrong / self.named if self.named else 0.0

    @property
    def named_right(self) -> float:
        return (self.named - self.named_wrong) / self.searches

    def mcse(self, p: float) -> float:
        """Monte Carlo SE of a share p among the named culprits."""
        return math.sqrt(p * (1 - p) / max(self.named, 1))


def _history(case: HistoryCase, rng: np.random.Generator):  # type: ignore[no-untyped-def]
    """(draw, culprits, unavailable) of one simulated history."""
    n = case.n_points
    lo = 2 if case.kind in ("unbuildable", "two steps") else 1
    c = case.culprit if case.culprit is not None else int(rng.integers(lo, n))
    idx = np.arange(n)
    levels = np.where(idx >= c, case.step, 0.0)
    sd = np.where(idx >= c, case.bad_sd, 1.0)
    culprits, unavailable, flaky = {c}, set(), -1
    if case.kind == "no step":
        levels[:], culprits = 0.0, set()
    elif case.kind == "two steps":
        c2 = int(rng.integers(lo, n))
        while abs(c2 - c) < 2:
            c2 = int(rng.integers(lo, n))
        levels = case.step / 2 * ((idx >= c) + (idx >= c2))
        culprits = {c, c2}
    elif case.kind == "flaky point":
        flaky = int(rng.choice([p for p in range(1, n - 1) if p != c]))
    elif case.kind == "unbuildable":
        unavailable = {c - 1}

    def draw(point: int, k: int) -> np.ndarray:
        if point == flaky:
            return levels[point] + 2 * rng.standard_t(3, k) / math.sqrt(3)
        if case.tails == "t3":
            return levels[point] + sd[point] * rng.standard_t(3, k) / math.sqrt(3)
        return levels[point] + sd[point] * rng.standard_normal(k)

    return draw, culprits, unavailable


def tally_searches(case: HistoryCase, reps: int, seed: int, alpha: float = 0.05) -> SearchTally:
    """`reps` searches of fresh histories of `case` with the product's defaults."""
    rng = np.random.default_rng(seed)
    named = named_wrong = ranges = ranges_without = not_repr = wrong_change = 0
    boots = 0
    settings = BisectSettings(n_points=case.n_points, alpha=alpha, slots=case.slots)
    for _ in range(reps):
        draw, culprits, unavailable = _history(case, rng)
        step, points, _ = run_search(draw, settings, unavailable)
        boots += points.size
        if step.outcome == "culprit":
            named += 1
            named_wrong += step.first not in culprits
        elif step.outcome == "range":
            assert step.first is not None and step.last is not None
            ranges += 1
            ranges_without += not any(step.first <= c <= step.last for c in culprits)
        else:
            not_repr += 1
        wrong_change += not culprits and step.outcome != "not_reproduced"
    return SearchTally(reps, named, named_wrong, ranges, ranges_without, not_repr, wrong_change,
                       boots / reps)  # fmt: skip
