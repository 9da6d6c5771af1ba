"""Positions k >= 0 (STATISTICS.md: secondary): per-arm sum A_k / sum D with simultaneous
max-|t| intervals over positions, and arm-vs-baseline differences for k >= 1 with
simultaneous max-|t| intervals (Welch SEs, the smallest Welch df across positions).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from bench.stats._core import linearize, max_t_critical, welch
from bench.stats._data import ArmData, Settings, arm_data


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


def conditional_positions(
    probes: pd.DataFrame, boots: pd.DataFrame, arms: list[str], alpha: float
) -> pd.DataFrame:
    """Conditional acceptance ΣA_k/ΣA_{k-1} per arm and position, simultaneous intervals.

    Same method as the analysis' cumulative `per_position`: ratio of sums over boots,
    linearized boot values, max-|t| critical value across positions (B - 1 df). Position 0
    is conditional on nothing (= cumulative). Arms with < 2 boots get no interval.
    """
    cols = ["arm", "position", "estimate", "ci_low", "ci_high"]
    if probes.empty:
        return pd.DataFrame(columns=cols)
    data = arm_data(probes, boots, arms, None)
    rows = []
    for arm in arms:
        ad = data[arm]
        if ad.n_boots == 0:
            continue
        acc = ad.per_pos.sum(axis=1)  # (B, K) cumulative accepted per position
        den = np.concatenate([ad.drafts.sum(axis=1)[:, None], acc[:, :-1]], axis=1)
        keep = den.sum(axis=0) > 0
        est, z = linearize(acc[:, keep].T, den[:, keep].T)  # (K',), (K', B)
        b = ad.n_boots
        if b >= 2:
            crit = max_t_critical(np.atleast_2d(np.cov(z, ddof=1)) / b, b - 1, alpha)
            half = crit * z.std(axis=1, ddof=1) / np.sqrt(b)
        else:
            half = np.full(est.shape, np.nan)
        for k, e, h in zip(np.flatnonzero(keep), est, half, strict=True):
            rows.append(
                {
                    "arm": arm,
                    "position": int(k),
                    "estimate": float(e),
                    "ci_low": float(e - h),
                    "ci_high": float(e + h),
                }
            )
    return pd.DataFrame(rows, columns=cols)
