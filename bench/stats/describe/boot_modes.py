"""Arms whose boots are not one population: a boot far beyond the spread of the arm's other
boots (a drafter left uninitialized on one start, speculation silently off on another).

For each acceptance metric of an arm with B ≥ 4 ok boots, each boot is compared with the
others: t_b = (v_b − mean of the others) / (s · √(1 + 1/(B − 1))), Student t with B − 2 df
under one normal population (the externally studentized residual). s is the SD of the
others, which holds the between-boot spread and each boot's within-boot sampling error
alike, but never less than the sampling error of one boot's value from its own probes
(`within_boot_se`: the probes as replicates of the ratio of sums, binomial for the share of
requests that drafted): where the other boots agree exactly (deterministic boots, every
request drafted) a difference smaller than a boot's own probe noise — one token, one
request — is no mode. A boot is in a second mode when its two-sided p is below
α / (B · M), Bonferroni over the arm's boots and the M metrics tested: a one-population arm
is flagged with probability ≤ α, calibrated by simulation through this code
(tests/unit/test_boot_modes.py). The verdicts still use every
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


def mode_split(values: np.ndarray, alpha: float, floor: float = 0.0) -> tuple[np.ndarray, float]:
    """Which boots lie outside the others' population (a boolean per boot), and the
    smallest Bonferroni-adjusted p (over the boots); `floor`: the least spread a boot is
    compared against (a boot's own sampling error)."""
    v = np.asarray(values, dtype=np.float64)
    b = v.size
    if b < MIN_BOOTS:
        return np.zeros(b, dtype=bool), 1.0
    others = ~np.eye(b, dtype=bool)
    rest = np.where(others, v[None, :], np.nan)
    mean = np.nanmean(rest, axis=1)
    sd = np.maximum(np.nanstd(rest, axis=1, ddof=1), floor)
    gap = np.abs(v - mean)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(sd > 0, gap / (sd * math.sqrt(1 + 1 / (b - 1))), np.where(gap > 0, np.inf, 0))
    p = np.minimum(1.0, 2 * st.t.sf(t, b - 2) * b)
    return p < alpha, float(p.min())


def within_boot_se(ad: ArmData, metric: str) -> float:
    """The sampling error of one boot's value from its own probes, pooled over the boots:
    the probes as replicates of the boot's ratio of sums (delta method), or binomial for the
    share of requests that drafted (Jeffreys' half request, so a boot where every request
    drafted still has a floor)."""
    if metric == REQUESTS_DRAFTED:
        n = ad.drafts.shape[1]
        share = (np.asarray((ad.drafts > 0).sum(axis=1), dtype=np.float64) + 0.5) / (n + 1)
        return float(np.sqrt(np.mean(share * (1 - share)) / max(n, 1)))
    num, den = ad.cells(metric)
    p = num.shape[1]
    if p < 2:
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = num.sum(axis=1) / den.sum(axis=1)
        resid = num - ratio[:, None] * den
        var = (resid**2).sum(axis=1) * p / (p - 1) / den.sum(axis=1) ** 2
    var = var[np.isfinite(var)]
    return float(np.sqrt(var.mean())) if var.size else 0.0


def boot_modes(ad: ArmData, alpha: float) -> list[BootModes]:
    """One entry per acceptance metric the arm's boots can be tested on (B ≥ 4)."""
    if not ad.speculative or ad.n_boots < MIN_BOOTS:
        return []
    out = []
    tested = [m for m in (*ACCEPTANCE_METRICS, REQUESTS_DRAFTED)
              if np.isfinite(_values(ad, m)).sum() >= MIN_BOOTS]  # fmt: skip
    for metric in tested:
        v = _values(ad, metric)
        keep = np.isfinite(v)
        ids = [b for b, k in zip(ad.boot_ids, keep, strict=True) if k]
        # Bonferroni over the metrics too: the arm is flagged at most alpha of the time
        level = alpha / len(tested)
        flagged, p = mode_split(v[keep], level, floor=within_boot_se(ad.subset(
            [i for i, k in enumerate(keep) if k]), metric))  # fmt: skip
        p = min(1.0, p * len(tested))
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
        f"arm {arm}: 2 modes across boots in {_said(m.metric)} "
        f"(p = {m.p_adjusted:.2g}, Bonferroni over boots and metrics) — "
        f"{m.main_boots} boots at {m.main_mean:.{digits}f}{sd}; "
        f"{len(m.other_boots)} apart: {others}. The verdicts use all {boots} boots; a start-up "
        "that differs between boots is itself a finding: read those boots' server logs "
        "(`analyze --exclude-boot ID` shows the verdicts without them)"
    )
