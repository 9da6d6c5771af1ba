"""Which comparisons an analysis makes, and in which Holm family.

Every non-baseline arm is compared with the baseline on every metric both arms have (a
no-speculation arm has speed only). The metrics the experiment declares primary
(`primary_metrics`, default the two acceptance metrics) form one Holm family — the verdicts
`--fail-on`, sequential looks and the headline rest on; each other metric is secondary and
forms its own Holm family across arms (speed by default). All go through
`bench.stats.methods.family`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from bench.records import ACCEPTANCE_METRICS, ALL_METRICS, SPEED_METRIC
from bench.stats.describe import speed_est
from bench.stats.inputs import ArmData, Prior, VerdictSettings, margin_for
from bench.stats.methods import Est, Family, estimate, family


def estimates(data: Mapping[str, ArmData], prior: Prior) -> dict[str, dict[str, Est]]:
    """arm -> metric -> estimate on the given boots; acceptance only for speculative arms."""
    out: dict[str, dict[str, Est]] = {}
    for a, ad in data.items():
        e = {}
        if ad.speculative:
            for m in ACCEPTANCE_METRICS:
                e[m] = estimate(*ad.totals(m), prior.sd.get(m), prior.df.get(m))
        if ad.timed:
            e[SPEED_METRIC] = speed_est(ad)  # the one metric not counted from drafts
        out[a] = e
    return out


def arm_metrics(data: Mapping[str, ArmData]) -> dict[str, tuple[str, ...]]:
    """The metrics each arm has (as `estimates` builds them): acceptance only when it
    speculates, speed always."""
    return {a: tuple(m for m in ALL_METRICS if ad.has(m)) for a, ad in data.items()}


def comparison_keys(
    has: Mapping[str, Collection[str]], baseline: str, others: Sequence[str], metrics: Sequence[str]
) -> list[tuple[str, str]]:
    """(arm, metric) of every comparison with the baseline on `metrics` both arms have,
    arm-major: the one rule for the families `analyze` tests and the family `plan` sizes."""
    return [(a, m) for a in others for m in metrics if m in has[baseline] and m in has[a]]


@dataclass(frozen=True)
class Row:
    """One comparison: its family's arrays and its index there."""

    arm: str
    metric: str
    fam: Family
    i: int
    level: float  # the family's alpha
    primary: bool


def _family_rows(
    keys: list[tuple[str, str]],
    est: Mapping[str, Mapping[str, Est]],
    s: VerdictSettings,
    level: float,
    primary: bool,
    adjust: Mapping[tuple[str, str], tuple[Est, Est]],
) -> list[Row]:
    if not keys:
        return []
    pairs = [
        (*adjust.get((a, m), (est[s.baseline][m], est[a][m])), margin_for(m, s.margins[m]))
        for a, m in keys
    ]
    fam = family(pairs, level)
    return [Row(a, m, fam, i, level, primary) for i, (a, m) in enumerate(keys)]


def family_rows(
    est: Mapping[str, Mapping[str, Est]],
    others: Sequence[str],
    s: VerdictSettings,
    level: float,
    secondary_level: float,
    adjust: Mapping[tuple[str, str], tuple[Est, Est]] | None = None,
) -> list[Row]:
    """The primary family (arm-major, at `level`), then one family per secondary metric.
    `adjust`: (arm, metric) -> the (baseline, arm) estimates to compare instead (hosts)."""
    adj = adjust or {}

    def keys(metrics: Sequence[str]) -> list[tuple[str, str]]:
        return comparison_keys(est, s.baseline, others, metrics)

    rows = _family_rows(keys(s.primary), est, s, level, True, adj)
    for m in ALL_METRICS:
        if m not in s.primary:
            rows += _family_rows(keys([m]), est, s, secondary_level, False, adj)
    return rows
