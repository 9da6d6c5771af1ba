"""What `specab run-ab` prints when it ends: per-node counts, the verdict table, each arm's
tokens/s with its interval and speed verdict beside the acceptance verdicts.

It takes loaded results and their analysis (`render.analysis_or_refusal`: made once, for
these tables and the report the caller writes). When the analysis refused the data (e.g. a
boot without drafts), per-arm pooled numbers are printed instead, labelled as *not a
verdict*: pooled ratios carry no between-boot uncertainty.
"""

from __future__ import annotations

import pandas as pd
from rich.console import Console

from bench.errors import SpecabError
from bench.records import Results
from bench.report.console.bisect_view import render_bisection, render_screening
from bench.report.console.verdict_view import print_frame, print_verdicts
from bench.report.tables import arm_summary, boots_said, render_selection
from bench.stats import Analysis, groups_clause, pooled_ratios


def table_console(*, stderr: bool = False) -> Console:
    """A console for verdict tables: rich falls back to 80 columns when output is not a
    terminal (a CI log, `| tee`), which cuts metric names and intervals; use 132 there."""
    width = None if Console(stderr=stderr).is_terminal else 132
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=width)


def _print_summary(console: Console, analysis: Analysis) -> None:
    if analysis.comparisons:
        print_frame(console, arm_summary(analysis), "per arm: acceptance verdicts and speed")
    for arm in analysis.arms:  # what an arm's boots say is said beside its verdicts
        for label, note in boots_said(arm):
            console.print(f"{label}: {note}", markup=False)


def _balance_line(analysis: Analysis) -> str | None:
    """Whether the dispatcher kept every arm's share of boots per host equal (over every ok
    boot of the directory); where it could not, what the analysis does about it."""
    hosts = analysis.hosts
    if hosts is None:
        return None
    if hosts.balanced:
        return "balanced: every arm has the same share of its ok boots on each host"
    shares = "; ".join(
        f"{arm} " + ", ".join(f"{h} {n}" for h, n in sorted(per.items()))
        for arm, per in hosts.boots.items()
    )
    line = (
        "NOT balanced across hosts (a node left, failed boots were retried elsewhere, or "
        f"nodes differ in slots): {shares}."
    )
    if hosts.adjusted:
        line += f" {', '.join(hosts.adjusted)}: compared within hosts."
    if hosts.confounded:
        line += f" {', '.join(hosts.confounded)}: on hosts disjoint from the baseline's, no claim."
    return line + " `specab analyze DIR` shows the arms x hosts table and the host-effect test."


def print_end(
    results: Results,
    analysis: Analysis | None,
    console: Console,
    *,
    per_node: dict[str, dict[str, int]],
    refusal: SpecabError | None = None,
) -> None:
    """Print the end-of-run tables of `results` and their `analysis` (None: `refusal` says
    why there is none, or no boot is ok yet)."""
    if len(per_node) > 1:
        arms = results.arms()
        df = pd.DataFrame(
            [
                {"node": n, **{a: int(c.get(a, 0)) for a in arms}}
                for n, c in sorted(per_node.items())
            ]
        )
        print_frame(console, df, "ok boots per node (this run)")
    line = _balance_line(analysis) if analysis is not None else None
    if line:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    if results.ok_boots().empty:
        console.print("no ok boots yet: nothing to analyze")
        return
    if analysis is None:
        why = refusal.one_line() if refusal is not None else "the analysis was not made"
        console.print(f"no verdict: {why}", markup=False)
        print_frame(
            console,
            pooled_ratios(results.ok_boots(), results.arms()),
            "per-arm pooled numbers — NOT A VERDICT (no between-boot uncertainty)",
        )
        return
    if analysis.bisection is not None:  # a history: the answer, not each point vs the first
        render_bisection(analysis.bisection, console)
        return
    if analysis.screening is not None:  # one-sided per candidate, not two-sided verdicts
        render_screening(analysis.screening, console)
        return
    print_verdicts(console, analysis)
    _print_summary(console, analysis)
    if analysis.shared_machine is not None:
        s = analysis.shared_machine
        console.print(
            f"speed with the machine shared: {s.shared} of {s.boots} boots measured while "
            f"another boot ran on their host (up to {s.most_at_once} at once)"
            f"{groups_clause(s)}",
            markup=False,
            highlight=False,
        )
    for c in analysis.comparisons:  # speed compared within co-run groups: both widths
        if c.pairing == "duet" and None not in (c.ci_low, c.ci_high, c.ci_unpaired_low):
            console.print(
                f"speed of {c.arm} vs {c.baseline} within co-run groups: "
                f"[{c.ci_low:+.1%}, {c.ci_high:+.1%}] paired, "
                f"[{c.ci_unpaired_low:+.1%}, {c.ci_unpaired_high:+.1%}] unpaired",
                markup=False,
                highlight=False,
            )
    if analysis.selection is not None:
        render_selection(analysis.selection, console)
