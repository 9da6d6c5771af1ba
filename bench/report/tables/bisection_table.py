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
                **({"commit": p.subject or ""} if any(q.subject for q in b.points) else {}),
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
    m = METRIC[b.metric]
    shown = "{:+.1%}" if m.relative else "{:+.4f}"
    said = [
        "The arms, in order, are a history from the good end to the bad end; the search looked "
        f"for the first point where {b.metric} changed and names one only once fresh boots of "
        "it and of the point before it differ (a named culprit is wrong at most "
        f"{b.alpha:g} of the time; {b.boots} boots). **{b.reason}**."
    ]
    if (c := b.culprit_commit) is not None:
        said.append(
            f"Commit `{c.get('commit')}` ({c.get('date')}): {c.get('subject')}; it touches "
            f"{', '.join(f'`{f}`' for f in c.get('files', [])[:8])}."
        )
        if c.get("unserved"):
            said.append(
                "Not served at this point over the installed build (its compiled or data part "
                f"was not measured): {', '.join(f'`{f}`' for f in c['unserved'])}."
            )
    if b.difference is not None and b.difference_ci_low is not None:
        hi = b.difference_ci_high if b.difference_ci_high is not None else float("nan")
        said.append(
            f"Bad end − good end: {shown.format(b.difference)} "
            f"[{shown.format(b.difference_ci_low)}, {shown.format(hi)}] (the ends' test: its "
            "last look's interval at α over its looks)."
        )
    if b.culprit and b.last_good:
        said.append(
            f"The step as an A/B on these boots: `specab analyze DIR --baseline {b.last_good}` "
            f"(arm {b.culprit} against it)."
        )
    return ("Which change did it", " ".join(said), bisection_table(b))
