"""Positions k >= 0 (STATISTICS.md: secondary): per-arm sum A_k / sum D with simultaneous
max-|t| intervals over positions, and arm-vs-baseline differences for k >= 1 with
simultaneous max-|t| intervals (Welch SEs, the smallest Welch df across positions).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.stats_core import linearize, max_t_critical, welch
from bench.stats_data import ArmData, Settings


def position_z(ad: ArmData) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Per-position estimates (K,) and linearized boot values (B, K)."""
    k = ad.per_pos.shape[2]
    num = ad.per_pos.sum(axis=1)  # (B, K)
    den = np.repeat(ad.drafts.sum(axis=1)[:, None], k, axis=1)
    est, z = linearize(num.T, den.T)
    return est, z.T


def per_position(ad: ArmData, alpha: float) -> list[dict[str, Any]]:
    if ad.n_boots == 0:
        return []
    est, z = position_z(ad)
    tot = ad.per_pos.sum(axis=(0, 1))
    out = []
    b = ad.n_boots
    crit = max_t_critical(np.cov(z.T, ddof=1) / b, b - 1, alpha) if b >= 2 else np.nan
    se = z.std(axis=0, ddof=1) / np.sqrt(b) if b >= 2 else np.full(est.shape, np.nan)
    for k in range(est.size):
        cond = tot[k] / tot[k - 1] if k and tot[k - 1] > 0 else (est[0] if k == 0 else None)
        half = crit * se[k] if np.isfinite(crit) else (0.0 if se[k] == 0 else np.nan)
        out.append(
            {
                "position": k,
                "estimate": est[k],
                # a share of drafts: clipped to [0, 1] (np.clip keeps NaN for B = 1)
                "ci_low": float(np.clip(est[k] - half, 0.0, 1.0)),
                "ci_high": float(np.clip(est[k] + half, 0.0, 1.0)),
                "conditional": cond,
                "simultaneous": True,
            }
        )
    return out


def per_position_comparisons(
    data: dict[str, ArmData], arms: list[str], s: Settings
) -> list[dict[str, Any]]:
    base = data[s.baseline]
    out: list[dict[str, Any]] = []
    for a in arms:
        ad = data[a]
        if a == s.baseline or ad.n_boots < 2 or base.n_boots < 2:
            continue
        (ei, zi), (ej, zj) = position_z(base), position_z(ad)
        cov = np.cov(zi.T, ddof=1) / base.n_boots + np.cov(zj.T, ddof=1) / ad.n_boots
        cov = np.atleast_2d(cov)
        se_i, se_j = zi.std(axis=0, ddof=1), zj.std(axis=0, ddof=1)
        se_i, se_j = se_i / np.sqrt(base.n_boots), se_j / np.sqrt(ad.n_boots)
        se, df = welch(se_i, np.full(se_i.shape, base.n_boots - 1.0), se_j, ad.n_boots - 1.0)
        sub = slice(1, None)  # positions >= 1 are the secondary family
        if ei.size < 2:
            continue
        crit = max_t_critical(cov[sub, sub], float(np.min(df[sub])), s.alpha)
        for k in range(1, ei.size):
            d = ej[k] - ei[k]
            half = crit * se[k] if np.isfinite(crit) else (0.0 if se[k] == 0 else np.nan)
            out.append(
                {
                    "arm": a,
                    "baseline": s.baseline,
                    "position": k,
                    "difference": d,
                    "ci_low": d - half,
                    "ci_high": d + half,
                    "method": "welch_max_t",
                }
            )
    return out
