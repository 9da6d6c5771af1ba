"""The `screening` key of `analyze --json` (additive; present for experiments with
[screen]): each candidate against the baseline, one-sided, with its decision and the look
that made it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bench.stats.schema.strict_json import Frozen, Int, Num

ScreenStatus = Literal["cleared", "lowered", "unresolved"]


class ScreenCandidate(Frozen):
    arm: str = Field(description="The candidate (an arm).")
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
    nominal_alpha: Num = Field(description="Each side's one-sided level at that look.")


class Screening(Frozen):
    metric: str = Field(description="The metric screened.")
    baseline: str = Field(description="The arm every candidate is compared with.")
    margin: float = Field(description="How much worse a candidate may be and still clear.")
    alpha: float = Field(
        description="The chance of clearing any candidate worse by the margin or more, and "
        "of calling any candidate that is not worse lowered: each at most this."
    )
    looks: list[int] = Field(description="Boots per arm at each planned look.")
    candidates: list[ScreenCandidate] = Field(description="Every candidate, in arm order.")
    finished: bool = Field(description="Every candidate decided, or the last look taken.")
    boots_used: Int = Field(description="Ok boots of every arm counted by the looks.")
    boots_fixed_design: Int = Field(
        description="Boots the same arms would take with every arm booted to the last look."
    )
    reason: str = Field(description="One sentence on where the screening stands.")
