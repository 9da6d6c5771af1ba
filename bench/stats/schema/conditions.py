"""Drift within a boot (`[probes] passes = N`): does acceptance or speed change over a
server's lifetime? (vllm issue 41838: EAGLE acceptance length fell over a server's life and
only a restart reset it.)

Each boot runs the same probe set N times. Per boot: the metric on its first pass and on its
last pass (ratios of sums over that pass's probes; speed as the log of Σ tokens / Σ
latency), and their difference — one replicate of the within-boot trend per boot, so the
boot stays the unit of replication. The arm's drift is the mean over boots with a t
interval (B − 1 df), and the verdict is the comparisons' rule against the same margins
(TOST for `equivalent`; speed relative). Boots are independent servers, so boot-to-boot
variation cancels inside each difference and only within-boot noise and real drift remain.
Pure: takes the loaded frames, returns typed rows."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bench.stats.schema.strict_json import Frozen, Num


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
