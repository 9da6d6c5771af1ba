"""`specab plan --json`: boots per arm for an effect, and prompts per boot (Kalibera & Jones)
from measured variance components and costs. Keys the plan could not compute are left out
(`to_json`), as they always were."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from bench.records import PRIMARY_DEFAULT
from bench.stats.schema.strict_json import Frozen, Int, Num
from bench.stats.schema.variance_components import PooledComponents


class ScreenPlan(Frozen):
    candidates: int = Field(description="Candidates screened against the baseline (--arms).")
    margin: float = Field(description="How much worse a candidate may be and still clear.")
    boot_value_sd: float = Field(description="The pilot's SD of boot values (the test's scale).")
    looks: list[int] = Field(description="Boots per arm at each look; the last is the plan.")
    cleared: float = Field(description="Share of harmless candidates cleared, simulated.")
    boots_expected: float = Field(
        description="Mean boots of the whole screening when every candidate is harmless "
        "(decided candidates stop), simulated through the product's rule."
    )
    boots_fixed_design: int = Field(description="Every arm booted to the last look.")
    boots_one_harmful: float | None = Field(
        None,
        description="Mean boots when one candidate is worse than the baseline by 4 margins "
        "and the others are harmless (the harmful one stops at an early look too), simulated.",
    )


class Plan(Frozen):
    effect: float = Field(description="Smallest effect worth detecting (metric units).")
    alpha: float = Field(description="Two-sided level.")
    power: float = Field(description="Target power.")
    between_boot_sd: Num = Field(description="Pooled between-boot SD (metric units).")
    prompts_per_boot_now: Int = Field(description="Median compared probes per boot.")
    boots_per_arm: int | None = Field(description="Boots per arm at today's prompts per boot.")
    boot_cost_s: Num = Field(description="Mean seconds from start to /health per boot.")
    prompt_cost_s: Num = Field(description="Mean seconds per probe.")
    prompts_per_boot: int | None = Field(description="Kalibera & Jones optimum P*.")
    boots_per_arm_at_optimum: int | None = Field(description="Boots per arm at P* prompts.")
    note: str | None = Field(description="Why part of the plan is missing, if it is.")
    between_boot_sd_at_optimum: Num = Field(None, description="The SD scaled to P* prompts.")
    seconds_per_arm_now: Num = Field(None, description="Machine time per arm now.")
    seconds_per_arm_at_optimum: Num = Field(None, description="Machine time per arm at P*.")
    metric: str = Field(PRIMARY_DEFAULT[0], description="The metric planned for.")
    boots_measured: dict[str, int] = Field(
        default_factory=dict, description="Ok boots per speculative arm it was measured on."
    )
    components: PooledComponents | None = Field(None, description="Pooled variance parts.")
    family_size: int | None = Field(
        None,
        description="Comparisons in the primary Holm family; without --alpha the plan is at "
        "the manifest's alpha over this (Holm's first step), so every comparison is covered.",
    )
    alpha_given: bool | None = Field(None, description="Whether --alpha set the level.")
    screening: ScreenPlan | None = Field(
        None, description="With --arms N: a screening of N candidates sized for the effect."
    )

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)
