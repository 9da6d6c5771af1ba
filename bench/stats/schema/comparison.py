"""An arm against the baseline in `specab analyze --json`: one `Comparison` per arm and metric
(verdict, the interval it rests on, power, resampling extras, the one-sentence why),
speedups over a no-speculation arm, per-position differences, and the `--by` breakdown.
Metrics are a field, so a further metric is one more row, not a new structure."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, computed_field

from bench.stats.schema.arm_result import MetricEstimate
from bench.stats.schema.strict_json import Frozen, Int, Num

Pair = tuple[Num, Num]


Verdict = Literal[
    "improved", "regressed", "small_improvement", "small_regression", "equivalent", "inconclusive"
]


class Comparison(Frozen):
    arm: str = Field(description="The arm compared.")
    baseline: str = Field(description="The baseline arm.")
    metric: str = Field(description="Metric name.")
    difference: Num = Field(
        description="arm - baseline (metric units); relative (ratio - 1) when scale is relative."
    )
    ci_low: Num = Field(description="Raw (1 - alpha) Welch interval of the difference.")
    ci_high: Num = Field(description="Its upper end.")
    p_value: Num = Field(description="Raw two-sided Welch p (null: not testable).")
    p_adjusted: Num = Field(description="Holm-adjusted p across the comparison's family.")
    method: str = Field(description="welch, welch_prior_sd, deterministic or unreplicated.")
    margin: float = Field(description="Pre-registered margin (metric units, or relative).")
    verdict: Verdict = Field(description="The verdict (docs/statistics.md).")
    mde: Num = Field(description="Effect this comparison detects with the stated power.")
    boots_needed: int | None = Field(description="Boots/arm for that power at max(|d|, margin).")
    why: str = Field(description="One sentence explaining the verdict.")
    verdict_ci: Pair | None = Field(description="The interval the verdict rests on.")
    verdict_ci_level: Num = Field(
        description="Its two-sided alpha (0.025 under Holm at alpha 0.05): the interval's "
        "confidence is 1 - this (verdict_ci_confidence)."
    )
    verdict_ci_kind: str | None = Field(description="holm, holm_sequential, tost or exact.")
    se: Num = Field(description="Welch SE of the difference (of the log ratio: relative).")
    df: Num = Field(description="Welch-Satterthwaite df.")
    tost_ci: Pair | None = Field(description="(1 - 2 alpha) interval (equivalence, TOST).")
    unreplicated: bool = Field(description="An arm has 1 boot and no prior SD.")
    deterministic: bool = Field(description="Every boot of both arms identical.")
    no_boots: bool = Field(description="An arm has no ok boots.")
    between_boot_sd: Num = Field(description="Between-boot SD pooled over the two arms.")
    permutation_p: Num = Field(None, description="Boot-label permutation p (B >= 4).")
    permutation_min_p: Num = Field(None, description="Smallest attainable permutation p.")
    permutation_exact: bool | None = Field(None, description="All relabelings enumerated.")
    bootstrap_ci: Pair | None = Field(None, description="Studentized cluster bootstrap (B >= 10).")
    new_prompts_ci: Pair | None = Field(
        None, description="Pigeonhole: would it hold on new prompts?"
    )
    family: Literal["primary", "secondary"] = Field(
        "primary", description="Holm family: primary, or the metric's own secondary family."
    )
    scale: Literal["absolute", "relative"] = Field(
        "absolute",
        description="relative: Welch on log boot values; difference, intervals and margin "
        "are ratio - 1 (0.02 = +2 %), se/df are those of the log ratio.",
    )
    ratio: Num = Field(None, description="arm / baseline (relative-scale metrics).")
    ratio_ci_low: Num = Field(None, description="Raw (1 - alpha) interval of the ratio.")
    ratio_ci_high: Num = Field(None, description="Its upper end.")
    pairing: Literal["duet", "none"] | None = Field(
        None,
        description="Speed: duet = compared within co-run groups (boots of both arms measured "
        "at once on one host), none = unpaired; null for acceptance, which is never paired.",
    )
    ci_unpaired_low: Num = Field(
        None,
        description="Speed: the raw (1 - alpha) interval without the pairing, on the scale of "
        "ci_low (equal to it when pairing is none).",
    )
    ci_unpaired_high: Num = Field(None, description="Its upper end.")
    too_few_boots: bool = Field(
        False,
        description="An arm it rests on has fewer than 3 ok boots and no prior SD: the interval "
        "is printed but marked 'too few boots' (docs/statistics.md).",
    )

    @computed_field(  # type: ignore[prop-decorator]
        description="Confidence of the interval the verdict rests on (1 - verdict_ci_level: "
        "0.975 for a 97.5 % Holm interval); ci_low/ci_high are the raw (1 - alpha) interval."
    )
    @property
    def verdict_ci_confidence(self) -> float | None:
        level = self.verdict_ci_level
        return None if level is None or not math.isfinite(level) else round(1.0 - level, 12)


class Speedup(Frozen):
    arm: str = Field(description="A speculative arm.")
    reference: str = Field(description="The no-speculation arm at the same concurrency.")
    concurrency: Int = Field(description="Probes in flight in both arms' boots.")
    speedup: Num = Field(description="Ratio of output tokens/s, arm / reference.")
    ci_low: Num = Field(description="Raw (1 - alpha) Welch interval on log boot values.")
    ci_high: Num = Field(description="Its upper end.")
    df: Num = Field(description="Welch-Satterthwaite df.")


class PositionComparison(Frozen):
    arm: str = Field(description="The arm compared.")
    baseline: str = Field(description="The baseline arm.")
    position: Int = Field(description="Draft position k >= 1.")
    difference: Num = Field(description="arm - baseline, cumulative acceptance at k.")
    ci_low: Num = Field(description="Simultaneous interval over positions >= 1.")
    ci_high: Num = Field(description="Its upper end.")
    method: str = Field(description="welch_ + the critical value used.")


class GroupArm(Frozen):
    arm: str = Field(description="Arm name.")
    boots: Int = Field(description="Ok boots.")
    metrics: dict[str, MetricEstimate] = Field(description="On this group's probes only.")


class Group(Frozen):
    group: str = Field(description="Category or probe set ('(none)': probes without one).")
    probes: Int = Field(description="Compared probes in the group.")
    arms: list[GroupArm] = Field(description="Per arm, as in arms[].")
    comparisons: list[Comparison] = Field(description="As comparisons[], on the group.")


class AcrossGroups(Frozen):
    arm: str = Field(description="The arm compared with the baseline.")
    metric: str = Field(description="Metric name.")
    groups: list[str] = Field(description="The groups it was compared in, in groups[] order.")
    p_values: list[Num] = Field(description="Each group's raw Welch p (as its comparison's).")
    p_holm: list[Num] = Field(description="Those p Holm-adjusted across the groups.")
    differ: list[str] = Field(description="Groups whose p_holm is below alpha.")


class Breakdown(Frozen):
    by: str = Field(
        description="What the probes are grouped by: category, probe_set, prompt_tokens "
        "(bins of the prompts' lengths; prompt_tokens:E1,E2 with the edges given) or "
        "output_position (windows along the output by the token each verify step starts at; "
        "output_position:E1,E2 with the edges given)."
    )
    groups: list[Group] = Field(description="One per group, sorted by name (bins by their number).")
    note: str = Field(description="How to read it (secondary; multiplicity).")
    across_groups: list[AcrossGroups] = Field(
        [], description="Per arm and metric, the groups' p Holm-adjusted across the groups."
    )
