"""Resampling parts of the analysis, vectorized with weight matrices (no Python loops over
resamples): boot-label permutation test, studentized cluster bootstrap, pigeonhole bootstrap.

- Permutation (B >= 4 per arm): exact over all relabelings when there are at most
  `n_resamples` of them, else Monte Carlo. Its smallest attainable p is reported, because at
  small B it cannot go below 2/C(2B, B) (0.029 at B = 4) whatever the data.
- Studentized cluster bootstrap (B >= 10 per arm): boots resampled within arm, numerator
  and denominator together; a percentile bootstrap is NOT valid at small B (docs/statistics.md).
- Pigeonhole bootstrap (Owen 2007): one prompt-weight draw shared by every arm and boot,
  independent boot draws per arm. It answers "would this hold on new prompts?" and is
  reported beside, never instead of, the primary interval.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations
from math import comb
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench.stats.methods.intervals import t_quantile

F = NDArray[np.float64]


def _weighted_ratio_se(w: F, num: F, den: F) -> tuple[F, F]:
    """Ratio and linearized SE of the ratio for each row of boot weights w (M, B)."""
    b = num.shape[-1]
    # One pass over the (M, B) weights for all five weighted sums (memory-bound otherwise).
    sums = w @ np.stack([num, den, num * num, num * den, den * den, np.ones_like(num)], axis=1)
    s_n, s_d, s_nn, s_nd, s_dd, s_w = sums.T
    ratio = s_n / s_d
    dbar = s_d / s_w
    ss = s_nn - 2.0 * ratio * s_nd + ratio**2 * s_dd
    var = np.clip(ss, 0.0, None) / dbar**2 / (b - 1)
    return ratio, np.sqrt(var / b)


def _masks(n: int, k: int, n_resamples: int, rng: np.random.Generator) -> tuple[F, bool]:
    total = comb(n, k)
    if total <= n_resamples:
        idx = np.array(list(combinations(range(n), k)), dtype=np.int64)
        mask = np.zeros((total, n))
        np.put_along_axis(mask, idx, 1.0, axis=1)
        return mask, True
    order = np.argsort(rng.random((n_resamples, n)), axis=1)
    mask = np.zeros((n_resamples, n))
    np.put_along_axis(mask, order[:, :k], 1.0, axis=1)
    return mask, False


def permutation_test(
    num_i: F, den_i: F, num_j: F, den_j: F, n_resamples: int, rng: np.random.Generator
) -> tuple[float, float, bool]:
    """Boot-label permutation test of the Welch-studentized difference.

    Returns (p, minimum attainable p, exact?)."""
    b_i, b_j = num_i.size, num_j.size
    num = np.concatenate([num_j, num_i]).astype(np.float64)
    den = np.concatenate([den_j, den_i]).astype(np.float64)
    mask_j, exact = _masks(b_i + b_j, b_j, n_resamples, rng)

    def t_stat(m: F) -> F:
        r_j, se_j = _weighted_ratio_se(m, num, den)
        r_i, se_i = _weighted_ratio_se(1.0 - m, num, den)
        # The helper divides by the total boot count; rescale to each group's own size.
        se = np.sqrt(_rescale(se_i, b_i + b_j, b_i) ** 2 + _rescale(se_j, b_i + b_j, b_j) ** 2)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.abs(r_j - r_i) / se

    observed = np.zeros((1, b_i + b_j))
    observed[0, :b_j] = 1.0
    t_obs = t_stat(observed)[0]
    t_perm = t_stat(mask_j)
    hits = np.sum(t_perm >= t_obs * (1.0 - 1e-9))
    total = comb(b_i + b_j, b_j)
    if exact:
        min_p = (2.0 if b_i == b_j else 1.0) / total
        return float(hits / mask_j.shape[0]), min_p, True
    return float((hits + 1) / (mask_j.shape[0] + 1)), 1.0 / (mask_j.shape[0] + 1), False


def _rescale(se_all: F, n_all: int, n_group: int) -> F:
    """`_weighted_ratio_se` with 0/1 weights computes s^2 / (n_all - 1) / n_all; convert it to
    the group's s^2 / (n_group - 1) / n_group."""
    return se_all * np.sqrt(n_all * (n_all - 1) / (n_group * (n_group - 1)))


def cluster_bootstrap(
    num_i: F,
    den_i: F,
    num_j: F,
    den_j: F,
    alpha: float,
    n_resamples: int,
    rng: np.random.Generator,
) -> tuple[float, float]:
    """Studentized cluster-bootstrap (1 - alpha) interval of R_j - R_i (boots resampled
    within arm, numerator and denominator together)."""
    parts = []
    for num, den in ((num_i, den_i), (num_j, den_j)):
        num, den = np.asarray(num, np.float64), np.asarray(den, np.float64)
        b = num.size
        w = uniform_counts(b, n_resamples, rng)
        r_star, se_star = _weighted_ratio_se(w, num, den)
        r_hat, se_hat = _weighted_ratio_se(np.ones((1, b)), num, den)
        parts.append((r_star, se_star, r_hat[0], se_hat[0]))
    (ri_s, sei_s, ri, sei), (rj_s, sej_s, rj, sej) = parts
    diff, se = rj - ri, float(np.hypot(sei, sej))
    se_s = np.hypot(sei_s, sej_s)
    ok = se_s > 0
    t_star = ((rj_s - ri_s) - diff)[ok] / se_s[ok]
    if t_star.size < 100 or se == 0:
        return float("nan"), float("nan")
    q_lo, q_hi = np.quantile(t_star, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(diff - q_hi * se), float(diff - q_lo * se)


def uniform_counts(
    n: int, size: int, rng: np.random.Generator, dtype: type = np.float64
) -> NDArray[Any]:
    """Multinomial(n, uniform) count vectors, (size, n): n draws with replacement per row.

    Same distribution as rng.multinomial but vectorized: the indices drawn and bincounted one
    block of rows at a time. Drawn in blocks, as int32, the stream is the one a single int64
    draw of every index gives (numpy's bounded draws below 2**32 take 32 bits each, and
    the generator keeps the spare half between calls), in a fraction of the memory (10,000
    x 1,000 prompt weights: 80 MB of indices -> 1 MB a block)."""
    index_type = np.int32 if n < 2**31 else np.int64
    out: NDArray[Any] = np.empty((size, n), dtype=dtype)
    step = max(1, (1 << 18) // max(n, 1))  # 256 K cells: a few MB of temporaries
    for lo in range(0, size, step):
        rows = min(step, size - lo)
        block = rng.integers(0, n, (rows, n), dtype=index_type)
        flat = (block + (np.arange(rows) * n)[:, None]).ravel()
        out[lo : lo + rows] = np.bincount(flat, minlength=rows * n).reshape(rows, n)
    return out


def pigeonhole_weights(
    n_prompts: int, boots: list[int], n_resamples: int, rng: np.random.Generator
) -> tuple[NDArray[np.float32], Iterator[NDArray[np.float32]]]:
    """One shared prompt-weight draw (M, P), then one boot-weight draw per arm (M, B_a),
    drawn as the iterator is consumed (one arm's held at a time, in the same stream), each
    as float32: small whole counts, exact in float32; `pigeonhole_ratios` sums in float64."""
    wp = uniform_counts(n_prompts, n_resamples, rng, np.float32)
    return wp, (uniform_counts(b, n_resamples, rng, np.float32) for b in boots)


def pigeonhole_ratios(
    cells: list[F], den: F, wp: NDArray[np.float32], wb: NDArray[np.float32]
) -> list[F]:
    """Resampled ratios sum_b sum_p u_b w_p N_bp / sum u_b w_p D_bp for each numerator in
    `cells` (each (B, P)) over the shared denominator; one matrix product for all of them."""
    b = den.shape[0]
    # float32 halves the cost of the big product; weights are small integers and per-boot
    # sums stay far inside float32's 24-bit mantissa, so ratios keep ~1e-6 relative accuracy.
    stacked = np.concatenate([*cells, den]).astype(np.float32)  # ((n + 1) B, P)
    prod = (stacked @ wp.T).reshape(len(cells) + 1, b, -1)  # (n+1, B, M)
    sums = np.einsum("kbm,mb->km", prod.astype(np.float64), wb.astype(np.float64), optimize=True)
    return [sums[i] / sums[-1] for i in range(len(cells))]


def pigeonhole_interval(diff: float, star: F, df: float, alpha: float) -> tuple[float, float]:
    """diff +/- t_df * SD of the pigeonhole replicates (a variance estimate; Owen 2007 shows
    it is conservative, which is the safe side for a secondary question)."""
    ok = star[np.isfinite(star)]
    if ok.size < 2:
        return float("nan"), float("nan")
    half = float(t_quantile(1.0 - alpha / 2.0, np.asarray(df)) * ok.std(ddof=1))
    return diff - half, diff + half
