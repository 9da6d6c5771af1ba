"""The search over a history, one step at a time: from every boot so far, either which points
to boot next or the answer (the culprit, a range of points, or that the change did not
reproduce). Pure: the run-ab driver and the calibration call the same `next_step`, and
`run_search` is the loop both follow (boot what is asked, ask again).

1. **Endpoints first.** The good (point 0) and bad (last point) ends are booted to each
   look of `endpoint_looks` in turn; at a look, Welch on their boots at α over the looks
   (Bonferroni). A difference (beyond `margin`, where one is set) lets the search start;
   none by the last look is the answer "did not reproduce", so a history without a change
   is called changed at most α of the time.
2. **Then the posterior** over the first changed point (`changepoint`), from every boot of
   every point: once one candidate holds 1 − α, it is named; the chance it is wrong is α
   where the one-step model holds (calibrated by simulation, docs/statistics.md).
3. **Where to boot next**: the point whose boots split the posterior most evenly (P(c ≤ m)
   nearest 1/2), one boot at a time (the boot-to-boot SD is pooled over every point); with
   several slots, the points at the posterior's quantiles. A point that has `cap` boots, or
   cannot be built, is passed over; when no point that could tell apart the candidates of
   the shortest range holding 1 − α can be built (one next to the culprit), or `max_boots`
   is spent, that range is the answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from bench.stats.bisect.changepoint import F, Ints, credible_range, culprit_posterior
from bench.stats.methods import interval, welch

Outcome = Literal["boot", "culprit", "range", "not_reproduced"]


@dataclass(frozen=True)
class BisectSettings:
    """How a search runs: the history's length, its error rate and how it spends boots."""

    n_points: int
    alpha: float = 0.05
    endpoint_looks: tuple[int, ...] = (3, 6, 10, 16)
    first: int = 1  # boots at a point's first visit (the spread is pooled over all points)
    cap: int = 10  # boots at one point at most
    slots: int = 1  # points booted at once
    max_boots: int = 400
    margin: float | None = None  # smallest change worth finding; None: any that reproduces


@dataclass(frozen=True)
class Step:
    """What the search does next, or what it found."""

    outcome: Outcome
    boots: dict[int, int] = field(default_factory=dict)  # point -> boots to add ("boot")
    first: int | None = None  # the culprit, or the range's first point
    last: int | None = None  # the range's last point (the culprit again when one is named)
    posterior: F | None = None  # P(c = k), k = 1 .. n_points - 1
    endpoints: tuple[float, float, float, float] | None = None  # diff, ci_low, ci_high, df
    reason: str = ""


def endpoint_test(
    good: F, bad: F, s: BisectSettings
) -> tuple[bool | None, tuple[float, float, float, float] | None, int]:
    """Whether the ends differ (None: not yet decided), the difference with its interval,
    and the boots each end needs for the next look."""
    k = len(s.endpoint_looks)
    level = s.alpha / k
    for i, n in enumerate(s.endpoint_looks):
        if min(good.size, bad.size) < n:
            return None, None, n
        g, b = good[:n], bad[:n]
        se, df = welch(g.std(ddof=1) / math.sqrt(n), n - 1, b.std(ddof=1) / math.sqrt(n), n - 1)
        diff = float(b.mean() - g.mean())
        lo, hi = (float(x) for x in interval(diff, se, df, level))
        shown = (diff, lo, hi, float(df))
        floor = s.margin or 0.0
        if lo > floor or hi < -floor:
            return True, shown, n
        if i == k - 1:
            return False, shown, n
    raise AssertionError("unreachable")


def _asked(
    posterior: F, counts: NDArray[np.int64], open_: NDArray[np.bool_], s: BisectSettings
) -> dict[int, int]:
    """The points to boot next: at the posterior's quantiles j / (slots + 1)."""
    cdf = np.cumsum(posterior)  # cdf[m - 1] = P(c <= m)
    inner = np.arange(1, s.n_points - 1)
    candidates = inner[open_[inner]]
    out: dict[int, int] = {}
    for j in range(1, s.slots + 1):
        left = [m for m in candidates if m not in out]
        if not left:
            break
        score = np.abs(cdf[np.asarray(left) - 1] - j / (s.slots + 1))
        m = int(left[int(np.argmin(score))])
        out[m] = s.first if counts[m] == 0 else 1
    return out


def next_step(
    points: Ints,
    values: F,
    s: BisectSettings,
    unavailable: Collection[int] = (),
    same: Collection[int] = (),
) -> Step:
    """The next step of the search from every boot so far (`points[i]`: the point boot i
    measured, `values[i]` its value); `unavailable`: points that cannot be booted; `same`:
    points that run the same code as the point before them (never booted, never the
    culprit)."""
    points, values = np.asarray(points, dtype=np.int64), np.asarray(values, dtype=np.float64)
    good, bad = values[points == 0], values[points == s.n_points - 1]
    reproduced, shown, need = endpoint_test(good, bad, s)
    if reproduced is None:
        return Step("boot", {0: need - good.size, s.n_points - 1: need - bad.size})
    if not reproduced:
        return Step("not_reproduced", endpoints=shown, reason="the ends do not differ")
    post = culprit_posterior(points, values, s.n_points, same)
    best = int(np.argmax(post))
    if post[best] >= 1 - s.alpha:
        return Step("culprit", first=best + 1, last=best + 1, posterior=post, endpoints=shown)
    counts = np.bincount(points, minlength=s.n_points)
    open_ = counts < s.cap
    open_[[*unavailable, *same]] = False
    lo, hi = credible_range(post, 1 - s.alpha)
    # the points whose boots could split the candidates lo..hi are lo..hi - 1: when none of
    # them can be built, no boot anywhere tells the candidates apart
    splittable = any(m not in unavailable and m not in same for m in range(lo, hi))
    go_on = points.size < s.max_boots and splittable
    asked = _asked(post, counts, open_, s) if go_on else {}
    if asked:
        return Step("boot", asked, posterior=post, endpoints=shown)
    why = (
        "boot budget spent"
        if points.size >= s.max_boots
        else "no point that could tell the candidates apart can be booted"
        if not splittable
        else "every point that could tell them apart has its most boots"
    )
    return Step("range", first=lo, last=hi, posterior=post, endpoints=shown, reason=why)


def run_search(
    draw: Callable[[int, int], F], s: BisectSettings, unavailable: Collection[int] = ()
) -> tuple[Step, Ints, F]:
    """Search to the end, booting what each step asks through `draw(point, boots)`."""
    points, values = np.zeros(0, dtype=np.int64), np.zeros(0)
    while True:
        step = next_step(points, values, s, unavailable)
        if step.outcome != "boot":
            return step, points, values
        for p, k in step.boots.items():
            points = np.concatenate([points, np.full(k, p, dtype=np.int64)])
            values = np.concatenate([values, np.asarray(draw(p, k), dtype=np.float64)])
