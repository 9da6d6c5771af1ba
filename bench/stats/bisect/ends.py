"""The search's first question: do the good and bad ends differ? Welch on their boots at each
look of `endpoint_looks`, at α over the looks (Bonferroni), so a history without a change is
called changed at most α of the time; a difference beyond the margin, where one is set, lets
the search start. When they do not differ, the smallest change the ends could have shown."""

from __future__ import annotations

import math

from bench.stats.bisect.changepoint import F
from bench.stats.bisect.confirm import POWER
from bench.stats.bisect.search_settings import BisectSettings
from bench.stats.methods import interval, t_quantile, welch

Shown = tuple[float, float, float, float]  # difference (bad - good), ci_low, ci_high, df


def endpoint_test(good: F, bad: F, s: BisectSettings) -> tuple[bool | None, Shown | None, int]:
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
        down, up = s.margin or (0.0, 0.0)
        if lo > up or hi < -down:
            return True, shown, n
        if i == k - 1:
            return False, shown, n
    raise AssertionError("unreachable")


def smallest_change(shown: Shown, s: BisectSettings) -> float:
    """The change the ends' last look would have shown with `POWER` (its half-width plus the
    power quantile's share, on the metric's scale, plus any margin)."""
    diff, lo, hi, df = shown
    half = (hi - lo) / 2
    z = float(t_quantile(1 - s.alpha / len(s.endpoint_looks) / 2, df))
    floor = (s.margin[1] if diff >= 0 else s.margin[0]) if s.margin else 0.0
    return half * (1 + float(t_quantile(POWER, df)) / z) + floor
