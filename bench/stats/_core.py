"""Vectorized core of the boot-level statistics (STATISTICS.md): ratio estimates, Welch
intervals, verdicts, Holm, power. Every function takes arrays whose LAST axis is boots (or
the comparison family) and any leading batch axes, so calibration runs thousands of
simulated experiments in one call.

What the answers mean: intervals are for the difference in the ratio-of-sums metric between
arms *on this probe set*, with boots as the unit of replication (about B_i + B_j - 2 degrees
of freedom). They say nothing about other prompts (see the pigeonhole interval) and nothing
at all when an arm has one boot (no between-boot variance: "unreplicated").
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy import stats as st

F = NDArray[np.float64]
X = NDArray[np.float64] | float  # arrays or scalars (np.float64 is a float)

VERDICTS = (
    "improved",
    "regressed",
    "small_improvement",
    "small_regression",
    "equivalent",
    "inconclusive",
)
IMPROVED, REGRESSED, SMALL_IMP, SMALL_REG, EQUIVALENT, INCONCLUSIVE = range(6)


def linearize(num: F, den: F) -> tuple[F, F]:
    """Ratio of sums R = sum(num)/sum(den) over boots, and linearized boot values
    z_b = (num_b - R den_b) / mean(den): their SD is the ratio's between-boot SD."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    ratio = num.sum(axis=-1) / den.sum(axis=-1)
    z = (num - ratio[..., None] * den) / den.mean(axis=-1, keepdims=True)
    return ratio, z


def arm_stats(num: F, den: F) -> tuple[F, F, F, F]:
    """(estimate, SE, between-boot SD, df) per arm; SD/SE are NaN when B = 1."""
    ratio, z = linearize(num, den)
    b = z.shape[-1]
    if b < 2:
        nan = np.full(ratio.shape, np.nan)
        return ratio, nan, nan, nan
    sd = z.std(axis=-1, ddof=1)
    return ratio, sd / np.sqrt(b), sd, np.full(ratio.shape, float(b - 1))


def welch(se_i: X, df_i: X, se_j: X, df_j: X) -> tuple[F, F]:
    """SE of the difference and its Welch-Satterthwaite df (inf when a side is exact)."""
    se_i, se_j = np.asarray(se_i, dtype=np.float64), np.asarray(se_j, dtype=np.float64)
    v_i, v_j = se_i**2, se_j**2
    se = np.sqrt(v_i + v_j)
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = np.where(v_i > 0, v_i**2 / df_i, 0.0) + np.where(v_j > 0, v_j**2 / df_j, 0.0)
        df = np.where(denom > 0, (v_i + v_j) ** 2 / denom, np.inf)
    return se, df


def t_quantile(q: X, df: X) -> F:
    """Student t quantile that degrades to the normal one for infinite df."""
    df = np.asarray(df, dtype=np.float64)
    safe = np.where(np.isfinite(df), df, 1.0)
    return np.where(np.isfinite(df), st.t.ppf(q, safe), st.norm.ppf(q))


def interval(est: X, se: X, df: X, alpha: float) -> tuple[F, F]:
    """Two-sided (1 - alpha) t interval."""
    half = t_quantile(1.0 - alpha / 2.0, df) * se
    return est - half, est + half


def t_pvalue(est: X, se: X, df: X) -> F:
    """Two-sided p of est/se against t_df; NaN when se is 0 (no significance to state)."""
    est, se = np.asarray(est, dtype=np.float64), np.asarray(se, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(est) / se
    safe = np.where(np.isfinite(df), df, 1.0)
    p = np.where(np.isfinite(df), 2.0 * st.t.sf(t, safe), 2.0 * st.norm.sf(t))
    return np.where(se > 0, p, np.nan)


def holm(p: F) -> F:
    """Holm step-down adjusted p over the last axis; NaN entries are left out of the family."""
    p = np.asarray(p, dtype=np.float64)
    valid = ~np.isnan(p)
    m = valid.sum(axis=-1, keepdims=True)
    order = np.argsort(np.where(valid, p, np.inf), axis=-1, kind="stable")
    sorted_p = np.take_along_axis(p, order, axis=-1)
    rank = np.arange(p.shape[-1])
    scaled = np.where(rank < m, (m - rank) * sorted_p, np.nan)
    adj_sorted = np.minimum(1.0, np.fmax.accumulate(np.nan_to_num(scaled, nan=-1.0), axis=-1))
    adj_sorted = np.where(rank < m, adj_sorted, np.nan)
    out = np.empty_like(p)
    np.put_along_axis(out, order, adj_sorted, axis=-1)
    return out


def verdict_codes(
    diff: X,
    lo: X,
    hi: X,
    lo2: X,
    hi2: X,
    margin: X,
    claimed: NDArray[np.bool_] | None = None,
) -> NDArray[np.int64]:
    """The five verdicts (codes index VERDICTS) from the (1-a) CI [lo, hi], the (1-2a) CI
    [lo2, hi2] and the margin. `claimed` (a difference is declared, e.g. Holm p < alpha)
    defaults to 0 outside [lo, hi]. NaN intervals give `inconclusive`."""
    diff = np.asarray(diff, dtype=np.float64)
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    lo2, hi2 = np.asarray(lo2, dtype=np.float64), np.asarray(hi2, dtype=np.float64)
    claim: NDArray[np.bool_] = (lo > 0) | (hi < 0) if claimed is None else np.asarray(claimed)
    out = np.full(diff.shape, INCONCLUSIVE, dtype=np.int64)
    equiv = (lo2 > -margin) & (hi2 < margin)
    up, down = claim & (diff > 0), claim & (diff < 0)
    # Written in reverse priority so that earlier rules overwrite later ones.
    out = np.where(down, SMALL_REG, out)
    out = np.where(up, SMALL_IMP, out)
    out = np.where(equiv, EQUIVALENT, out)
    out = np.where(up & (lo <= margin) & (hi > margin), SMALL_IMP, out)
    out = np.where(down & (hi >= -margin) & (lo < -margin), SMALL_REG, out)
    out = np.where(up & (lo > margin), IMPROVED, out)
    out = np.where(down & (hi < -margin), REGRESSED, out)
    return out


def mde(sd: F | float, boots: F | float, alpha: float, power: float = 0.8) -> F:
    """Minimum detectable effect with B boots per arm: (t_{1-a/2,v} + t_{power,v}) sd sqrt(2/B),
    v = 2B - 2. NaN for B < 2."""
    b = np.asarray(boots, dtype=np.float64)
    nu = np.where(b >= 2, 2.0 * b - 2.0, np.nan)
    with np.errstate(invalid="ignore"):
        factor = st.t.ppf(1.0 - alpha / 2.0, nu) + st.t.ppf(power, nu)
        out: F = factor * np.asarray(sd, dtype=np.float64) * np.sqrt(2.0 / b)
    return out


def boots_needed(
    sd: float, effect: float, alpha: float, power: float = 0.8, limit: int = 100_000
) -> int | None:
    """Smallest boots per arm (>= 2) whose MDE <= effect; None if unknown or beyond `limit`.

    MDE falls monotonically with B, so a bisection needs ~17 t quantiles, not a grid."""
    if not np.isfinite(sd) or not np.isfinite(effect) or effect <= 0:
        return None
    if sd == 0:
        return 2
    if float(mde(sd, 2.0, alpha, power)) <= effect:
        return 2
    if float(mde(sd, float(limit), alpha, power)) > effect:
        return None
    lo, hi = 2, limit  # mde(lo) > effect >= mde(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if float(mde(sd, float(mid), alpha, power)) <= effect:
            hi = mid
        else:
            lo = mid
    return hi


def max_t_critical(cov: F, df: float, alpha: float, draws: int = 20_000, seed: int = 0) -> float:
    """Critical value c with P(max_k |T_k| <= c) = 1 - alpha for T multivariate t with the
    correlation of `cov` and `df` degrees of freedom (simultaneous intervals, max-|t|)."""
    cov = np.asarray(cov, dtype=np.float64)
    sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    keep = sd > 0
    k = int(keep.sum())
    if k == 0:
        return float("nan")
    corr = cov[np.ix_(keep, keep)] / np.outer(sd[keep], sd[keep])
    vals, vecs = np.linalg.eigh(corr)
    root = vecs * np.sqrt(np.clip(vals, 0.0, None))
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((draws, k)) @ root.T
    if np.isfinite(df):
        z /= np.sqrt(rng.chisquare(df, (draws, 1)) / df)
    return float(np.quantile(np.abs(z).max(axis=1), 1.0 - alpha))


def compare(r_i: X, se_i: X, df_i: X, r_j: X, se_j: X, df_j: X, alpha: float) -> dict[str, F]:
    """Difference j - i with its Welch SE/df, (1-a) and (1-2a) intervals and raw p."""
    diff = np.asarray(r_j, dtype=np.float64) - np.asarray(r_i, dtype=np.float64)
    se, df = welch(se_i, df_i, se_j, df_j)
    lo, hi = interval(diff, se, df, alpha)
    lo2, hi2 = interval(diff, se, df, 2.0 * alpha)
    return {
        "diff": diff,
        "se": se,
        "df": df,
        "lo": lo,
        "hi": hi,
        "lo2": lo2,
        "hi2": hi2,
        "p": t_pvalue(diff, se, df),
    }
