"""Analysis settings: options over the manifest's experiment section, and a prior between-boot
SD from an earlier A/A run.

Errors name the setting neutrally (`baseline`, `alpha`, `margins.acceptance_pos0`, `looks`,
`prior.between_boot_sd`, `prior.df`) when it came from the caller, and the manifest field
(`experiment.baseline`, ...) when it came from there; `bench.commands` turns the neutral
names into the flags the user typed, so a report after `run-ab` never blames a flag.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from bench.errors import SpecabError
from bench.records import (
    ACCEPTANCE_METRICS,
    ALL_METRICS,
    DEFAULT_MARGINS,
    METRIC,
    PRIMARY_DEFAULT,
    Manifest,
)
from bench.stats.methods import Margin

DEFAULT_ALPHA = 0.05  # the level when neither the caller nor the experiment sets one


@dataclass(frozen=True)
class Prior:
    """Between-boot SD per metric measured in an earlier A/A run of the same setup, with its
    degrees of freedom (an A/A run of B0 boots per arm over A arms gives A (B0 - 1))."""

    sd: Mapping[str, float] = field(default_factory=dict)
    df: Mapping[str, float] = field(default_factory=dict)
    source: str | None = None
    boots: int | None = None  # ok boots of the source run (None: given as an option)
    requests_per_boot: float | None = None  # the source run's, checked against this run's

    @classmethod
    def from_values(cls, sd: float | Mapping[str, float] | None, df: float | None) -> Prior:
        """A single SD is pos0's; a mapping may give any acceptance metric's. The df is
        required: an SD from a few boots is itself uncertain, and df = inf would claim it is
        exact."""
        if sd is None:
            if df is not None:
                raise SpecabError(
                    "prior df given without a prior SD",
                    field="prior.df",
                    fix="give the SD too (prior between-boot SD), or use a prior from an A/A run",
                )
            return cls()
        items = {ACCEPTANCE_METRICS[0]: sd} if isinstance(sd, int | float) else dict(sd)
        for k, v in items.items():
            if k not in ACCEPTANCE_METRICS or not float(v) >= 0:
                raise SpecabError(
                    f"prior between-boot SD {k}={v!r} is invalid",
                    field="prior.between_boot_sd",
                    fix="pass X (pos0) or X,Y (pos0, mean length) with X, Y >= 0 from an A/A run",
                )
        if df is None or not float(df) > 0 or math.isinf(float(df)):
            raise SpecabError(
                f"a prior SD needs its degrees of freedom (got {df!r})",
                field="prior.df",
                fix="give df = arms x (boots per arm - 1) of the A/A run that measured it, "
                "or read SD and df from that run's results directory",
            )
        return cls(
            {k: float(v) for k, v in items.items()},
            dict.fromkeys(items, float(df)),
            "option",
        )


@dataclass(frozen=True)
class VerdictSettings:
    """What every verdict rests on, resolved once (`resolve_settings`): the caller's
    `AnalysisOptions` over the manifest's. The output records the resampling settings it
    ran with apart (`AnalysisSettings`, in `analyze --json`)."""

    baseline: str
    alpha: float
    margins: dict[str, float]  # every metric of ALL_METRICS
    looks: tuple[int, ...] | None
    primary: tuple[str, ...] = PRIMARY_DEFAULT  # the primary Holm family, registry order


def _where(option: str, given: bool, manifest_field: str) -> str:
    return option if given else manifest_field


def check_margin(metric: str, margin: float, *, file: str | None, field: str) -> None:
    """A margin is how much worse still counts as not worse: > 0, and a relative (speed)
    margin < 1; a SpecabError naming `field` otherwise."""
    relative = METRIC[metric].relative
    if not 0 < margin < (1 if relative else math.inf):
        raise SpecabError(
            f"margin {margin!r} must be > 0" + (" and < 1 (relative)" * relative),
            file=file,
            field=field,
            fix="use e.g. 0.02 (2 %)" if relative else "use a positive margin",
        )


@dataclass(frozen=True)
class AnalysisOptions:
    """What a caller asks of an analysis, over the results' own settings: one object through
    every entry point (`analyze`, `decide`, `split_arm`, the report, the end of a run). None
    takes the manifest's value (baseline, alpha, margins, looks); `by` adds the per-category
    (or per-probe-set) breakdown; resampling, seed and power shape the outputs only."""

    baseline: str | None = None
    alpha: float | None = None
    margins: Mapping[str, float] = field(default_factory=dict)  # metric -> margin given
    looks: Sequence[int] | None = None
    prior: Prior | None = None
    # category, probe_set, or prompt_tokens (quartile bins) / prompt_tokens:E1,E2,... (edges)
    by: str | None = None
    n_resamples: int = 10_000
    seed: int = 0
    power: float = 0.8
    exclude_boots: tuple[str, ...] = ()  # boot ids left out by the user (said in the output)
    # a boot drafting on a smaller share of its requests is kept out of acceptance (0: never)
    min_drafting_share: float = 0.5


def resolve_settings(
    manifest: Manifest, arms: list[str], options: AnalysisOptions, source: str | None = None
) -> VerdictSettings:
    """Options override the manifest; every bad value is a SpecabError naming its setting."""
    baseline, alpha, looks = options.baseline, options.alpha, options.looks
    exp = manifest.experiment_section()
    file = None if source is None else f"{source}/manifest.json"
    if not arms:
        raise SpecabError("no arms in this results directory", field="arms", fix="run boots first")
    base = baseline or manifest.baseline or exp.baseline or arms[0]
    if base not in arms:
        raise SpecabError(
            f"baseline {base!r} is not an arm",
            file=None if baseline else file,
            field=_where("baseline", bool(baseline), "experiment.baseline"),
            fix=f"use one of: {arms}",
        )
    a = next((x for x in (alpha, manifest.alpha, exp.alpha) if x is not None), DEFAULT_ALPHA)
    if not isinstance(a, int | float) or not 0 < float(a) < 0.5:
        raise SpecabError(
            f"alpha {a!r} is out of range",
            file=None if alpha is not None else file,
            field=_where("alpha", alpha is not None, "experiment.alpha"),
            fix="use a value in (0, 0.5)",
        )
    margins = dict(DEFAULT_MARGINS)
    margins.update(manifest.margins or exp.margins or {})
    for metric in ALL_METRICS:
        value = options.margins.get(metric)
        if value is not None:
            margins[metric] = value
        check_margin(
            metric,
            margins[metric],
            file=None if value is not None else file,
            field=_where(f"margins.{metric}", value is not None, f"experiment.margins.{metric}"),
        )
    lk = looks if looks is not None else (manifest.looks or exp.looks)
    look_t = tuple(int(x) for x in lk) if lk else None
    if look_t is not None and (look_t[0] < 2 or any(b <= a for a, b in pairwise(look_t))):
        raise SpecabError(
            f"looks {list(look_t)} must be strictly increasing boot counts >= 2",
            file=None if looks is not None else file,
            field=_where("looks", looks is not None, "experiment.looks"),
            fix="use e.g. 3,6,10",
        )
    return VerdictSettings(
        str(base),
        float(a),
        {m: float(margins[m]) for m in ALL_METRICS},
        look_t,
        _primary(manifest.primary_metrics or exp.primary_metrics, file),
    )


def _primary(listed: Any, file: str | None) -> tuple[str, ...]:
    """The primary family's metrics as the experiment declared them (default: acceptance)."""
    if listed is None:
        return PRIMARY_DEFAULT
    names = [listed] if isinstance(listed, str) else list(listed)
    if not names or any(n not in ALL_METRICS for n in names):
        raise SpecabError(
            f"primary_metrics {names!r} must list some of {list(ALL_METRICS)}",
            file=file,
            field="experiment.primary_metrics",
            fix=f"e.g. {list(ALL_METRICS[:3])}",
        )
    return tuple(m for m in ALL_METRICS if m in names)


def margin_for(metric: str, margin: float) -> Margin:
    """The margin on the scale the comparison is computed on."""
    down, up = METRIC[metric].margin_scale(margin)
    return (down, up) if METRIC[metric].relative else margin


def effect_scale(metric: str, x: float) -> float:
    """A reported effect (relative for speed) on the computation's scale (log for speed)."""
    return math.log1p(x) if METRIC[metric].relative else x
