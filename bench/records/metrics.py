"""Every metric specab reports, defined once: its names, how it is computed from the counts,
its default margin and scale, and what it can be used for.

The analysis, the experiment file's margins, the CLI's `--margin METRIC=VALUE`, the console,
the report, the gate, sweeps, `plan` and MLflow iterate `REGISTRY`; none of them spells a
metric out. Adding a metric is one entry here plus its tests. The registry's order is the
order of the secondary Holm families, of table rows and of JSON keys: a new metric goes at the
end, so what older releases printed keeps its order.

A count metric's value for a set of requests is Σ numerator / Σ denominator over its
(boot, prompt) cells, plus `offset` (mean accepted length counts the target's own token, +1).
Speed is not a count metric: its boot value is Σ output tokens / Σ request seconds and it is
compared as a ratio (on log boot values).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

F = NDArray[np.float64]
# (numerator, denominator) cells from (drafts, accepted tokens, accepted at position 0) cells
CountCells = Callable[[F, F, F], tuple[F, F]]


def _pos0(drafts: F, accepted: F, pos0: F) -> tuple[F, F]:
    return pos0, drafts


def _per_draft(drafts: F, accepted: F, pos0: F) -> tuple[F, F]:
    return accepted, drafts


def _per_request(drafts: F, accepted: F, pos0: F) -> tuple[F, F]:
    """Each request with drafts weighs one: its own accepted tokens per draft step (NVIDIA
    specdec_bench's Average_AL); a request that never drafted has no length and no weight."""
    has = drafts > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(has, accepted / np.where(has, drafts, 1.0), 0.0)
    return np.asarray(share, dtype=np.float64), has.astype(np.float64)


class Metric(BaseModel):
    """One reported metric."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    name: str = Field(description="The key in `analyze --json`, margins and the CLI.")
    short: str = Field(description="How tables name it.")
    label: str = Field(description="Axis label of figures.")
    title: str = Field(description="Title of its figure panel.")
    unit: str = Field(description="Unit of its values ('' for a share).")
    description: str = Field(description="One sentence on what it measures.")
    scale: Literal["difference", "ratio"] = Field(
        description="difference: arm − baseline in the metric's units; ratio: arm / baseline, "
        "computed on log boot values and reported as ratio − 1."
    )
    default_margin: float = Field(
        gt=0, description="Pre-registered equivalence margin (relative for a ratio metric)."
    )
    offset: float = Field(0.0, description="Added to Σ numerator / Σ denominator.")
    counts: CountCells | None = Field(
        None, description="(numerator, denominator) cells from the draft counts; None: speed."
    )
    binomial: bool = Field(
        False, description="The numerator counts successes among denominator trials."
    )
    upper: Literal["one", "positions", "none"] = Field(
        "none", description="Its ceiling: 1, 1 + K (draft positions), or none."
    )
    digits: int = Field(4, description="Decimals its estimates are printed with.")
    primary_by_default: bool = Field(
        False, description="In the primary Holm family unless the experiment lists others."
    )
    resampled: bool = Field(
        False, description="Gets the permutation p and the new-prompts interval."
    )
    plannable: bool = Field(True, description="`specab plan` sizes a run for it.")
    paired: bool = Field(False, description="Compared within co-run groups (duets) if any.")
    gated: bool = Field(
        True,
        description="`specab gate` checks it by default (any other metric: when its margin is "
        "given with --margin).",
    )
    selectable: bool = Field(True, description="A sweep's objective can be it.")

    @property
    def acceptance(self) -> bool:
        """Computed from draft counts: only arms that speculate have it."""
        return self.counts is not None

    @property
    def relative(self) -> bool:
        return self.scale == "ratio"

    def margin_scale(self, margin: float) -> tuple[float, float]:
        """A margin on the scale comparisons are computed on, (below, above) zero: a ratio
        metric's relative margin m is -log(1 - m) for a decrease and log(1 + m) for an
        increase (a drop of m and a rise of m as ratios); others keep it on both sides."""
        if not self.relative:
            return margin, margin
        return -math.log1p(-margin), math.log1p(margin)

    def value_range(self, positions: int) -> tuple[float, float]:
        """The values it can take (an interval is cut there)."""
        top = {"one": 1.0, "positions": self.offset + positions, "none": float("inf")}
        return self.offset, top[self.upper]


REGISTRY: tuple[Metric, ...] = (
    Metric(
        name="acceptance_pos0",
        short="pos0",
        label="acceptance at position 0\n(accepted / drafts)",
        title="Acceptance at draft position 0",
        unit="",
        description="Share of draft steps whose first draft token was accepted.",
        scale="difference",
        default_margin=0.005,
        counts=_pos0,
        binomial=True,
        upper="one",
        primary_by_default=True,
        resampled=True,
    ),
    Metric(
        name="mean_accepted_length",
        short="mean length",
        label="mean accepted length\n(tokens per draft step)",
        title="Mean accepted length",
        unit="tokens",
        description="Tokens per draft step, the target's own included: 1 + accepted / drafts "
        "over every step (vLLM's /metrics and `vllm bench serve`).",
        scale="difference",
        default_margin=0.02,
        offset=1.0,
        counts=_per_draft,
        upper="positions",
        primary_by_default=True,
        resampled=True,
    ),
    Metric(
        name="output_tokens_per_s",
        short="tokens/s",
        label="output tokens/s",
        title="Output tokens/s",
        unit="tokens/s",
        description="Output tokens per second of request time, per boot.",
        scale="ratio",
        default_margin=0.02,
        digits=1,
        paired=True,
    ),
    Metric(
        name="request_mean_accepted_length",
        short="length/request",
        label="mean accepted length per request\n(each request weighs one)",
        title="Mean accepted length per request",
        unit="tokens",
        description="The mean over requests of each request's own 1 + accepted / drafts: a "
        "short request weighs as much as a long one (specdec_bench's Average_AL).",
        scale="difference",
        default_margin=0.02,
        offset=1.0,
        counts=_per_request,
        upper="positions",
        gated=False,  # a gate that passed before this metric existed passes alike
    ),
)
METRIC: Mapping[str, Metric] = MappingProxyType({m.name: m for m in REGISTRY})
ALL_METRICS: tuple[str, ...] = tuple(METRIC)
ACCEPTANCE_METRICS: tuple[str, ...] = tuple(m.name for m in REGISTRY if m.acceptance)
PRIMARY_DEFAULT: tuple[str, ...] = tuple(m.name for m in REGISTRY if m.primary_by_default)
DEFAULT_MARGINS: Mapping[str, float] = MappingProxyType(
    {m.name: m.default_margin for m in REGISTRY}
)
# The metric a no-speculation arm still has, compared with speculation for speedups, and
# paired within co-run groups: the one that is not computed from draft counts.
SPEED_METRIC: str = next(m.name for m in REGISTRY if not m.acceptance)


def short_name(metric: str) -> str:
    """A metric's table label; an unknown name (pos<k> of a breakdown) as it is."""
    m = METRIC.get(metric)
    return m.short if m is not None else metric
