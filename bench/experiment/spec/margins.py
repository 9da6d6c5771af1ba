"""The experiment file's verdict settings that the statistics read: the pre-registered margins
(one field per metric of the registry, `bench.records.metrics`) and which metrics form the
primary Holm family."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model

from bench.records import ALL_METRICS, METRIC, PRIMARY_DEFAULT, REGISTRY, SPEED_METRIC, Metric


def _unique(metrics: list[str]) -> list[str]:
    if len(set(metrics)) != len(metrics):
        raise ValueError(
            f"primary_metrics {metrics} lists a metric twice; list each once, from "
            f"{list(ALL_METRICS)}"
        )
    return metrics


# The registry's names as a Literal, so the file's schema and reference list them
if TYPE_CHECKING:
    MetricName = str
else:
    MetricName = Literal[ALL_METRICS]
PrimaryMetrics = Annotated[list[MetricName], Field(min_length=1), AfterValidator(_unique)]
__all__ = [
    "PRIMARY_DEFAULT", "Margins", "MetricName", "PrimaryMetrics", "check_measured",
    "check_relative_margin",
]  # fmt: skip


def check_measured(metric: str, undrafted: list[str], table: str, verb: str) -> None:
    """An acceptance metric needs drafts at every arm of a [bisect] or [screen]: `undrafted`
    arms run without speculative decoding, so their probes count none."""
    if METRIC[metric].acceptance and undrafted:
        raise ValueError(
            f"metric {metric!r} is not measured at {', '.join(undrafted[:3])}: it runs "
            "without speculative decoding, so its probes count no drafts; give every "
            f'{table} a drafter, or {verb} metric = "{SPEED_METRIC}"'
        )


def check_relative_margin(metric: str, margin: float | None, table: str) -> None:
    """A ratio metric's relative margin is a share of the baseline: 1 or more would be a
    drop to zero or below, which no ratio can take (its log is undefined)."""
    if margin is not None and METRIC[metric].relative and margin >= 1:
        raise ValueError(
            f"{table} margin = {margin:g} for {metric} is a relative drop of "
            f"{margin:.0%}: a ratio cannot fall that far; give a share below 1 "
            "(e.g. 0.05 for 5 %)"
        )


def _margin_field(m: Metric) -> Any:
    name = m.title[0].lower() + m.title[1:]
    what = (
        f"Relative margin for {name}: {m.default_margin:g} = the arm/baseline ratio within "
        f"{1 - m.default_margin:g}..{1 + m.default_margin:g} counts as no change that matters."
        if m.relative
        else f"Equivalence margin for {name}" + (f" ({m.unit})." if m.unit else ".")
    )
    return (float, Field(m.default_margin, gt=0, lt=1 if m.relative else None, description=what))


if TYPE_CHECKING:

    class Margins(BaseModel):
        def __init__(self, **margins: float) -> None: ...

else:
    Margins = create_model(
        "Margins",
        __config__=ConfigDict(extra="forbid", frozen=True, strict=True),
        __doc__="Pre-registered margins, one per metric.",
        **{m.name: _margin_field(m) for m in REGISTRY},
    )
