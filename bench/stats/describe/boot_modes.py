"""Arms whose boots are not one population: a boot far beyond the spread of the arm's other
boots (a drafter left uninitialized on one start, speculation silently off on another).

For each acceptance metric of an arm with B ≥ 4 ok boots, each boot is compared with the
others: t_b = (v_b − mean of the others) / (SD of the others · √(1 + 1/(B − 1))), Student t
with B − 2 df under one normal population (the externally studentized residual). The SD of
the others holds the between-boot spread and each boot's within-boot sampling error alike
(a boot's value is its ratio of sums over its probes), so a boot's own probe noise is
allowed for. A boot is in a second mode when its two-sided p is below α / B (Bonferroni over
the arm's boots): a one-population arm is flagged with probability ≤ α, calibrated by
simulation through this code (tests/unit/test_boot_modes.py). The verdicts still use every
boot: a flagged arm is said, never silently trimmed (`analyze --exclude-boot` reruns
without named boots, and says so).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as st

from bench.records import ACCEPTANCE_METRICS, METRIC, short_name
from bench.stats.describe.drafting_share import drafting_shares
from bench.stats.inputs import ArmData, boot_values
from bench.stats.schema import ArmResult, BootModes

MIN_BOOTS = 4  # the others' SD needs 2 df
# Not a metric of the registry: the share of a boot's requests that drafted at all. A boot
# whose drafter proposes on far fewer requests than the arm's other boots (a fallback path,
# speculation off for some requests) lies apart on it even where its acceptance does not.
REQUESTS_DRAFTED = "requests_drafted"


def mode_split(values: np.ndarray, alpha: float) -> tuple[np.ndarray, float]:
    """Which boots lie outside the others' population (a boolean per boot), and the
    smallest Bonferroni-adjusted p."""
    v = np.asarray(values, dtype=np.float64)
    b = v.size
    if b < MIN_BOOTS:
        return np.zeros(b, dtype=bool), 1.0
    others = ~np.eye(b, dtype=bool)
    rest = np.where(others, v[None, :], np.nan)
    mean = np.nanmean(rest, axis=1)
    sd = np.nanstd(rest, axis=1, ddof=1)
    gap = np.abs(v - mean)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(sd > 0, gap / (sd * math.sqrt(1 + 1 / (b - 1))), np.where(gap > 0, np.inf, 0))
    p = np.minimum(1.0, 2 * st.t.sf(t, b - 2) * b)
    return p < alpha, float(p.min())


def boot_modes(ad: ArmData, alpha: float) -> list[BootModes]:
    """One entry per acceptance metric the arm's boots can be tested on (B ≥ 4)."""
    if not ad.speculative or ad.n_boots < MIN_BOOTS:
        return []
    out = []
    for metric in (*ACCEPTANCE_METRICS, REQUESTS_DRAFTED):
        v = _values(ad, metric)
        keep = np.isfinite(v)
        if keep.sum() < MIN_BOOTS:
            continue
        ids = [b for b, k in zip(ad.boot_ids, keep, strict=True) if k]
        flagged, p = mode_split(v[keep], alpha)
        main = v[keep][~flagged]
        out.append(
            BootModes(
                metric=metric, modes=2 if flagged.any() else 1, p_adjusted=p,
                main_boots=int(main.size), main_mean=float(main.mean()),
                main_sd=float(main.std(ddof=1)) if main.size > 1 else None,
                other_boots=[i for i, f in zip(ids, flagged, strict=True) if f],
                other_values=[float(x) for x in v[keep][flagged]],
            )
        )  # fmt: skip
    return out


def _values(ad: ArmData, metric: str) -> np.ndarray:
    if metric == REQUESTS_DRAFTED:
        return drafting_shares(ad)
    return np.asarray(boot_values(ad, metric), dtype=np.float64) + METRIC[metric].offset


def two_modes(arm: ArmResult) -> list[BootModes]:
    """The arm's metrics whose boots are not one population."""
    return [m for m in arm.modes if m.modes > 1]


def _said(metric: str) -> str:
    return (
        "the share of requests that drafted" if metric == REQUESTS_DRAFTED else short_name(metric)
    )


def modes_note(arm: str, m: BootModes, boots: int) -> str:
    """The sentence every place that shows the arm's verdicts says about it."""
    digits = METRIC[m.metric].digits if m.metric in METRIC else 3
    others = ", ".join(
        f"{b} at {x:.{digits}f}" for b, x in zip(m.other_boots, m.other_values, strict=True)
    )
    sd = f" ± {m.main_sd:.{digits}f}" if m.main_sd is not None else ""
    return (
        f"arm {arm}: 2 modes across boots in {_said(m.metric)} (p = {m.p_adjusted:.2g}, "
        f"Bonferroni over boots) — {m.main_boots} boots at {m.main_mean:.{digits}f}{sd}; "
        f"{len(m.other_boots)} apart: {others}. The verdicts use all {boots} boots; a start-up "
        "that differs between boots is itself a finding: read those boots' server logs "
        "(`analyze --exclude-boot ID` shows the verdicts without them)"
    )
