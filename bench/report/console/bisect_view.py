"""A culprit search on a terminal (`analyze`, the end of `specab bisect`): every point of the
history with its boots, estimate, the probability that the change lies at or before it and
its decision, then the answer and the A/B that reruns it. A screening of unordered
candidates likewise: each candidate's decision, then the rule and the boots it took."""

from __future__ import annotations

from rich.console import Console

from bench.records import METRIC
from bench.report.console.verdict_view import print_frame
from bench.report.tables import (
    bisection_answer,
    bisection_reason,
    bisection_table,
    screening_summary,
    screening_table,
)
from bench.stats import Bisection
from bench.stats.schema import Screening


def render_screening(s: Screening, out: Console) -> None:
    print_frame(out, screening_table(s), f"Screening: which candidates lowered {s.metric}?")
    out.print(screening_summary(s), markup=False)


def render_bisection(b: Bisection, out: Console) -> None:
    """The answer first (what was found, its commit, what it rests on), then every point."""
    out.print(f"bisect ({b.boots} boots, α = {b.alpha:g}): {bisection_reason(b)}", markup=False)
    for sentence in bisection_answer(b):
        out.print(sentence, markup=False)
    print_frame(out, bisection_table(b), f"History: where did {METRIC[b.metric].short} change?")
