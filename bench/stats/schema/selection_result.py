"""The `selection` key of `analyze --json` (additive; present for experiments with [sweep])."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from bench.stats.schema.strict_json import Frozen, Int, Num


class SelectionConfig(Frozen):
    arm: str = Field(description="Arm (grid cell).")
    speculative_tokens: Int = Field(description="Speculative tokens per step; 0: no speculation.")
    boots: Int = Field(description="Boots the selection used (the first n of the look).")
    estimate: Num = Field(
        description="Objective: geometric mean of the boots' tokens/s, or the mean of the "
        "boots' acceptance values."
    )
    ci_low: Num = Field(
        None,
        description="(1 - alpha) t interval of the estimate over its boots, lower end (this "
        "configuration alone, not simultaneous; the MCB columns make the claims).",
    )
    ci_high: Num = Field(None, description="Its upper end.")
    mcb_low: Num = Field(
        description="Simultaneous lower end for this configuration minus the best of the "
        "others (relative for speed: -0.03 = at worst 3 % below the best); null if eliminated."
    )
    mcb_high: Num = Field(description="Its upper end (0: shown not to be the best).")
    in_subset: bool = Field(description="Not distinguishable from the best at the level.")
    within_margin: bool = Field(description="Proven within the margin of the best.")
    feasible: bool = Field(description="Meets the sweep's constraints (point estimates).")
    eliminated_at_look: Int | None = Field(
        description="Look (1-based) at which it was dropped as clearly worse; null if not."
    )
    mean_accepted_length: Num = Field(description="Ratio of sums over its boots; null: no spec.")
    acceptance_pos0: Num = Field(description="Ratio of sums over its boots; null: no spec.")


class SelectionGroup(Frozen):
    group: str = Field(description="Group label (e.g. c4: concurrency 4), 'all' without groups.")
    levels: dict[str, Any] = Field(description="The group_by fields' values.")
    status: Literal["chosen", "undecided", "empty"] = Field(
        description="chosen: a configuration is proven within the margin of the best; "
        "undecided: none yet (more boots); empty: no feasible configuration with 2+ boots."
    )
    chosen: str | None = Field(description="The configuration to ship (tie-break applied).")
    best_estimate: str | None = Field(description="Highest estimate (not a claim by itself).")
    subset: list[str] = Field(description="Configurations not distinguishable from the best.")
    reason: str = Field(description="One sentence: why this choice (or none).")
    look: Int | None = Field(description="Look (1-based) the decision was taken at.")
    level: Num = Field(description="One-sided level the deciding look tested at.")
    speculative_config: dict[str, Any] | None = Field(
        description="The chosen arm's --speculative-config (null: no speculation or none)."
    )
    paste: str | None = Field(description="The server flag to paste (a shell-quoted JSON).")
    boots_needed: Int | None = Field(
        None,
        description="Planning: boots per configuration at which the best, leading by the "
        "margin, would be proven with probability 0.95 (the group's largest boot SD).",
    )
    best_estimate_probability: Num = Field(
        None,
        description="When undecided: the probability that best_estimate is within the margin "
        "of the true best, from each configuration's boots (independent reference posteriors; "
        "a bet, not the guarantee; calibration in docs/statistics.md).",
    )
    boots_more: Int | None = Field(
        None,
        description="When undecided: boots per configuration still to run before the plan "
        "(boots_needed) would prove a choice.",
    )
    boots_used: Int = Field(description="Boots the group ran that the selection counts.")
    boots_fixed: Int = Field(description="Boots a fixed design would run (configs x last look).")
    configs: list[SelectionConfig] = Field(description="Every configuration of the group.")


class Selection(Frozen):
    objective: str = Field(description="What is maximized, per boot.")
    margin: float = Field(description="Indifference zone delta.")
    margin_scale: Literal["relative", "absolute"] = Field(description="How delta is read.")
    alpha: float = Field(description="P(the chosen one is not within delta of the best) bound.")
    tie_break: str = Field(description="Rule among configurations proven within the margin.")
    method: str = Field(description="The procedure, in one line.")
    looks: list[int] | None = Field(description="Planned looks (boots per configuration).")
    groups: list[SelectionGroup] = Field(description="One selection per group.")
    schedule: list[list[int]] | None = Field(
        description="num_speculative_tokens_per_batch_size ([start, end, k] inclusive batch "
        "sizes) from the choice per concurrency level; null when not expressible."
    )
    schedule_speculative_config: dict[str, Any] | None = Field(
        description="A --speculative-config carrying that schedule (vLLM dynamic speculation)."
    )
    boots_used: Int = Field(description="Boots the selection counted, all groups.")
    boots_fixed_design: Int = Field(description="What the fixed design would have run.")
    notes: list[str] = Field(default_factory=list, description="Sentences worth reading.")
