"""What a sequential design says at the look reached (`analyze --json` `sequential`, and what
run-ab acts on): stop or continue, the look's nominal level, each primary comparison."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from bench.stats.schema.comparison import Verdict
from bench.stats.schema.strict_json import Frozen, Int, Num


class SequentialRow(Frozen):
    arm: str = Field(description="The arm compared.")
    metric: str = Field(description="Primary metric.")
    difference: Num = Field(description="arm - baseline on the look's boots.")
    p_adjusted: Num = Field(description="Holm p at this look.")
    status: Literal["difference", "equivalent", "undecided"] = Field(description="At this look.")
    verdict: Verdict = Field(description="Verdict at the look's nominal level.")


class Decision(Frozen):
    """What a sequential design says at the current look."""

    action: Literal["stop", "continue"] = Field(description="Stop, or add boots.")
    reason: str = Field(description="One sentence.")
    boots_per_arm: Int = Field(description="Ok boots per arm now (the smallest arm).")
    look: int | None = Field(description="1-based look reached (null before the first).")
    looks: tuple[int, ...] = Field(description="Planned looks, boots per arm.")
    next_look: int | None = Field(description="Boots per arm at the next look.")
    nominal_alpha: Num = Field(description="Nominal two-sided level at this look.")
    comparisons: list[SequentialRow] = Field(default_factory=list, description="Per comparison.")

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
