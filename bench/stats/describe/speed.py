"""Speed (output tokens/s) and the accepted-length distribution of one arm.

Speed is a log-scale metric: each boot's tokens/s is a ratio of sums within the boot (sum
completion tokens / sum latency over the compared probes); an arm's estimate is the geometric
mean of its boots' values (every boot weighs the same), compared across arms as a ratio with
a Welch interval on the log boot values (`bench.stats.compare`)."""

from __future__ import annotations

import numpy as np

from bench.records import too_few_boots
from bench.stats.inputs import ArmData
from bench.stats.methods import Est, F, estimate, interval, log_estimate
from bench.stats.schema import AcceptedShare, MetricEstimate


def null_estimate() -> MetricEstimate:
    """An acceptance metric of a no-speculation arm: absent, every number null."""
    return MetricEstimate(
        estimate=None,
        ci_low=None,
        ci_high=None,
        between_boot_sd=None,
        se=None,
        df=None,
        unreplicated=False,
        prior_sd_used=False,
    )


def speed_est(ad: ArmData) -> Est:
    return log_estimate(ad.speed())


def speed_estimate(ad: ArmData, alpha: float) -> MetricEstimate:
    """Geometric mean of the boots' tokens/s with its (1 - alpha) interval (t on the log
    values); between_boot_sd is the plain SD of the boots' tokens/s."""
    v = ad.speed()
    e = log_estimate(v)
    est = float(np.exp(e.ratio))
    lo, hi = (float(np.exp(x)) for x in interval(e.ratio, e.se, e.df, alpha))
    ok = v[np.isfinite(v)]
    return MetricEstimate(
        estimate=est,
        ci_low=lo,
        ci_high=hi,
        between_boot_sd=float(ok.std(ddof=1)) if ok.size >= 2 else None,
        se=est * float(e.se),  # delta method: metric units
        df=e.df,
        unreplicated=e.boots == 1,
        prior_sd_used=False,
        too_few_boots=too_few_boots(e.boots),
        relative_sd=e.sd,
    )


def step_counts(ad: ArmData) -> tuple[F, str] | None:
    """Per boot, verify steps that accepted exactly 0..K draft tokens (B, K + 1), and where
    they came from: the per-request histograms when every probe has one, else the cumulative
    per-position counts (acceptance is a prefix: exactly j = A_(j-1) - A_j, A_(-1) = drafts)."""
    if not ad.speculative or ad.n_boots == 0 or ad.positions == 0:
        return None
    if ad.hist is not None:
        return ad.hist.sum(axis=1, dtype=np.float64), "histogram"
    cum = ad.per_pos.sum(axis=1)  # (B, K)
    prev = np.concatenate([ad.drafts.sum(axis=1)[:, None], cum], axis=1)
    nxt = np.concatenate([cum, np.zeros((cum.shape[0], 1))], axis=1)
    return prev - nxt, "per_position"


def accepted_length(ad: ArmData, alpha: float) -> tuple[list[AcceptedShare], str | None]:
    """Share of verify steps accepting 0..K tokens, each a ratio of sums over boots with its
    jackknife t interval (per bin; the bins are not adjusted jointly)."""
    found = step_counts(ad)
    if found is None:
        return [], None
    counts, source = found
    steps = counts.sum(axis=1)
    out = []
    for j in range(counts.shape[1]):
        e = estimate(counts[:, j], steps)
        lo, hi = interval(e.ratio, e.se, e.df, alpha)
        out.append(
            AcceptedShare(
                accepted=j,
                share=e.ratio,
                ci_low=float(np.clip(lo, 0.0, 1.0)) if np.isfinite(lo) else None,
                ci_high=float(np.clip(hi, 0.0, 1.0)) if np.isfinite(hi) else None,
            )
        )
    return out, source
