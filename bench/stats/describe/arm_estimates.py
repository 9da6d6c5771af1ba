"""One arm's part of the analysis: its metric estimates with intervals (cut at each metric's
range), acceptance per draft position (cumulative, conditional and among drafted, with
simultaneous bands), each ok boot's own values, and the arm's `ArmResult`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.records import ACCEPTANCE_METRICS, ALL_METRICS, METRIC, too_few_boots
from bench.stats.describe.boot_modes import boot_modes
from bench.stats.describe.drafting import draft_lengths, drafted_shares, mean_draft_length
from bench.stats.describe.peer_lengths import peer_lengths
from bench.stats.describe.positions import conditional_band, cumulative_band, drafted_band
from bench.stats.describe.speed import accepted_length, null_estimate, speed_estimate
from bench.stats.inputs import ArmData, Prior
from bench.stats.methods import Est, effective_boots, estimate, interval
from bench.stats.schema import (
    ArmResult,
    BootMetrics,
    MetricEstimate,
    PositionEstimate,
)


def metric_estimate(e: Est, metric: str, alpha: float, positions: int) -> MetricEstimate:
    """The reported value is the ratio plus the metric's offset; the interval is clipped to
    the metric's range: at B = 2 a t interval can leave it."""
    off = METRIC[metric].offset
    low, top = METRIC[metric].value_range(positions)
    lo, hi = (
        float(np.clip(float(x) + off, low, top)) for x in interval(e.ratio, e.se, e.df, alpha)
    )
    return MetricEstimate(
        estimate=float(e.ratio) + off,
        ci_low=lo,
        ci_high=hi,
        between_boot_sd=e.sd,
        se=e.se,
        df=e.df,
        unreplicated=e.boots == 1 and not e.prior_used,
        prior_sd_used=e.prior_used,
        too_few_boots=too_few_boots(e.boots, prior=e.prior_used),
    )


def _positions(ad: ArmData, alpha: float) -> list[PositionEstimate]:
    if ad.n_boots == 0:
        return []
    cum, cond = cumulative_band(ad, alpha), conditional_band(ad, alpha)
    among = drafted_band(ad, alpha)
    clip = lambda x: float(np.clip(x, 0.0, 1.0))  # noqa: E731 - shares of drafts
    share = drafted_shares(ad)
    return [
        PositionEstimate(
            position=k,
            estimate=cum.estimate[k],
            ci_low=clip(cum.ci_low[k]),
            ci_high=clip(cum.ci_high[k]),
            conditional=cond.estimate[k],
            conditional_ci_low=clip(cond.ci_low[k]),
            conditional_ci_high=clip(cond.ci_high[k]),
            method=cum.method,
            drafted_share=None if share is None else share[k],
            among_drafted=None if among is None else among.estimate[k],
            among_drafted_ci_low=None if among is None else clip(among.ci_low[k]),
            among_drafted_ci_high=None if among is None else clip(among.ci_high[k]),
        )
        for k in range(cum.estimate.size)
    ]


def boot_metrics(ad: ArmData) -> list[BootMetrics]:
    """Each ok boot's own values (`arms[].per_boot`), in boot order."""
    nan = np.full(ad.n_boots, np.nan)
    values = {m: ad.speed() for m in ALL_METRICS if not METRIC[m].acceptance}
    for m in ACCEPTANCE_METRICS:
        if not ad.speculative:
            values[m] = nan
            continue
        num, den = ad.totals(m)
        with np.errstate(divide="ignore", invalid="ignore"):
            values[m] = num / den + METRIC[m].offset
    comp = ad.completion.sum(axis=1) if ad.completion is not None else nan
    lat = ad.latency.sum(axis=1) if ad.latency is not None else nan
    d = ad.drafts.sum(axis=1)
    return [
        BootMetrics(
            boot_id=bid,
            boot=ad.boot_index[i] if ad.boot_index else i,
            order=ad.order[i] if ad.order else -1,
            drafts=float(d[i]),
            completion_tokens=comp[i],
            latency_s=lat[i],
            **{m: v[i] for m, v in values.items()},
        )
        for i, bid in enumerate(ad.boot_ids)
    ]


def arm_metrics(ad: ArmData, alpha: float, prior: Prior) -> dict[str, MetricEstimate]:
    """Every metric of one arm; the acceptance ones are null for a no-speculation arm."""
    metrics = {}
    for m in ALL_METRICS:  # registry order: the order of `arms[].metrics` in the JSON
        if not ad.has(m):
            metrics[m] = null_estimate()
        elif not METRIC[m].acceptance:
            metrics[m] = speed_estimate(ad, alpha)
        else:
            e = estimate(*ad.totals(m), prior.sd.get(m), prior.df.get(m))
            metrics[m] = metric_estimate(e, m, alpha, ad.positions)
    return metrics


def arm_result(ad: ArmData, alpha: float, prior: Prior, failed: int) -> ArmResult:
    shares, source = accepted_length(ad, alpha)
    spec = ad.speculative and ad.n_boots > 0
    return ArmResult(
        arm=ad.name,
        boots=ad.n_boots,
        failed_boots=failed,
        metrics=arm_metrics(ad, alpha, prior),
        per_position=_positions(ad, alpha) if ad.speculative else [],
        effective_boots=effective_boots(ad.drafts.sum(axis=1)) if spec else None,
        positions=ad.positions,
        per_boot=boot_metrics(ad),
        speculative=ad.speculative,
        concurrency=ad.concurrency,
        accepted_length=shares,
        accepted_length_source=source,
        peer_lengths=peer_lengths(ad),
        mean_draft_length=mean_draft_length(ad) if spec else None,
        draft_lengths=draft_lengths(ad) if spec else [],
        modes=boot_modes(ad, alpha),
    )


def pooled_ratios(ok_boots: pd.DataFrame, arms: list[str]) -> pd.DataFrame:
    """Per arm, from the ok boots' /metrics deltas: sum accepted@pos0 / sum drafts and
    1 + sum accepted / sum drafts. No between-boot uncertainty: NOT a verdict; shown only
    when the analysis refuses the data."""
    rows = []
    for arm in arms:
        b = ok_boots[ok_boots["arm"] == arm]
        drafts = int(b["num_drafts"].sum()) if len(b) else 0
        acc = int(b["num_accepted_tokens"].sum()) if len(b) else 0
        pos0 = sum(int(x[0]) for x in b["accepted_per_pos"] if x is not None and len(x))
        rows.append(
            {
                "arm": arm,
                "ok boots": len(b),
                "drafts": drafts,
                "acceptance_pos0 (pooled)": pos0 / drafts if drafts else float("nan"),
                "mean_accepted_length (pooled)": 1 + acc / drafts if drafts else float("nan"),
            }
        )
    return pd.DataFrame(rows)
