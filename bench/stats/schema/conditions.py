"""How the run's conditions moved, in `analyze --json`: drift within boots from the first to the
last pass (`drift`, for `[probes] passes = N`) and hosts that differ between arms (`hosts`:
the arms x hosts table, the host effect and which comparisons were made within hosts), and
where a served arm's output tokens part from its reference arm's (`parity`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bench.stats.schema.strict_json import Frozen, Int, Num


class DriftEstimate(BaseModel):
    """One arm's change of one metric from its boots' first pass to their last."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    arm: str = Field(description="Arm name.")
    metric: str = Field(description="acceptance_pos0, mean_accepted_length, output_tokens_per_s.")
    first_pass: int = Field(description="The pass compared from (0-based).")
    last_pass: int = Field(description="The pass compared to.")
    boots: int = Field(description="Boots (replicates of the within-boot trend).")
    change: float = Field(description="Mean over boots of last - first (relative: ratio - 1).")
    ci_low: float | None = Field(description="(1 - alpha) t interval over boots, B - 1 df.")
    ci_high: float | None = Field(description="Its upper end.")
    scale: Literal["absolute", "relative"] = Field(description="relative: speed, a ratio.")
    margin: float = Field(description="The metric's margin (relative for speed).")
    verdict: str = Field(description="The comparisons' verdict rule applied to the change.")
    by_pass: list[float] = Field(
        default_factory=list,
        description="The metric per pass, mean over boots (speed: geometric mean, tokens/s).",
    )


class HostSummary(Frozen):
    """`analyze --json` `hosts` (additive; null when every boot ran on one host)."""

    hosts: list[str] = Field(description="Hosts the ok boots ran on (a gang boot: its head).")
    boots: dict[str, dict[str, int]] = Field(description="Arm -> host -> ok boots.")
    balanced: bool = Field(description="Every arm has the baseline's share of boots per host.")
    adjusted: list[str] = Field(
        description="Arms whose comparisons with the baseline were made within hosts."
    )
    confounded: list[str] = Field(
        description="Arms on hosts disjoint from the baseline's: no difference can be claimed."
    )
    host_effect_p: dict[str, Num] = Field(
        description="Per metric, the F-test p of a host effect in boot value = arm + host."
    )


class SharedMachine(Frozen):
    """`analyze --json` `shared_machine` (additive; null when no boot measured its probes
    while another boot ran on its host): speed was measured with the machine shared."""

    boots: Int = Field(description="Ok boots analyzed.")
    shared: Int = Field(
        description="Ok boots whose probes ran while another boot (any phase) ran on its host."
    )
    most_at_once: Int = Field(description="The most boots that ran at once on one host.")
    hosts: list[str] = Field(description="Hosts where boots ran at the same time.")
    groups_share: Num = Field(
        None,
        description="Share of the boot-to-boot variance of log tokens/s (after arms) that "
        "co-run groups carry: 1 - residual variance of arm + group over that of arm alone, "
        "each per residual df, floored at 0 (null without a group of two or a residual df). "
        "Near 1, speed compared within the groups cancels nearly all the noise.",
    )
    groups_residual_df: Num = Field(
        None,
        description="Residual df of the arm + group fit (a paired interval's own df can be "
        "fewer: the slot as a covariate, a sequential look's boots).",
    )


class OutputParity(Frozen):
    """A served arm's output tokens against a reference arm's (the drafter's own forward,
    docs/reference-forward.md), probe by probe and boot by boot, at temperature 0: where
    parity holds they are the target's greedy tokens on both sides, and numerics or batching
    can flip a near-tie. No verdict rests on identical text: this says how often they part,
    and where."""

    arm: str = Field(description="The served arm.")
    reference: str = Field(description="The reference arm.")
    compared: Int = Field(description="Probe rows of the served arm compared (boots x probes).")
    identical: Int = Field(description="Rows whose output tokens equal the reference's.")
    first_difference: list[int] = Field(
        description="For every other row, the token index where its output first parts from "
        "the reference's (0-based), ascending."
    )
    probes_parting: list[str] = Field(
        description="The probes (set/id) where any boot's output parts from the reference's."
    )
    unchecked: Int = Field(
        0,
        description="Rows without token ids (a server that returns none): neither their "
        "prompt nor their output could be compared with the reference's.",
    )
