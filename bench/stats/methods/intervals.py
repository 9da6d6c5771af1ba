"""Welch SEs and Satterthwaite df of a difference, t quantiles (normal for infinite df),
two-sided t intervals and p-values; vectorized over leading batch axes."""

from __future__ import annotations

import functools

import numpy as np
from scipy import stats as st

from bench.stats.methods.ratio_estimates import F, X


def welch(se_i: X, df_i: X, se_j: X, df_j: X) -> tuple[F, F]:
    """SE of the difference and its Welch-Satterthwaite df (inf when both sides are exact)."""
    se_i, se_j = np.asarray(se_i, dtype=np.float64), np.asarray(se_j, dtype=np.float64)
    v_i, v_j = se_i**2, se_j**2
    se = np.sqrt(v_i + v_j)
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = np.where(v_i > 0, v_i**2 / df_i, 0.0) + np.where(v_j > 0, v_j**2 / df_j, 0.0)
        df = np.where(denom > 0, (v_i + v_j) ** 2 / denom, np.inf)
    return se, df


def t_quantile(q: X, df: X) -> F:
    """Student t quantile that degrades to the normal one for infinite df."""
    if np.ndim(q) == 0 and np.ndim(df) == 0:  # planning's bisections ask one at a time
        return np.asarray(_scalar_t_quantile(float(q), float(df)))
    df = np.asarray(df, dtype=np.float64)
    safe = np.where(np.isfinite(df), df, 1.0)
    return np.where(np.isfinite(df), st.t.ppf(q, safe), st.norm.ppf(q))


@functools.lru_cache(maxsize=4096)
def _scalar_t_quantile(q: float, df: float) -> float:
    """One quantile, remembered: scipy's ppf costs ~0.3 ms a call, and power planning asks
    the same few (alpha, df) pairs for every metric and comparison."""
    return float(st.norm.ppf(q) if not np.isfinite(df) else st.t.ppf(q, df))


def interval(est: X, se: X, df: X, alpha: X) -> tuple[F, F]:
    """Two-sided (1 - alpha) t interval."""
    half = t_quantile(1.0 - np.asarray(alpha) / 2.0, df) * se
    return est - half, est + half


def t_pvalue(est: X, se: X, df: X) -> F:
    """Two-sided p of est/se against t_df; NaN when se is 0 (no significance to state)."""
    est, se = np.asarray(est, dtype=np.float64), np.asarray(se, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(est) / se
    safe = np.where(np.isfinite(df), df, 1.0)
    p = np.where(np.isfinite(df), 2.0 * st.t.sf(t, safe), 2.0 * st.norm.sf(t))
    return np.where(se > 0, p, np.nan)
