"""Speed (output tokens/s) and the accepted-length distribution, per arm.

Speed is a log-scale metric: each boot's tokens/s is a ratio of sums within the boot (sum
completion tokens / sum latency over the compared probes); an arm's estimate is the geometric
mean of its boots' values (every boot weighs the same), and arms are compared as a ratio with
a Welch interval on the log boot values (`_family.log_estimate`). Its margin is relative: d
means the ratio within [1 - d, 1 + d], i.e. log(1 + d) above and -log(1 - d) below on the
log scale. Speedups: each speculative arm over a no-speculation arm at the same concurrency.
"""

from __future__ import annotations

import math

import numpy as np

from bench.records import SPEED_METRIC
from bench.stats._core import F, interval
from bench.stats._data import ArmData
from bench.stats._family import Est, Margin, estimate, family, log_estimate
from bench.stats._models import AcceptedShare, MetricEstimate, Speedup
from bench.stats._settings import Settings


def margin_for(metric: str, margin: float) -> Margin:
    """The margin on the scale the comparison is computed on."""
    if metric == SPEED_METRIC:
        return (-math.log1p(-margin), math.log1p(margin))
    return margin


def effect_scale(metric: str, x: float) -> float:
    """A reported effect (relative for speed) on the computation's scale (log for speed)."""
    return math.log1p(x) if metric == SPEED_METRIC else x


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
        relative_sd=e.sd,
    )


def step_counts(ad: ArmData) -> tuple[F, str] | None:
    """Per boot, verify steps that accepted exactly 0..K draft tokens (B, K + 1), and where
    they came from: the per-request histograms when every probe has one, else the cumulative
    per-position counts (acceptance is a prefix: exactly j = A_(j-1) - A_j, A_(-1) = drafts)."""
    if not ad.speculative or ad.n_boots == 0 or ad.positions == 0:
        return None
    if ad.hist is not None:
        return ad.hist.sum(axis=1), "histogram"
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


def speedups(
    data: dict[str, ArmData], alpha: float, notes: list[str], margin: float
) -> list[Speedup]:
    """Each speculative arm over each no-speculation arm that ran at its concurrency."""
    plain = [a for a, ad in data.items() if not ad.speculative and ad.n_boots]
    if not plain:
        return []
    out = []
    for a, ad in data.items():
        if not ad.speculative or not ad.n_boots:
            continue
        refs = [n for n in plain if data[n].concurrency == ad.concurrency]
        if not refs:
            notes.append(
                f"arm {a}: no no-speculation arm ran at concurrency {ad.concurrency}, so no "
                "speedup is stated for it"
            )
        for n in refs:
            f = family(
                [(speed_est(data[n]), speed_est(ad), margin_for(SPEED_METRIC, margin))], alpha
            )
            out.append(
                Speedup(
                    arm=a,
                    reference=n,
                    concurrency=ad.concurrency,
                    speedup=float(np.exp(f.diff[0])),
                    ci_low=float(np.exp(f.lo[0])),
                    ci_high=float(np.exp(f.hi[0])),
                    df=f.df[0],
                )
            )
    return out


def speed_notes(data: dict[str, ArmData], s: Settings) -> list[str]:
    """What a reader of the speed numbers and of a no-speculation arm needs to know."""
    notes = []
    for a, ad in data.items():
        if not ad.speculative and ad.n_boots:
            notes.append(
                f"arm {a} runs without speculative decoding: its acceptance metrics are null "
                "and it has no acceptance comparisons; its speed is compared as usual"
            )
        if ad.n_boots and not np.all(np.isfinite(ad.speed()) & (ad.speed() > 0)):
            notes.append(f"arm {a}: a boot has no completion tokens or latency: no speed")
        if ad.concurrency > 1:
            notes.append(
                f"arm {a} ran {ad.concurrency} probes at once: its tokens/s is per request "
                "(what one client sees), not the server's total throughput"
            )
    if s.baseline in data and not data[s.baseline].speculative and len(data) > 1:
        notes.append(
            f"the baseline {s.baseline} runs without speculative decoding, so no acceptance "
            "is compared; pass a speculative baseline (--baseline) to compare acceptance"
        )
    return notes


def order_notes(data: dict[str, ArmData], baseline: str, claimed: list[str]) -> list[str]:
    """Speed is sensitive to what ran just before (a server still shutting down, a warm page
    cache): when a speed difference is claimed for an arm that ran on the same side of the
    baseline in every block, say so."""
    base = data.get(baseline)
    if base is None or not base.order:
        return []
    where = dict(zip(base.boot_index, base.order, strict=False))
    out = []
    for a in claimed:
        ad = data[a]
        pairs = [(o, where[b]) for b, o in zip(ad.boot_index, ad.order, strict=False) if b in where]
        if len(pairs) < 2:
            continue
        after = sum(o > ob for o, ob in pairs)
        if after in (0, len(pairs)):
            side = "after" if after else "before"
            out.append(
                f"{a} vs {baseline} tokens/s: {a} ran {side} {baseline} in every block "
                f"({len(pairs)} of {len(pairs)}), so an effect of the position in the block "
                "(e.g. the previous server still shutting down) would look like this "
                "difference; more blocks shuffle it out"
            )
    return out
