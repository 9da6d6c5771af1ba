"""Naming a culprit: the posterior proposes a point c, and only fresh boots confirm it.

A named culprit c is wrong exactly when c and the point before it (its partner) run at one
level: the culprit lies elsewhere. So c is named only when boots of the two, drawn after the
search proposed c, differ in the direction of the ends' change (one-sided Welch, compared at
`CONFIRM_LOOKS` fresh boots a side, the attempt's level split over the looks). Boots drawn
before the proposal chose c and cannot vouch for it (the winner's curse that made the
posterior alone wrong in one named culprit in seven at a one-SD step); fresh boots are
independent of that choice, so a wrong c passes with probability at most the attempt's level.

Attempts after a failed one spend what is left: attempt j (0-based) tests at
α·(1 − r)·r^j (r = `LEVEL_RATIO`), and the levels of all attempts sum to at most α. A named
culprit is therefore wrong at most α of the time, whatever the step, the spread on either
side or the history's length; what the step size decides is how often a culprit is named
rather than a range of points. Pure arrays, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from bench.records import CONFIRM_LOOKS
from bench.stats.methods import t_quantile, welch

F = NDArray[np.float64]

LEVEL_RATIO = 0.25  # attempt j tests at alpha * (1 - r) * r**j
POWER = 0.8  # the power "boots to pin it" is sized for
# An attempt is made only when its last look would confirm a step of the ends' size at least
# this often: where it could not, a pass would more likely be a wrong pair's luck than the
# culprit's evidence, and the answer is the range with the boots that would pin it.
ATTEMPT_POWER = 0.5

PairOutcome = Literal["named", "not_named", "more"]


def attempt_level(alpha: float, attempt: int) -> float:
    """The one-sided level of the 0-based `attempt`: the levels of all attempts sum to alpha."""
    return alpha * (1 - LEVEL_RATIO) * LEVEL_RATIO**attempt


@dataclass(frozen=True)
class PairTest:
    """One attempt's state: named, not named (its last look, or the pair clearly does not
    carry the change), or the fresh boots a side it needs for its next look."""

    outcome: PairOutcome
    need: int = 0  # fresh boots a side for the next look ("more")
    difference: float | None = None  # culprit - partner, fresh boots, at the last look made
    ci_low: float | None = None  # one-sided bound at the look's level ("named": beyond 0)
    se: float | None = None
    boots: int = 0  # fresh boots a side the last look used


def pair_test(partner: F, culprit: F, direction: float, step: float, level: float) -> PairTest:
    """Fresh boots of the partner and the proposed culprit at the attempt's `level`;
    `direction`: the sign of the ends' change; `step`: its size (a look whose upper bound
    at 95 % lies below half of it stops the attempt early: the pair does not carry it)."""
    sign = 1.0 if direction >= 0 else -1.0
    last = PairTest("more", need=CONFIRM_LOOKS[0])
    for i, n in enumerate(CONFIRM_LOOKS):
        if min(partner.size, culprit.size) < n:
            return _more(last, n)
        p, c = partner[:n], culprit[:n]
        se_, df_ = welch(p.std(ddof=1) / math.sqrt(n), n - 1, c.std(ddof=1) / math.sqrt(n), n - 1)
        se, df = float(se_), float(df_)
        d = sign * float(c.mean() - p.mean())
        crit = float(t_quantile(1 - level / len(CONFIRM_LOOKS), df))
        low = d - crit * se
        shown = PairTest("more", difference=sign * d, ci_low=sign * low, se=se, boots=n)
        if low > 0:  # exact boots (se = 0) that differ at all differ
            return _as(shown, "named")
        if i == len(CONFIRM_LOOKS) - 1:
            return _as(shown, "not_named")
        if se > 0 and d + float(t_quantile(0.95, df)) * se < abs(step) / 2:
            return _as(shown, "not_named")
        if se == 0 and d == 0:  # exact and equal: more boots cannot part them
            return _as(shown, "not_named")
        last = shown
    raise AssertionError("unreachable")


def _as(t: PairTest, outcome: PairOutcome) -> PairTest:
    return PairTest(outcome, 0, t.difference, t.ci_low, t.se, t.boots)


def _more(t: PairTest, need: int) -> PairTest:
    return PairTest("more", need, t.difference, t.ci_low, t.se, t.boots)


def boots_to_pin(step: float, sd: float, level: float, power: float = POWER) -> int | None:
    """Fresh boots a side that would confirm a culprit of this step with `power`, at the
    level an attempt would test at (normal approximation, one look); None when the spread
    or the step is unknown."""
    if not (sd > 0 and step != 0 and np.isfinite(sd) and np.isfinite(step)):
        return None
    z = float(t_quantile(1 - level / len(CONFIRM_LOOKS), np.inf) + t_quantile(power, np.inf))
    return max(CONFIRM_LOOKS[0], math.ceil(2 * (z * sd / step) ** 2))


def within_point_sd(values: list[F]) -> float:
    """The boot-to-boot SD pooled within points (every point with two boots or more): free
    of any model of where the change lies."""
    ss = sum(float(((v - v.mean()) ** 2).sum()) for v in values if v.size >= 2)
    df = sum(v.size - 1 for v in values if v.size >= 2)
    return math.sqrt(ss / df) if df else float("nan")
