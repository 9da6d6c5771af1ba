"""Speed across arms: each speculative arm's speedup over a no-speculation arm at the same
concurrency (a ratio, Welch on log boot values), and what a reader of speed numbers must
know (no-speculation arms, per-request speed at concurrency > 1, launch-order effects)."""

from __future__ import annotations

import numpy as np

from bench.records import SPEED_METRIC
from bench.stats.compare.duets import slot_note
from bench.stats.describe import speed_est
from bench.stats.inputs import ArmData, VerdictSettings, margin_for
from bench.stats.methods import family
from bench.stats.schema import Speedup


def speedups(
    data: dict[str, ArmData], alpha: float, margin: float
) -> tuple[list[Speedup], list[str]]:
    """Each speculative arm over each no-speculation arm that ran at its concurrency, and
    the notes on arms without one."""
    plain = [a for a, ad in data.items() if not ad.speculative and ad.n_boots]
    if not plain:
        return [], []
    out, notes = [], []
    for a, ad in data.items():
        if not ad.speculative or not ad.n_boots or not ad.timed:
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
    return out, notes


def speed_notes(data: dict[str, ArmData], s: VerdictSettings) -> list[str]:
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
    slots = slot_note(data)
    return notes + ([slots] if slots else [])


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
