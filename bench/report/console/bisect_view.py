"""A culprit search on a terminal (`analyze`, the end of `specab bisect`): every point of the
history with its boots, estimate, the probability that the change lies at or before it and
its decision, then the answer and the A/B that reruns it. A screening of unordered
candidates likewise: each candidate's decision, then the rule and the boots it took."""

from __future__ import annotations

from rich.console import Console

from bench.records import METRIC
from bench.report.console.verdict_view import print_frame
from bench.report.tables import bisection_table, screening_summary, screening_table
from bench.stats import Bisection
from bench.stats.schema import Screening


def render_screening(s: Screening, out: Console) -> None:
    print_frame(out, screening_table(s), f"Screening: which candidates lowered {s.metric}?")
    out.print(screening_summary(s), markup=False)


def render_bisection(b: Bisection, out: Console) -> None:
    """The answer first (what was found, its commit, what it rests on), then every point."""
    m = METRIC[b.metric]
    shown = "{:+.1%}" if m.relative else "{:+.4f}"
    out.print(f"bisect ({b.boots} boots, α = {b.alpha:g}): {b.reason}", markup=False)
    if (c := b.culprit_commit) is not None:
        files = ", ".join(c.get("files", [])[:6])
        out.print(
            f"commit {c.get('commit')} ({c.get('date')}): {c.get('subject')}; files: {files}",
            markup=False,
        )
        if unserved := c.get("unserved"):
            out.print(
                f"not served at this point (over the installed build): {', '.join(unserved)}; "
                "its compiled or data part was not measured (give [bisect] git a build)",
                markup=False,
            )
    if (f := b.confirmation) is not None and f.difference is not None:
        bound = shown.format(f.bound) if f.bound is not None else "—"
        out.print(
            f"confirmation {f.attempt}: {f.culprit} − {f.point} on {f.boots_each} fresh boots "
            f"each: {shown.format(f.difference)} (one-sided bound {bound}, level {f.level:.3g})"
            f"{'' if f.named else ': not named'}",
            markup=False,
        )
    if b.difference is not None and b.difference_ci_low is not None:
        hi = b.difference_ci_high if b.difference_ci_high is not None else float("nan")
        out.print(
            f"bad end − good end: {shown.format(b.difference)} "
            f"[{shown.format(b.difference_ci_low)}, {shown.format(hi)}] (the ends' test: "
            f"its last look's interval at α / looks)",
            markup=False,
        )
    if b.culprit is not None and b.last_good is not None:
        out.print(
            f"the step as an A/B on these boots: specab analyze DIR --baseline {b.last_good} "
            f"(arm {b.culprit} against it)",
            markup=False,
        )
    print_frame(out, bisection_table(b), f"History: where did {m.short} change?")
