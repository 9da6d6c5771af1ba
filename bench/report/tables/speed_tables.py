"""Tables of speed, speedup, accepted-length distribution, per-category results and the
per-arm summary `run-ab` prints, from the typed analysis only (no statistics here)."""

from __future__ import annotations

import pandas as pd

from bench.records import ACCEPTANCE_METRICS, ALL_METRICS, METRIC, SPEED_METRIC
from bench.report.tables.verdict_tables import (
    difference,
    few_boots_mark,
    pct,
    verdict_interval,
)
from bench.stats import CLAIMED, Analysis, Breakdown, Comparison, MetricEstimate

NO_BOOTS = "no ok boots"


def estimate_text(m: MetricEstimate | None, digits: int = 4) -> str:
    """'est [lo, hi]', '—' when absent."""
    if m is None or m.estimate is None:
        return "—"
    if m.unreplicated:
        return f"{m.estimate:.{digits}f} (unreplicated)"
    if m.ci_low is None or m.ci_high is None:
        return f"{m.estimate:.{digits}f} [n/a]"
    ci = f"[{m.ci_low:.{digits}f}, {m.ci_high:.{digits}f}]"
    return f"{m.estimate:.{digits}f} {ci}{few_boots_mark(m.too_few_boots)}"


def _comparison(analysis: Analysis, arm: str, metric: str) -> Comparison | None:
    return next((c for c in analysis.comparisons if c.arm == arm and c.metric == metric), None)


def _ratio(c: Comparison | None, baseline: bool) -> str:
    if c is None:
        return "baseline" if baseline else "—"
    if c.ratio is None:
        return "—"
    if c.unreplicated:
        return f"{c.ratio:.3f} (unreplicated)"
    lo, hi = c.ratio_ci_low, c.ratio_ci_high
    ci = f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else " [n/a]"
    return f"{c.ratio:.3f}{ci}{few_boots_mark(c.too_few_boots)}"


def speed_table(analysis: Analysis) -> pd.DataFrame:
    """Per arm: tokens/s with its interval, the between-boot SD (tokens/s and relative), the
    ratio to the baseline with its raw interval, the interval the verdict rests on and the
    verdict."""
    level = f"{1 - analysis.alpha:.0%}"
    rows = []
    for a in analysis.arms:
        m = a.metrics.get(SPEED_METRIC)
        c = _comparison(analysis, a.arm, SPEED_METRIC)
        rows.append(
            {
                "arm": a.arm,
                "speculative": "yes" if a.speculative else "no",
                "boots": a.boots,
                f"tokens/s [{level} CI]": estimate_text(m, 1),
                "between-boot SD": "—"
                if m is None or m.between_boot_sd is None
                else f"{m.between_boot_sd:.2f} ({pct(m.relative_sd, False)})",
                f"ratio to {analysis.baseline} [raw {level} CI]": _ratio(
                    c, a.arm == analysis.baseline
                ),
                "verdict interval": verdict_interval(c) if c is not None else "—",
                "verdict": c.verdict if c is not None else "—",
            }
        )
    return pd.DataFrame(rows)


def _times(x: float | None, lo: float | None, hi: float | None) -> str:
    if x is None:
        return "—"
    ci = f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else " [n/a]"
    return f"{x:.3f}x{ci}"


def speedup_table(analysis: Analysis) -> pd.DataFrame:
    """Each speculative arm's speedup over a no-speculation arm at its concurrency."""
    level = f"{1 - analysis.alpha:.0%}"
    rows = [
        {
            "arm": s.arm,
            "over (no speculation)": s.reference,
            "concurrency": s.concurrency,
            f"speedup [raw {level} CI]": _times(s.speedup, s.ci_low, s.ci_high),
        }
        for s in analysis.speedups
    ]
    return pd.DataFrame(rows)


def accepted_length_table(analysis: Analysis) -> pd.DataFrame:
    """Per speculative arm: share of verify steps that accepted 0..K draft tokens."""
    rows = []
    for a in analysis.arms:
        if not a.accepted_length:
            continue
        row: dict[str, object] = {"arm": a.arm, "from": a.accepted_length_source}
        for s in a.accepted_length:
            row[str(s.accepted)] = "—" if s.share is None else f"{s.share:.3f}"
        rows.append(row)
    return pd.DataFrame(rows).fillna("")


def category_table(analysis: Analysis) -> pd.DataFrame:
    """Per group (category, probe set, prompt-length bin or output window), arm and metric:
    the estimate with its interval and, for non-baseline arms, the difference from the
    baseline, its verdict (Holm within the group) and its p Holm-adjusted across groups."""
    b = analysis.breakdown
    if b is None:
        return pd.DataFrame()
    across = across_p(b)
    rows = []
    for g in b.groups:
        for a in g.arms:
            for metric in ALL_METRICS:
                m = a.metrics.get(metric)
                if m is None or m.estimate is None:
                    continue
                c = next((x for x in g.comparisons if x.arm == a.arm and x.metric == metric), None)
                rows.append(
                    {
                        b.by: g.group,
                        "probes": g.probes,
                        "arm": a.arm,
                        "metric": METRIC[metric].short,
                        "estimate [CI]": estimate_text(m, METRIC[metric].digits),
                        "vs baseline [raw CI]": difference(c) if c is not None else "—",
                        "verdict": group_verdict(b, g.group, c, analysis.alpha),
                        "p across groups": across.get((g.group, a.arm, metric), "—"),
                    }
                )
    return pd.DataFrame(rows)


def group_verdict(b: Breakdown, group: str, c: Comparison | None, alpha: float) -> str:
    """A group's verdict as a reader may take it: a difference the within-group verdict
    claims whose p across the groups is not below alpha is said, on the same line, to be a
    within-group verdict only (it may be one of the groups' chance differences)."""
    if c is None:
        return "—"
    if c.verdict not in CLAIMED:
        return c.verdict
    adjusted = next(
        (
            p
            for x in b.across_groups
            if (x.arm, x.metric) == (c.arm, c.metric)
            for g, p in zip(x.groups, x.p_holm, strict=True)
            if g == group
        ),
        None,
    )
    if adjusted is None or adjusted < alpha:
        return c.verdict
    return f"{c.verdict} in this group only, not across groups (p {adjusted:.2g} ≥ {alpha:g})"


def across_p(b: Breakdown) -> dict[tuple[str, str, str], str]:
    """(group, arm, metric) -> its p Holm-adjusted across the groups, as text."""
    return {
        (g, x.arm, x.metric): "—" if p is None else f"{p:.2g}"
        for x in b.across_groups
        for g, p in zip(x.groups, x.p_holm, strict=True)
    }


def arm_summary(analysis: Analysis) -> pd.DataFrame:
    """One line per arm for the end of a run: acceptance verdicts and tokens/s with its
    interval and the speed verdict beside them."""
    level = f"{1 - analysis.alpha:.0%}"
    ups = {s.arm: s for s in analysis.speedups}
    rows = []
    for a in analysis.arms:
        base = a.arm == analysis.baseline
        row = {"arm": a.arm}
        none = a.boots == 0  # a stopped run: nothing to judge, say so rather than a verdict
        for metric in ACCEPTANCE_METRICS:
            c = _comparison(analysis, a.arm, metric)
            row[METRIC[metric].short] = (
                NO_BOOTS if none else "baseline" if base else c.verdict if c else "—"
            ) if a.speculative else "no speculation"  # fmt: skip
        c = _comparison(analysis, a.arm, SPEED_METRIC)
        row[f"tokens/s [{level} CI]"] = estimate_text(a.metrics.get(SPEED_METRIC), 1)
        row["tokens/s vs baseline"] = "baseline" if base else difference(c) if c else "—"
        row["speed verdict"] = NO_BOOTS if none else "—" if c is None else c.verdict
        if ups:
            s = ups.get(a.arm)
            row["speedup"] = "—" if s is None else _times(s.speedup, s.ci_low, s.ci_high)
        rows.append(row)
    return pd.DataFrame(rows)
