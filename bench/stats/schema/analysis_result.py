"""The whole `specab analyze --json` object (docs/results.md, schema_version 1): arms, comparisons
and variance components first (the contract's keys, in its order), then the additive keys. Its
`to_json()` is strict JSON (null, never NaN)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from bench.stats.schema.arm_result import ArmResult
from bench.stats.schema.comparison import Breakdown, Comparison, PositionComparison, Speedup
from bench.stats.schema.conditions import DriftEstimate, HostSummary, OutputParity, SharedMachine
from bench.stats.schema.selection_result import Selection
from bench.stats.schema.sequential_decision import Decision
from bench.stats.schema.strict_json import Frozen, Int
from bench.stats.schema.variance_components import VarianceComponents
from bench.stats.schema.which_change import Bisection, Screening


class PriorInfo(Frozen):
    between_boot_sd: dict[str, float] = Field(description="Metric -> prior SD.")
    df: dict[str, float] = Field(description="Metric -> its degrees of freedom.")
    source: str | None = Field(description="option, or the A/A results directory.")
    boots: Int | None = Field(None, description="Ok boots of the source run (null: an option).")
    requests_per_boot: float | None = Field(
        None, description="The source run's median requests per boot (this run's matched it)."
    )
    supplied: list[str] = Field(
        default_factory=list,
        description="Arms whose between-boot SD the prior supplied (their 1-boot estimates).",
    )


class AnalysisSettings(Frozen):
    n_resamples: Int = Field(description="Resamples of the resampling parts.")
    seed: Int = Field(description="Their seed.")
    power: float = Field(description="Power for mde and boots_needed.")
    prior: PriorInfo | None = Field(None, description="Prior between-boot SD, if any.")


class Analysis(Frozen):
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
    shared_machine: SharedMachine | None = Field(
        None, description="Boots that measured speed while another boot ran on their host."
    )
    bisection: Bisection | None = Field(
        None, description="Where the metric changed along the history, for [bisect]."
    )
    excluded_boots: list[str] = Field(
        default_factory=list,
        description="Boot ids left out by `analyze --exclude-boot` (every figure above rests "
        "on the other boots).",
    )
    screening: Screening | None = Field(
        None, description="Each candidate against the baseline, one-sided, for [screen]."
    )
    parity: list[OutputParity] = Field(
        default_factory=list,
        description="Each served arm's output tokens against each reference arm's (T = 0).",
    )

    def to_json(self) -> dict[str, Any]:
        """The strict-JSON object `analyze --json` prints."""
        return self.model_dump(mode="json")

    def arm(self, name: str) -> ArmResult | None:
        return next((a for a in self.arms if a.arm == name), None)
