"""One arm of `specab analyze --json` (docs/results.md, schema_version 1): its metric estimates,
acceptance per draft position, each ok boot's values, and the accepted-length, draft-length
and peer-length parts. The contract's keys come first in each object, in its order; everything
else is additive (readers may ignore it). Non-finite numbers are stored as null."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bench.stats.schema.strict_json import Frozen, Int, Num


class MetricEstimate(Frozen):
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
    too_few_boots: bool = Field(
        False,
        description="Fewer than 3 ok boots and no prior SD: the interval is printed but marked "
        "'too few boots' (docs/statistics.md).",
    )


class PositionEstimate(Frozen):
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


class BootMetrics(Frozen):
    boot_id: str = Field(description="Boot attempt id.")
    boot: Int = Field(description="0-based boot index within the arm.")
    order: Int = Field(description="Global launch order.")
    drafts: float = Field(description="Drafts of this boot on the compared probes.")
    acceptance_pos0: Num = Field(description="This boot's ratio of sums, position 0.")
    mean_accepted_length: Num = Field(description="This boot's 1 + accepted / drafts.")
    output_tokens_per_s: Num = Field(None, description="Sum completion tokens / sum latency.")
    completion_tokens: Num = Field(None, description="Completion tokens, compared probes.")
    latency_s: Num = Field(None, description="Sum of request latencies (s), compared probes.")
    request_mean_accepted_length: Num = Field(
        None, description="This boot's mean over its requests of 1 + accepted / drafts."
    )


class AcceptedShare(Frozen):
    accepted: Int = Field(description="Draft tokens accepted in one verify step (0..K).")
    share: Num = Field(description="Share of the arm's verify steps that accepted that many.")
    ci_low: Num = Field(description="(1 - alpha) interval over boots (per bin, not joint).")
    ci_high: Num = Field(description="Its upper end.")


class PeerLengths(Frozen):
    """Mean accepted length as other tools define it (bench/stats/describe/peer_lengths.py)."""

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


class DraftLengthShare(Frozen):
    drafted: Int = Field(description="Draft tokens proposed in one verify step (0..K).")
    share: Num = Field(description="Share of the arm's verify steps that drafted that many.")


class BootModes(Frozen):
    """Whether an arm's boots are one population in one acceptance metric."""

    metric: str = Field(
        description="The acceptance metric tested, or requests_drafted: the share of the "
        "boot's requests that drafted at all."
    )
    modes: Int = Field(description="1: one population; 2: some boots lie apart (named).")
    p_adjusted: Num = Field(
        description="Smallest leave-one-out t p, Bonferroni over boots and the metrics tested."
    )
    main_boots: Int = Field(description="Boots of the main mode.")
    main_mean: Num = Field(description="Their mean value (the metric's scale).")
    main_sd: Num = Field(description="Their SD over boots.")
    other_boots: list[str] = Field(description="Boot ids in a second mode (empty: one mode).")
    other_values: list[float] = Field(description="Their values, in that order.")


class LowDraftingBoot(Frozen):
    """A boot that drafted on too few of its requests (kept out of acceptance)."""

    boot_id: str = Field(description="The boot.")
    share: float = Field(description="Share of its compared requests that drafted at all.")
    requests: Int = Field(description="Its compared requests (prompts).")
    min_share: float = Field(description="The --min-drafting-share it fell below.")


class ArmResult(Frozen):
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
    modes: list[BootModes] = Field(
        default_factory=list,
        description="Per acceptance metric (arms with 4+ ok boots): whether its boots are one "
        "population or some lie apart (docs/statistics.md, two-mode arms).",
    )
    low_drafting: list[LowDraftingBoot] = Field(
        default_factory=list,
        description="Boots that drafted on fewer than --min-drafting-share (default 0.5) of "
        "their requests: kept out of this arm's acceptance estimates and verdicts (boots and "
        "per_boot are the others'), counted in its tokens/s.",
    )
