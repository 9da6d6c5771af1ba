"""`specab plan`: boots per arm and prompts per boot from a measured results directory, and
a prior between-boot SD (with its df) read from an A/A results directory."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from bench.errors import SpecabError
from bench.records import ACCEPTANCE_METRICS, METRIC, PRIMARY_DEFAULT, REGISTRY, Results
from bench.stats.compare import arm_metrics, comparison_keys
from bench.stats.describe import (
    arm_components,
    plan_boots_and_prompts,
    pooled_components,
    pooled_sd,
)
from bench.stats.inputs import (
    AnalysisOptions,
    ArmData,
    Prior,
    arm_data,
    boot_values,
    check_prior_design,
    effect_scale,
    resolve_settings,
)
from bench.stats.methods import F, estimate
from bench.stats.schema import Plan, ScreenPlan
from bench.stats.screen import boots_one_harmful, screen_boots


def plan_from_results(
    results: Results,
    *,
    effect: float,
    metric: str = PRIMARY_DEFAULT[0],
    power: float = 0.8,
    alpha: float | None = None,
    source: str | None = None,
    screen_arms: int | None = None,
) -> Plan:
    """Boots per arm for `effect` at `power` (pooled between-boot SD over arms) and the
    Kalibera & Jones prompts per boot from measured boot_seconds and probe latency_s; with
    `screen_arms`, a screening of that many candidates sized for `effect` as its margin."""
    if metric not in PLANNABLE:
        raise SpecabError(
            f"unknown metric {metric!r}",
            field="metric",
            fix=f"use one of: {', '.join(PLANNABLE)}",
        )
    if not effect > 0:
        raise SpecabError(
            f"effect {effect!r} must be > 0",
            field="effect",
            fix="pass the smallest effect worth detecting, in metric units (e.g. 0.01 for pos0; "
            "0.05 = +5 % for tokens/s)",
        )
    if not 0 < power < 1:
        raise SpecabError(f"power {power!r} is out of range", field="power", fix="use e.g. 0.8")
    probes, boots, manifest = results.probes, results.boots, results.manifest
    arms = results.arms()
    s = resolve_settings(manifest, arms, AnalysisOptions(alpha=alpha), source)
    data = arm_data(probes, boots, arms, source).arms
    _possible(effect, metric, data)
    family = primary_family_size(data, s.baseline, s.primary)
    # Holm's first step tests at alpha / m: planned at the manifest's alpha, a run comparing
    # several arms fell short (the demo's fixes were inconclusive on one CPU at 3 boots)
    level = alpha if alpha is not None else s.alpha / family
    comps, counts = [], []
    for a in arms:
        cells = _cells(data[a], metric)
        if data[a].n_boots and cells is not None:  # no-speculation arms have no acceptance
            comps.append(arm_components(*cells, binomial=False))
            counts.append(data[a].n_boots)
    if not comps:
        raise SpecabError("no ok boots to plan from", file=source, fix="run some boots first")
    pooled = pooled_components(comps, counts)
    planned_effect = effect
    if METRIC[metric].relative:  # the comparison is Welch on log boot values
        pooled = pooled.model_copy(update={"between_boot_sd": _log_speed_sd(data, arms)})
        planned_effect = effect_scale(metric, effect)
    ok = boots[boots["status"] == "ok"]
    boot_cost = _mean(ok["boot_seconds"]) if "boot_seconds" in ok else None
    prompt_cost = _mean(probes["latency_s"]) if len(probes) else None
    per_boot = probes.groupby("boot_id").size() if len(probes) else pd.Series(dtype=int)
    prompts_now = int(per_boot.median()) if len(per_boot) else 0
    out = plan_boots_and_prompts(
        pooled,
        effect=planned_effect,
        alpha=level,
        power=power,
        prompts_now=prompts_now,
        boot_cost_s=boot_cost,
        prompt_cost_s=prompt_cost,
    )
    return out.model_copy(
        update={
            "effect": effect,
            "metric": metric,
            "family_size": family,
            "alpha_given": alpha is not None,
            "boots_measured": {a: data[a].n_boots for a in arms if data[a].speculative},
            "components": pooled,
            **(
                {"screening": _screen_plan(data, metric, effect, screen_arms, s.alpha, power)}
                if screen_arms
                else {}
            ),
        }
    )


def _screen_plan(
    data: Mapping[str, ArmData], metric: str, effect: float, n: int, alpha: float, power: float
) -> ScreenPlan:
    """A screening of n candidates: the pilot's boot-value SD (the test's own scale), sized
    by simulating harmless candidates through the screening rule."""
    values = [boot_values(ad, metric) for ad in data.values() if ad.n_boots >= 2]
    values = [v[np.isfinite(v)] for v in values]
    sd, _ = pooled_sd([float(v.std(ddof=1)) for v in values if v.size >= 2],
                      [float(v.size - 1) for v in values if v.size >= 2])  # fmt: skip
    margin, _ = METRIC[metric].margin_scale(effect)
    sized = screen_boots(sd or math.nan, margin, n, alpha, power)
    if sd is None or sized is None:
        raise SpecabError(
            "the pilot cannot size a screening: " + ("no arm has 2 ok boots" if sd is None
            else f"more than 200 boots per arm for an effect of {effect:g}"),
            field="arms", fix="plan from a pilot with 2+ boots per arm, or a larger --effect",
        )  # fmt: skip
    design, boots, cleared = sized
    return ScreenPlan(
        candidates=n, margin=effect, boot_value_sd=sd, looks=list(design.looks),
        cleared=cleared, boots_expected=boots, boots_fixed_design=(n + 1) * design.looks[-1],
        boots_one_harmful=boots_one_harmful(design, 4 * margin / sd),
    )  # fmt: skip


PLANNABLE = tuple(m.name for m in REGISTRY if m.plannable)


def _cells(ad: ArmData, metric: str) -> tuple[F, F] | None:
    """The (numerator, denominator) cells planned on: tokens and latency for speed."""
    if METRIC[metric].counts is None:
        if ad.completion is None or ad.latency is None:
            return None
        return ad.completion, ad.latency
    return ad.cells(metric) if ad.speculative else None


def _log_speed_sd(data: Mapping[str, ArmData], arms: Sequence[str]) -> float | None:
    """Between-boot SD of log tokens/s pooled over arms (what the speed comparison's Welch
    interval rests on)."""
    sds, dfs = [], []
    for a in arms:
        logs = np.log(data[a].speed())
        logs = logs[np.isfinite(logs)]
        if logs.size >= 2:
            sds.append(float(logs.std(ddof=1)))
            dfs.append(float(logs.size - 1))
    return pooled_sd(list(sds), dfs)[0] if sds else None


def _possible(effect: float, metric: str, data: Mapping[str, ArmData]) -> None:
    """An effect no arm could show (beyond the metric's range: pos0 within [0, 1], a mean
    accepted length within [1, 1 + K]) is refused: any plan for it would be a number without
    a meaning."""
    k = max((ad.positions for ad in data.values()), default=0)
    low, top = METRIC[metric].value_range(k)
    bound = top - low
    if math.isfinite(bound) and effect >= bound:
        with_k = f" with K = {k}" if METRIC[metric].upper == "positions" else ""
        raise SpecabError(
            f"effect {effect:g} is impossible for {metric} (it can move by less than "
            f"{bound:g}{with_k})",
            field="effect",
            fix="pass the smallest effect worth detecting, in metric units (e.g. 0.01 for pos0)",
        )


def primary_family_size(data: Mapping[str, ArmData], baseline: str, primary: Sequence[str]) -> int:
    """Comparisons in the primary Holm family, by the rule `analyze` builds it with."""
    others = [a for a in data if a != baseline]
    return max(len(comparison_keys(arm_metrics(data), baseline, others, primary)), 1)


def _mean(col: pd.Series) -> float | None:
    vals = pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64)
    vals = vals[np.isfinite(vals)]
    return float(vals.mean()) if vals.size else None


def prior_from_results(
    results: Results,
    *,
    source: str | None = None,
    target: Results | None = None,
) -> Prior:
    """Between-boot SD per primary metric pooled over the arms of an (A/A) results directory,
    with its degrees of freedom (sum over arms of min(B, B_eff) - 1), for 1-boot arms of a
    later run on the same setup and probe set. With `target` (the run it is lent to), a
    source of another design is refused (`check_prior_design`)."""
    design = check_prior_design(results, target, source) if target is not None else None
    arms = results.arms()
    data = arm_data(results.probes, results.boots, arms, source).arms
    sd: dict[str, float] = {}
    df: dict[str, float] = {}
    for m in ACCEPTANCE_METRICS:
        ests = [
            estimate(*data[a].totals(m))
            for a in arms
            if data[a].n_boots >= 2 and data[a].speculative
        ]
        pooled, dof = pooled_sd([float(e.sd) for e in ests], [float(e.df) for e in ests])
        if pooled is not None:
            sd[m], df[m] = pooled, dof
    if not sd:
        raise SpecabError(
            "no arm has 2 or more ok boots: no between-boot SD to carry over",
            file=source,
            field="prior",
            fix="point at an A/A run with at least 2 ok boots per arm",
        )
    if design is None:
        return Prior(sd, df, source)
    return Prior(sd, df, source, design.ok_boots, design.requests_per_boot)
