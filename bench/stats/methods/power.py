"""Power: the minimum detectable effect of a comparison, the planned MDE with B boots per arm,
and the boots per arm a target effect needs (docs/statistics.md)."""

from __future__ import annotations

import numpy as np

from bench.stats.methods.intervals import t_quantile
from bench.stats.methods.ratio_estimates import F, X


def detectable(se: X, df: X, alpha: float, power: float = 0.8) -> F:
    """Minimum detectable effect of a comparison: (t_{1-a/2,df} + t_{power,df}) SE, for any
    df > 0 (fractional Welch df below 2 included). NaN where SE or df is unusable."""
    se, df = np.asarray(se, dtype=np.float64), np.asarray(df, dtype=np.float64)
    ok = np.isfinite(se) & (se > 0) & (df > 0)
    factor = t_quantile(1.0 - alpha / 2.0, np.where(ok, df, 1.0)) + t_quantile(
        power, np.where(ok, df, 1.0)
    )
    return np.where(ok, factor * se, np.nan)


def mde(sd: F | float, boots: F | float, alpha: float, power: float = 0.8) -> F:
    """Planned MDE with B equal boots per arm: SE = sd sqrt(2/B), v = 2B - 2. NaN for B < 2."""
    b = np.asarray(boots, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.asarray(sd, dtype=np.float64) * np.sqrt(2.0 / b)
        return np.where(
            b >= 2, detectable(se, np.where(b >= 2, 2.0 * b - 2.0, 1.0), alpha, power), np.nan
        )


def boots_needed(
    sd: float, effect: float, alpha: float, power: float = 0.8, limit: int = 100_000
) -> int | None:
    """Smallest boots per arm (>= 2) whose planned MDE at `power` <= effect; None if unknown
    or beyond `limit`. MDE falls monotonically with B: a bisection needs ~17 quantiles."""
    if not np.isfinite(sd) or not np.isfinite(effect) or effect <= 0:
        return None
    if sd == 0:
        return 2

    def ok(b: int) -> bool:
        return bool(float(mde(sd, float(b), alpha, power)) <= effect)

    if ok(2):
        return 2
    if not ok(limit):
        return None
    lo, hi = 2, limit  # not ok(lo), ok(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi
