"""A culprit search in words and a table: the one sentence that answers it (`bisection_reason`,
also `analyze --json`'s `reason`), then every point of the history with its boots, estimate
and interval, the probability that the change lies at or before it and its decision (from
`analysis.bisection`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from bench.records import CONFIRM_LOOKS, METRIC
from bench.report.tables.headings import Heading
from bench.stats import Analysis, Bisection


def _num(x: float | None, digits: int) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


# Why a range was the answer (no confirmation could name a point), by the search's code.
_RANGE_WHY = {
    "confirmations_used": "the confirmations are used up",
    "budget_spent": "the boot budget is spent",
    "boots_spent": "its boots or its neighbour's are spent",
    "step_too_small": f"the step is too small to confirm on {CONFIRM_LOOKS[-1]} fresh boots a side",
    "no_splitting_point": "no point that could tell the candidates apart can be booted",
    "points_full": "every point that could tell them apart has its most boots",
}


def bisection_reason(b: Bisection) -> str:
    """One sentence a user can act on: what was found, and what it rests on."""
    return _outcome_words(b) + _between_levels_words(b)


def analysis_json(analysis: Analysis) -> dict[str, Any]:
    """`analyze --json` and analysis.json: the analysis as JSON-ready data, with a culprit
    search's `reason` in words."""
    b = analysis.bisection
    if b is not None:
        said = b.model_copy(update={"reason": bisection_reason(b)})
        analysis = analysis.model_copy(update={"bisection": said})
    return analysis.to_json()


def _outcome_words(b: Bisection) -> str:
    f = b.confirmation
    if b.outcome == "culprit" and f is not None:
        return (
            f"{f.culprit} is the first changed point: {f.boots_each} fresh boots of it and of "
            f"{f.point} differ (one-sided, level {f.level:.3g}); a culprit named this way is "
            f"wrong at most {b.alpha:g} of the time"
        )
    if b.outcome == "range":
        why = (
            f"{b.blocked_point}, before it, cannot be booted"
            if b.why == "partner_unbootable"
            else _RANGE_WHY.get(b.why or "", b.why or "")
        )
        pin = (
            f"; ≈ {b.boots_to_pin} fresh boots at each of a candidate and the point before it "
            "would pin a change of the ends' size"
            if b.boots_to_pin is not None
            else ""
        )
        return (
            f"the change lies in {b.range_first} .. {b.range_last} (P ≥ {1 - b.alpha:g}): "
            f"{why}{pin}"
        )
    if b.outcome == "not_reproduced":
        seen = (
            f"; the ends would have shown a change of {b.smallest_change:.3g} or more (80 % power)"
            if b.smallest_change is not None
            else ""
        )
        return f"the change did not reproduce: the ends do not differ{seen}"
    return "boots still wanted"


def _between_levels_words(b: Bisection) -> str:
    names = ", ".join(p.arm for p in b.points if p.decision == "neither")
    if not names:
        return ""
    return (
        f"; {names} sits between the two levels (neither like good nor like bad): a second "
        "change near it, to search on each side (a history from the good end to it, and from "
        "it to the bad end)"
    )


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
        f"{b.alpha:g} of the time; {b.boots} boots). **{bisection_reason(b)}**.",
        *bisection_answer(b, lambda x: f"`{x}`"),
    ]
    return (Heading.CULPRIT, " ".join(said), bisection_table(b))
