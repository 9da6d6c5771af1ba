"""A culprit search in the report: the answer first, then every point of the history with
its boots, estimate and interval, the probability that the change lies at or before it and
its decision (from `analysis.bisection`)."""

from __future__ import annotations

import pandas as pd

from bench.records import METRIC
from bench.stats import Bisection


def _num(x: float | None, digits: int) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def bisection_table(b: Bisection) -> pd.DataFrame:
    m = METRIC[b.metric]
    return pd.DataFrame(
        [
            {
                "point": p.arm,
                "boots": p.boots,
                f"{m.short} [CI]": f"{_num(p.estimate, m.digits)} "
                f"[{_num(p.ci_low, m.digits)}, {_num(p.ci_high, m.digits)}]",
                "P(changed by here)": _num(p.p_changed, 3),
                "decision": (
                    f"same code as {p.same_as}"
                    if p.same_as and p.decision not in ("good end", "bad end")
                    else p.decision
                ),
            }
            for p in b.points
        ]
    )


def bisection_section(b: Bisection) -> tuple[str, str, pd.DataFrame]:
    rerun = (
        f" Rerun it as an A/B: arms **{b.last_good}** and **{b.culprit}** of the same file, "
        "without [bisect]."
        if b.culprit and b.last_good
        else ""
    )
    if (c := b.culprit_commit) is not None:
        rerun += (
            f" Commit `{c.get('commit')}` ({c.get('date')}): {c.get('subject')}; it touches "
            f"{', '.join(f'`{f}`' for f in c.get('files', [])[:8])}."
        )
    text = (
        f"The arms, in order, are a history from the good end to the bad end; the search "
        f"looked for the first point where {b.metric} changed, naming one only when it holds "
        f"probability ≥ {1 - b.alpha:g} ({b.boots} boots). **{b.reason}**.{rerun}"
    )
    return ("Which change did it", text, bisection_table(b))
