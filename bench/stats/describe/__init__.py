"""Each arm on its own: estimates with intervals and per-boot values (`arm_estimates`),
acceptance per draft position with simultaneous bands (`positions`), variance components and
the power plan they give (`variance`), speed and the accepted-length distribution (`speed`),
draft lengths (`drafting`), mean accepted length as other tools define it (`peer_lengths`),
drift from the first to the last pass within boots (`drift`), whether boots measured
speed with the machine shared (`machine_sharing`), boots that are not one population
(`boot_modes`), and boots that drafted on too few of their requests (`drafting_share`)."""

from bench.stats.describe.arm_estimates import arm_metrics, arm_result, boot_metrics, pooled_ratios
from bench.stats.describe.boot_modes import boot_modes, mode_split, modes_note, two_modes
from bench.stats.describe.drafting import draft_length_notes
from bench.stats.describe.drafting_share import (
    low_drafting_boots,
    low_drafting_note,
    speed_of_every_boot,
)
from bench.stats.describe.drift import drift
from bench.stats.describe.machine_sharing import groups_clause, shared_machine, sharing_note
from bench.stats.describe.peer_lengths import peer_lengths
from bench.stats.describe.positions import position_pseudo_values, simultaneous_band
from bench.stats.describe.speed import speed_est
from bench.stats.describe.variance import (
    arm_components,
    components,
    plan_boots_and_prompts,
    pooled_components,
    pooled_sd,
)

__all__ = [
    "arm_components",
    "arm_metrics",
    "arm_result",
    "boot_metrics",
    "boot_modes",
    "components",
    "draft_length_notes",
    "drift",
    "groups_clause",
    "low_drafting_boots",
    "low_drafting_note",
    "mode_split",
    "modes_note",
    "peer_lengths",
    "plan_boots_and_prompts",
    "pooled_components",
    "pooled_ratios",
    "pooled_sd",
    "position_pseudo_values",
    "shared_machine",
    "sharing_note",
    "simultaneous_band",
    "speed_est",
    "speed_of_every_boot",
    "two_modes",
]  # fmt: skip
