"""The `specab analyze --json` object (DESIGN.md, schema_version 1) as typed, immutable models.

DESIGN.md's keys come first in each object, in its order; everything else is additive (readers
may ignore it). Non-finite numbers are stored as None, so `Analysis.to_json()` is strict JSON
(null, never NaN). Metrics live in dicts keyed by metric name and comparisons in a list with a
`metric` field, so a further metric is one more key, not a new structure.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from bench.stats._base import Int, Num, _Out
from bench.stats._drift import DriftEstimate
from bench.stats._hosts import HostSummary
from bench.stats._select_models import Selection

Pair = tuple[Num, Num]
Verdict = Literal[
    "improved", "regressed", "small_improvement", "small_regression", "equivalent", "inconclusive"
]


class MetricEstimate(_Out):
    estimate: Num = Field(description="Ratio of sums over the arm's ok boots (metric units).")
    ci_low: Num = Field(description="(1 - alpha) t interval, cut at the metric's range.")
    ci_high: Num = Field(description="Upper end of that interval.")
    between_boot_sd: Num = Field(description="SD of one boot of average work (metric units).")
    se: Num = Field(description="Jackknife (leverage-robust) SE of the estimate.")
    df: Num = Field(description="Degrees of freedom: min(B, B_eff) - 1 (prior df with 1 boot).")
    unreplicated: bool = Field(description="One boot and no prior: no interval.")
    prior_sd_used: bool = Field(description="The SE comes from a prior A/A between-boot SD.")
    relative_sd: Num = Field(
        None, description="Log-scale metrics (tokens/s): SD of the log boot values (relative)."
    )


class PositionEstimate(_Out):
    position: Int = Field(description="Draft position k (0 = first draft token).")
    estimate: Num = Field(description="Cumulative acceptance sum A_k / sum D.")
    ci_low: Num = Field(description="Simultaneous interval over positions, lower end.")
    ci_high: Num = Field(description="Simultaneous interval over positions, upper end.")
    conditional: Num = Field(description="Conditional acceptance sum A_k / sum A_{k-1}.")
    conditional_ci_low: Num = Field(description="Its simultaneous interval, lower end.")
    conditional_ci_high: Num = Field(description="Its simultaneous interval, upper end.")
    simultaneous: bool = Field(True, description="Intervals hold jointly over positions.")
    method: str = Field(description="Critical value: t (K = 1), bonferroni_t, max_t, none.")
    drafted_share: Num = Field(
        None, description="sum drafted_k / sum D: share of steps that drafted position k."
    )
    among_drafted: Num = Field(
        None, description="sum A_k / sum drafted_k (null without per_step_drafted)."
    )
    among_drafted_ci_low: Num = Field(None, description="Its simultaneous interval, low end.")
    among_drafted_ci_high: Num = Field(None, description="Its upper end.")


class BootMetrics(_Out):
    boot_id: str = Field(description="Boot attempt id.")
    boot: Int = Field(description="0-based boot index within the arm.")
    order: Int = Field(description="Global launch order.")
    drafts: float = Field(description="Drafts of this boot on the compared probes.")
    acceptance_pos0: Num = Field(description="This boot's ratio of sums, position 0.")
    mean_accepted_length: Num = Field(description="This boot's 1 + accepted / drafts.")
    output_tokens_per_s: Num = Field(None, description="Sum completion tokens / sum latency.")
    completion_tokens: Num = Field(None, description="Completion tokens, compared probes.")
    latency_s: Num = Field(None, description="Sum of request latencies (s), compared probes.")


class AcceptedShare(_Out):
    accepted: Int = Field(description="Draft tokens accepted in one verify step (0..K).")
    share: Num = Field(description="Share of the arm's verify steps that accepted that many.")
    ci_low: Num = Field(description="(1 - alpha) interval over boots (per bin, not joint).")
    ci_high: Num = Field(description="Its upper end.")


class PeerLengths(_Out):
    """Mean accepted length as other tools define it (bench/stats/_peers.py)."""

    vllm_metrics: Num = Field(
        description="1 + sum accepted / sum drafts over every step (vLLM /metrics, "
        "`vllm bench serve`; equals specab's estimate)."
    )
    request_mean: Num = Field(
        description="Mean over requests of 1 + accepted / drafts (specdec_bench Average_AL)."
    )
    token_weighted: Num = Field(
        None,
        description="Per-request lengths weighted by output tokens (AIPerf's token-weighted "
        "aggregate); null without completion tokens.",
    )
    requests: Int = Field(description="Requests with drafts that the last two average over.")


class DraftLengthShare(_Out):
    drafted: Int = Field(description="Draft tokens proposed in one verify step (0..K).")
    share: Num = Field(description="Share of the arm's verify steps that drafted that many.")


class ArmResult(_Out):
    arm: str = Field(description="Arm name.")
    boots: Int = Field(description="Ok boots analyzed.")
    failed_boots: Int = Field(description="Failed boot attempts (kept as records, excluded).")
    metrics: dict[str, MetricEstimate] = Field(description="Per primary metric.")
    per_position: list[PositionEstimate] = Field(description="Per draft position.")
    effective_boots: Num = Field(description="Kish (sum D)^2 / sum D^2 over the ok boots.")
    positions: Int = Field(description="Speculative tokens K seen in this arm's counts.")
    per_boot: list[BootMetrics] = Field(description="Each ok boot's own metrics.")
    speculative: bool = Field(True, description="False: no speculation; acceptance is null.")
    concurrency: Int = Field(1, description="Probes in flight at once in this arm's boots.")
    accepted_length: list[AcceptedShare] = Field(
        default_factory=list, description="Distribution of accepted tokens per verify step."
    )
    accepted_length_source: Literal["histogram", "per_position"] | None = Field(
        None,
        description="histogram: per-request histograms; per_position: from the cumulative "
        "per-position counts (steps accepting exactly j = A_(j-1) - A_j, exact).",
    )
    mean_draft_length: Num = Field(None, description="sum draft tokens / sum drafts.")
    draft_lengths: list[DraftLengthShare] = Field(
        default_factory=list,
        description="Verify steps by draft length (from per_step_drafted; empty without it).",
    )
    peer_lengths: PeerLengths | None = Field(
        None,
        description="Mean accepted length as vLLM, specdec_bench and AIPerf define it, on "
        "the same requests (reconciling tools; statistics use specab's estimate).",
    )


class Comparison(_Out):
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
    verdict: Verdict = Field(description="The verdict (STATISTICS.md).")
    mde: Num = Field(description="Effect this comparison detects with the stated power.")
    boots_needed: int | None = Field(description="Boots/arm for that power at max(|d|, margin).")
    why: str = Field(description="One sentence explaining the verdict.")
    verdict_ci: Pair | None = Field(description="The interval the verdict rests on.")
    verdict_ci_level: Num = Field(description="Its two-sided level (e.g. 0.025 under Holm).")
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


class Speedup(_Out):
    arm: str = Field(description="A speculative arm.")
    reference: str = Field(description="The no-speculation arm at the same concurrency.")
    concurrency: Int = Field(description="Probes in flight in both arms' boots.")
    speedup: Num = Field(description="Ratio of output tokens/s, arm / reference.")
    ci_low: Num = Field(description="Raw (1 - alpha) Welch interval on log boot values.")
    ci_high: Num = Field(description="Its upper end.")
    df: Num = Field(description="Welch-Satterthwaite df.")


class PositionComparison(_Out):
    arm: str = Field(description="The arm compared.")
    baseline: str = Field(description="The baseline arm.")
    position: Int = Field(description="Draft position k >= 1.")
    difference: Num = Field(description="arm - baseline, cumulative acceptance at k.")
    ci_low: Num = Field(description="Simultaneous interval over positions >= 1.")
    ci_high: Num = Field(description="Its upper end.")
    method: str = Field(description="welch_ + the critical value used.")


class ArmComponents(_Out):
    between_boot_sd: Num = Field(description="SD of one boot of average work.")
    effective_boots: Num = Field(description="Kish effective boots.")
    binomial_floor_sd: Num = Field(None, description="sqrt(R(1-R)/mean D) (pos0 only).")
    overdispersion: Num = Field(None, description="(between-boot SD / binomial floor)^2.")
    sigma2_boot: Num = Field(description="Crossed ANOVA on cells: boot component.")
    sigma2_prompt: Num = Field(description="Prompt component.")
    sigma2_res: Num = Field(description="Residual (boot x prompt) component.")
    icc_boot: Num = Field(description="Boot share of the cell variance.")
    icc_prompt: Num = Field(description="Prompt share of the cell variance.")
    boot_se: Num = Field(description="Boot-level SE of the estimate.")
    naive_se: Num = Field(description="SE treating every cell as independent (wrong).")
    design_effect: Num = Field(description="(boot_se / naive_se)^2.")
    prompts: Int = Field(description="Prompts with drafts in every boot of the arm.")


class PooledComponents(_Out):
    between_boot_sd: Num = Field(description="Pooled over arms (weights B_a - 1).")
    df: float = Field(description="Its degrees of freedom.")
    sigma2_boot: Num = Field(description="df-weighted mean of the arms' components.")
    sigma2_prompt: Num = Field(description="Likewise, prompt component.")
    sigma2_res: Num = Field(description="Likewise, residual component.")


class VarianceComponents(_Out):
    per_arm: dict[str, dict[str, ArmComponents]] = Field(description="Arm -> metric -> parts.")
    pooled: dict[str, PooledComponents | None] = Field(description="Metric -> pooled parts.")
    units: str = Field(description="What the numbers are.")


class SequentialRow(_Out):
    arm: str = Field(description="The arm compared.")
    metric: str = Field(description="Primary metric.")
    difference: Num = Field(description="arm - baseline on the look's boots.")
    p_adjusted: Num = Field(description="Holm p at this look.")
    status: Literal["difference", "equivalent", "undecided"] = Field(description="At this look.")
    verdict: Verdict = Field(description="Verdict at the look's nominal level.")


class Decision(_Out):
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


class PriorInfo(_Out):
    between_boot_sd: dict[str, float] = Field(description="Metric -> prior SD.")
    df: dict[str, float] = Field(description="Metric -> its degrees of freedom.")
    source: str | None = Field(description="option, or the A/A results directory.")


class AnalysisSettings(_Out):
    n_resamples: Int = Field(description="Resamples of the resampling parts.")
    seed: Int = Field(description="Their seed.")
    power: float = Field(description="Power for mde and boots_needed.")
    prior: PriorInfo | None = Field(None, description="Prior between-boot SD, if any.")


class GroupArm(_Out):
    arm: str = Field(description="Arm name.")
    boots: Int = Field(description="Ok boots.")
    metrics: dict[str, MetricEstimate] = Field(description="On this group's probes only.")


class Group(_Out):
    group: str = Field(description="Category or probe set ('(none)': probes without one).")
    probes: Int = Field(description="Compared probes in the group.")
    arms: list[GroupArm] = Field(description="Per arm, as in arms[].")
    comparisons: list[Comparison] = Field(description="As comparisons[], on the group.")


class Breakdown(_Out):
    by: Literal["category", "probe_set"] = Field(description="What the probes are grouped by.")
    groups: list[Group] = Field(description="One per group, sorted by name.")
    note: str = Field(description="How to read it (secondary; multiplicity).")


class Analysis(_Out):
    schema_version: Literal[1] = Field(1, description="analyze --json schema version.")
    experiment: str = Field(description="Experiment name.")
    alpha: float = Field(description="Two-sided level of the family.")
    arms: list[ArmResult] = Field(description="Per arm, manifest order.")
    comparisons: list[Comparison] = Field(
        description="Each arm vs baseline: the primary family first, then secondary metrics."
    )
    variance_components: VarianceComponents = Field(description="Where the noise is.")
    baseline: str = Field(description="Baseline arm.")
    margins: dict[str, float] = Field(description="Metric -> margin.")
    compared_probes: Int = Field(description="(probe_set, probe_id) pairs every boot has.")
    per_position_comparisons: list[PositionComparison] = Field(description="Positions >= 1.")
    sequential: Decision | None = Field(description="Decision at the look reached (looks set).")
    settings: AnalysisSettings = Field(description="How it was computed.")
    notes: list[str] = Field(description="Sentences worth reading.")
    primary_metrics: list[str] = Field(
        default_factory=list, description="Metrics of the primary Holm family."
    )
    speedups: list[Speedup] = Field(
        default_factory=list, description="Each speculative arm over a no-speculation arm."
    )
    breakdown: Breakdown | None = Field(None, description="Per category or probe set (--by).")
    drift: list[DriftEstimate] = Field(
        default_factory=list,
        description="Change from the first to the last pass within boots ([probes] passes).",
    )
    hosts: HostSummary | None = Field(
        None, description="Arms x hosts, the host effect, comparisons made within hosts."
    )
    selection: Selection | None = Field(
        None, description="The best configuration per group, for experiments with [sweep]."
    )

    def to_json(self) -> dict[str, Any]:
        """The strict-JSON object `analyze --json` prints."""
        return self.model_dump(mode="json")

    def arm(self, name: str) -> ArmResult | None:
        return next((a for a in self.arms if a.arm == name), None)
