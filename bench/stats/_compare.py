"""Per-arm estimates and arm-vs-baseline comparisons on the primary metrics (no resampling).

Shared by `analyze`, `decide` and the split-arm check so all three give the same verdicts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.stats._core import (
    VERDICTS,
    arm_stats,
    boots_needed,
    compare,
    holm,
    interval,
    verdict_codes,
)
from bench.stats._data import METRICS, ArmData
from bench.stats._variance import comparison_power, pooled_sd

OFFSET = {"acceptance_pos0": 0.0, "mean_accepted_length": 1.0}


@dataclass(frozen=True)
class ArmMetric:
    """One arm's estimate of one metric (ratio part; add OFFSET for the reported value)."""

    ratio: float
    se: float  # NaN when unreplicated
    df: float
    sd: float  # between-boot SD of the linearized boot values
    boots: int
    prior_used: bool

    @property
    def unreplicated(self) -> bool:
        return not math.isfinite(self.se)


def arm_metric(ad: ArmData, metric: str, prior: dict[str, float]) -> ArmMetric | None:
    """Estimate and SE of one arm; B = 1 uses the A/A prior SD when one is supplied."""
    if ad.n_boots == 0:
        return None
    r, se, sd, df = (float(x) for x in arm_stats(*ad.totals(metric)))
    if ad.n_boots == 1 and metric in prior:
        return ArmMetric(r, prior[metric], math.inf, prior[metric], 1, True)
    return ArmMetric(r, se, df, sd, ad.n_boots, False)


def arm_metric_json(
    m: ArmMetric | None, metric: str, alpha: float, positions: int = 1
) -> dict[str, Any]:
    """Per-arm metric object; the interval is clipped to the metric's range (pos0 in [0, 1],
    mean length in [1, 1 + K]): at B = 2 a t interval can otherwise leave it."""
    if m is None:
        return {"estimate": None, "ci_low": None, "ci_high": None, "between_boot_sd": None}
    off = OFFSET[metric]
    top = 1.0 if metric == "acceptance_pos0" else 1.0 + positions
    lo, hi = (
        float(np.clip(float(x) + off, off, top))  # NaN (unreplicated) stays NaN -> null
        for x in interval(np.float64(m.ratio), m.se, m.df, alpha)
    )
    return {
        "estimate": m.ratio + off,
        "ci_low": lo,
        "ci_high": hi,
        "between_boot_sd": m.sd,
        "se": m.se,
        "df": m.df,
        "unreplicated": m.unreplicated,
        "prior_sd_used": m.prior_used,
    }


def comparisons(
    stats: dict[tuple[str, str], ArmMetric | None],
    arms: list[str],
    baseline: str,
    alpha: float,
    margins: dict[str, float],
    power: float = 0.8,
) -> list[dict[str, Any]]:
    """Every non-baseline arm vs baseline on both primary metrics, Holm across the family."""
    out: list[dict[str, Any]] = []
    for arm in arms:
        if arm == baseline:
            continue
        for metric in METRICS:
            out.append(_one(stats[(baseline, metric)], stats[(arm, metric)], alpha, power))
            out[-1].update(arm=arm, baseline=baseline, metric=metric, margin=margins[metric])
    p = np.array([c["p_value"] if c["p_value"] is not None else np.nan for c in out])
    adj = holm(p) if p.size else p
    for c, pa in zip(out, adj, strict=True):
        c["p_adjusted"] = None if np.isnan(pa) else float(pa)
        _verdict(c, alpha)
    return out


def _one(mi: ArmMetric | None, mj: ArmMetric | None, alpha: float, power: float) -> dict[str, Any]:
    c: dict[str, Any] = {
        "difference": None,
        "ci_low": None,
        "ci_high": None,
        "p_value": None,
        "method": "welch",
        "mde": None,
        "boots_needed": None,
        "tost_ci": None,
        "se": None,
        "df": None,
        "unreplicated": False,
        "deterministic": False,
        "no_boots": mi is None or mj is None,
    }
    if mi is None or mj is None:
        return c
    c["difference"] = mj.ratio - mi.ratio
    sd, _ = pooled_sd(
        [None if math.isnan(m.sd) else m.sd for m in (mi, mj)],
        [m.boots if not m.prior_used else 2 for m in (mi, mj)],
    )
    c["_sd"] = sd
    if mi.unreplicated or mj.unreplicated:
        c["unreplicated"] = True
        c["method"] = "unreplicated"
        return c
    if mi.se == 0 and mj.se == 0:
        d = c["difference"]
        c.update(deterministic=True, method="deterministic", ci_low=d, ci_high=d)
        c["tost_ci"] = [d, d]
        c["boots_needed"] = 2
        return c
    r = compare(mi.ratio, mi.se, mi.df, mj.ratio, mj.se, mj.df, alpha)
    c.update(
        ci_low=float(r["lo"]),
        ci_high=float(r["hi"]),
        p_value=float(r["p"]),
        se=float(r["se"]),
        df=float(r["df"]),
        tost_ci=[float(r["lo2"]), float(r["hi2"])],
        method="welch" if not (mi.prior_used or mj.prior_used) else "welch_prior_sd",
    )
    c["mde"] = comparison_power(c["se"], c["df"], alpha, power)
    return c


def _verdict(c: dict[str, Any], alpha: float) -> None:
    d = c["difference"]
    sd = c.pop("_sd", None)
    c["_between_boot_sd"] = sd
    if c["ci_low"] is None or d is None:
        c["verdict"] = "inconclusive"
    else:
        lo, hi = c["ci_low"], c["ci_high"]
        lo2, hi2 = c["tost_ci"]
        if c["deterministic"]:
            claimed = np.bool_(d != 0)
        else:
            claimed = np.bool_(c["p_adjusted"] is not None and c["p_adjusted"] < alpha)
        code = verdict_codes(
            np.float64(d), lo, hi, lo2, hi2, c["margin"], claimed=np.asarray(claimed)
        )
        c["verdict"] = VERDICTS[int(code)]
    if d is not None and sd is not None and not c["deterministic"]:
        c["boots_needed"] = boots_needed(sd, max(abs(d), c["margin"]), alpha)
