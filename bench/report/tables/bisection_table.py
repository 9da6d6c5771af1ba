"""A culprit search in the report: the answer first, then every point of the history with
its boots, estimate and interval, the probability that the change lies at or before it and
its decision (from `analysis.bisection`)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from bench.records import METRIC
from bench.report.tables.headings import Heading
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


def bisection_answer(b: Bisection, code: Callable[[str], str] = str) -> list[str]:
    """The search's answer after its reason, one sentence each, for the terminal and the
    report alike (`code` marks a commit, a file or a command): the culprit's commit and
    what it leaves unserved, the confirmation, the ends' difference and the A/B that reruns
    the step on these boots."""
    shown = "{:+.1%}" if METRIC[b.metric].relative else "{:+.4f}"
    said = []
    if (c := b.culprit_commit) is not None:
        files = ", ".join(code(f) for f in c.get("files", [])[:8])
        said.append(
            f"Commit {code(str(c.get('commit')))} ({c.get('date')}): {c.get('subject')}; it "
            f"touches {files}."
        )
        if unserved := c.get("unserved"):
            said.append(
                "Not served at this point over the installed build (its compiled or binary "
                f"part was not measured; give [bisect] git a build): "
                f"{', '.join(code(f) for f in unserved)}."
            )
    if (f := b.confirmation) is not None and f.difference is not None:
        bound = shown.format(f.bound) if f.bound is not None else "—"
        said.append(
            f"Confirmation {f.attempt}: {f.culprit} − {f.point} on {f.boots_each} fresh boots "
            f"each: {shown.format(f.difference)} (one-sided bound {bound}, level "
            f"{f.level:.3g}){'' if f.named else ': not named'}."
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
            "The step as an A/B on these boots: "
            f"{code(f'specab analyze DIR --baseline {b.last_good}')} (arm {b.culprit} "
            "against it)."
        )
    return said


def bisection_section(b: Bisection) -> tuple[str, str, pd.DataFrame]:
    said = [
        "The arms, in order, are a history from the good end to the bad end; the search looked "
        f"for the first point where {b.metric} changed and names one only once fresh boots of "
        "it and of the point before it differ (a named culprit is wrong at most "
        f"{b.alpha:g} of the time; {b.boots} boots). **{b.reason}**.",
        *bisection_answer(b, lambda x: f"`{x}`"),
    ]
    return (Heading.CULPRIT, " ".join(said), bisection_table(b))
