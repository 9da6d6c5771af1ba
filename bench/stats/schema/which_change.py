"""Which change did it, in `analyze --json` (additive keys): `bisection` for experiments
with [bisect] (where in the history of arms the metric changed, and the evidence) and
`screening` for [screen] (each candidate against the baseline, one-sided, with its decision
and the look that made it)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from bench.stats.schema.strict_json import Frozen, Int, Num

ScreenStatus = Literal["cleared", "lowered", "unresolved"]
PointDecision = Literal[
    "good end", "bad end", "like good", "like bad", "neither", "undecided", "no boots", "skipped"
]


class BisectPoint(Frozen):
    arm: str = Field(description="The point (an arm), in history order.")
    index: Int = Field(description="Its place in the history, 0 the good end.")
    boots: Int = Field(description="Ok boots measured at it.")
    estimate: Num = Field(description="Mean of its boots' values (the metric's scale).")
    ci_low: Num = Field(description="(1 - alpha) t interval of that mean, over its boots.")
    ci_high: Num = Field(description="Its upper end.")
    p_changed: Num = Field(
        description="Posterior probability that the change lies at or before it (it is at "
        "the bad level); null at the ends."
    )
    p_culprit: Num = Field(description="Posterior probability that it is the first changed.")
    same_as: str | None = Field(
        None,
        description="The earlier point it runs the same code as (no boots of its own, never "
        "the culprit); null otherwise.",
    )
    subject: str | None = Field(
        None, description="For a history made from git: its commit's subject line."
    )
    decision: PointDecision = Field(
        description="like bad: p_changed >= 1 - alpha; like good: <= alpha; neither: its boots "
        "sit between the two levels (a second change near it); skipped: its attempts failed "
        "(a build or boot that fails the same way) and it was passed over; else undecided."
    )


class BisectConfirmation(Frozen):
    point: str = Field(description="The point before the proposed culprit that was booted.")
    culprit: str = Field(description="The proposed culprit.")
    attempt: Int = Field(description="Which confirmation of the search this was (1-based).")
    level: float = Field(
        description="Its one-sided level over its looks; the levels of every attempt a "
        "search may make sum to alpha."
    )
    boots_each: Int = Field(description="Fresh boots of each of the two at its last look.")
    difference: Num = Field(
        description="Culprit minus the point before it, on the fresh boots (relative for a "
        "ratio metric)."
    )
    bound: Num = Field(
        description="The one-sided bound at the look's level, toward zero: beyond zero (in "
        "the ends' direction) names the culprit."
    )
    named: bool = Field(description="The fresh boots differ: the culprit is named.")


class Bisection(Frozen):
    metric: str = Field(description="The metric searched.")
    outcome: Literal["culprit", "range", "not_reproduced", "searching"] = Field(
        description="culprit: fresh boots of one point and of the point before it differ "
        "(`confirmation`); range: the shortest run of points holding 1 - alpha, where no "
        "point could be confirmed; not_reproduced: the ends do not differ; searching: boots "
        "still wanted."
    )
    culprit: str | None = Field(description="The first changed point (outcome culprit).")
    culprit_commit: dict[str, Any] | None = Field(
        None,
        description="For a history made from git: the culprit's commit, subject, date and "
        "the files it touches.",
    )
    last_good: str | None = Field(description="The point before it: the A/B to rerun.")
    range_first: str | None = Field(description="First point of the range (or the culprit).")
    range_last: str | None = Field(description="Last point of the range (or the culprit).")
    alpha: float = Field(description="The chance the named culprit is wrong, at most.")
    difference: Num = Field(description="Bad end minus good end (relative for a ratio metric).")
    difference_ci_low: Num = Field(description="Its interval at the ends' level.")
    difference_ci_high: Num = Field(description="Its upper end.")
    boots: Int = Field(description="Ok boots of the search, all points.")
    reason: str = Field(
        "",
        description="One sentence on the outcome, in words the report layer composes from "
        "the fields here (`analyze --json` and analysis.json carry it).",
    )
    why: str | None = Field(
        None,
        description="range: why no confirmation could name a point (partner_unbootable: the "
        "point before the candidate cannot be booted; confirmations_used; budget_spent: the "
        "boot budget; boots_spent: the candidate's or its neighbour's boots; step_too_small: "
        "to confirm on the most fresh boots a side; no_splitting_point: no bootable point "
        "could tell the candidates apart; points_full: every such point has its most boots); "
        "not_reproduced: ends_equal; null otherwise.",
    )
    blocked_point: str | None = Field(
        None, description="why partner_unbootable: the point that cannot be booted."
    )
    points: list[BisectPoint] = Field(description="Every point, in history order.")
    confirmation: BisectConfirmation | None = Field(
        None,
        description="The fresh boots that named the culprit, or the last attempt that did "
        "not name one; null when none was made.",
    )
    boots_to_pin: Int | None = Field(
        None,
        description="range: fresh boots at each of a candidate and the point before it that "
        "would confirm a change of the ends' size with 80 % power.",
    )
    smallest_change: Num = Field(
        None,
        description="not_reproduced: the change the ends' last look would have shown with "
        "80 % power (the metric's units, relative for a ratio metric).",
    )


class ScreenCandidate(Frozen):
    arm: str = Field(description="The candidate (an arm).")
    same_code: bool = Field(
        False,
        description="It runs the baseline's code (its diffs change only comments, docstrings "
        "or layout, or the build already carries them): cleared without a test or a boot.",
    )
    boots: Int = Field(description="Its ok boots the decision rests on (the look's).")
    difference: Num = Field(
        description="Candidate minus baseline (relative for a ratio metric), at the look."
    )
    ci_low: Num = Field(
        description="One-sided lower bound at the look's nominal level: above -margin clears."
    )
    ci_high: Num = Field(description="One-sided upper bound: below 0 means lowered.")
    status: ScreenStatus = Field(
        description="cleared: not worse than the baseline by more than the margin; lowered: "
        "worse than the baseline; unresolved: neither by the last look reached."
    )
    within_margin: bool = Field(
        description="A lowered candidate's drop is shown smaller than the margin."
    )
    decided_at_look: Int | None = Field(
        description="The look (1-based) that decided it; null if not."
    )
    nominal_alpha: Num = Field(
        description="The one-sided level the deciding test used at that look: its family's "
        "Holm level, raised by the candidates that family had already decided."
    )
    spread: Literal["pooled", "welch"] | None = Field(
        None,
        description="Whose boots gave its last look's interval the spread: pooled (every "
        "arm's) or welch (its own and the baseline's: the rule, one candidate, or a "
        "baseline noisier than the candidates at that look); null without a look.",
    )


class Screening(Frozen):
    metric: str = Field(description="The metric screened.")
    baseline: str = Field(description="The arm every candidate is compared with.")
    margin: float = Field(description="How much worse a candidate may be and still clear.")
    alpha: float = Field(
        description="The chance of clearing any candidate worse by the margin or more, and "
        "of calling any candidate that is not worse lowered: each at most this."
    )
    looks: list[int] = Field(description="Boots per arm at each planned look.")
    spread: Literal["pooled", "welch"] = Field(
        "welch",
        description="The screening's rule for whose boots give a look its spread: pooled "
        "(one boot SD over the baseline and every candidate, floored by each pair's own; "
        "with one candidate, Welch) or welch (each pair's own: results written before the "
        "rule was recorded). Each candidate says what its last look used.",
    )
    candidates: list[ScreenCandidate] = Field(description="Every candidate, in arm order.")
    finished: bool = Field(description="Every candidate decided, or the last look taken.")
    boots_used: Int = Field(description="Ok boots of every arm counted by the looks.")
    boots_fixed_design: Int = Field(
        description="Boots the same arms would take with every arm booted to the last look."
    )
    reason: str = Field(description="One sentence on where the screening stands.")
