"""`specab gate`'s answers: one non-inferiority check per paired arm and metric (new run vs
stored reference, one-sided Welch bound on boot values), and the run's overall result."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

GateVerdict = Literal["pass", "regressed", "inconclusive"]


class GateCheck(BaseModel):
    """One metric of one arm, new run vs reference."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    arm: str = Field(description="Arm of the new run.")
    reference_arm: str = Field(description="Arm of the reference it is compared with.")
    metric: str = Field(description="acceptance_pos0, mean_accepted_length or tokens/s.")
    scale: Literal["absolute", "relative"] = Field(description="relative: speed, as a ratio.")
    reference: float = Field(description="Reference mean of its boot values.")
    new: float = Field(description="New run's mean of its boot values.")
    difference: float = Field(description="new - reference (relative: ratio - 1).")
    lower_bound: float = Field(description="One-sided (1 - alpha) lower bound of it.")
    upper_bound: float = Field(description="One-sided (1 - alpha) upper bound of it.")
    margin: float = Field(description="Non-inferiority margin (relative for speed).")
    boots_reference: int = Field(description="Reference boots.")
    boots_new: int = Field(description="New boots.")
    verdict: GateVerdict = Field(description="pass: not worse by the margin (shown).")
    boots_needed: int | None = Field(
        description="Boots per side for false failures ~alpha at no true change (this SD)."
    )


class GateResult(BaseModel):
    """`specab gate --json`: every check of every paired arm and the overall answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    reference: str = Field(description="The reference's name.")
    passed: bool = Field(description="Every check passed.")
    alpha: float = Field(description="One-sided level of every check.")
    caveat: str = Field(description="What a stored reference cannot rule out.")
    checks: list[GateCheck] = Field(description="One per paired arm and metric.")
    modes: list[str] = Field(
        default_factory=list,
        description="Gated arms (new run or reference) whose boots are not one population, "
        "one sentence each: a pass or a failure rests on those boots too.",
    )
