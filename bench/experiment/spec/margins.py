"""The experiment file's verdict settings that the statistics read: the pre-registered margins
and which metrics form the primary Holm family (metric names and defaults: bench.records)."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from bench.records import ALL_METRICS, DEFAULT_MARGINS, METRICS, SPEED_METRIC

PrimaryMetric = Literal["acceptance_pos0", "mean_accepted_length", "output_tokens_per_s"]
PRIMARY_DEFAULT: tuple[PrimaryMetric, ...] = ("acceptance_pos0", "mean_accepted_length")
assert set(PRIMARY_DEFAULT) == set(METRICS) and set(get_args(PrimaryMetric)) == set(ALL_METRICS)


def _unique(metrics: list[PrimaryMetric]) -> list[PrimaryMetric]:
    if len(set(metrics)) != len(metrics):
        raise ValueError(
            f"primary_metrics {metrics} lists a metric twice; list each once, from "
            f"{list(ALL_METRICS)}"
        )
    return metrics


PrimaryMetrics = Annotated[list[PrimaryMetric], Field(min_length=1), AfterValidator(_unique)]


class Margins(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    acceptance_pos0: float = Field(
        DEFAULT_MARGINS["acceptance_pos0"],
        gt=0,
        description="Equivalence margin for acceptance at draft position 0.",
    )
    mean_accepted_length: float = Field(
        DEFAULT_MARGINS["mean_accepted_length"],
        gt=0,
        description="Equivalence margin for mean accepted length (tokens).",
    )
    output_tokens_per_s: float = Field(
        DEFAULT_MARGINS[SPEED_METRIC],
        gt=0,
        lt=1,
        description="Relative margin for output tokens/s: 0.02 = the arm/baseline ratio "
        "within 0.98..1.02 counts as no change that matters.",
    )
