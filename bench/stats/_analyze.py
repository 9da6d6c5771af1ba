"""The statistics engine: `analyze` returns DESIGN.md's `analyze --json` object (schema 1).

Pure functions of the loaded frames (no I/O, no printing). Method: STATISTICS.md. The boot
is the unit of replication; ratio of sums within boot; Welch intervals on linearized boot
values; Holm across the primary family (each arm vs baseline x {pos0, mean length}).

Additive keys beyond DESIGN.md (documented here; readers may ignore them):
- top level: `baseline`, `margins`, `notes` (list of sentences), `per_position_comparisons`
  (positions k >= 1, simultaneous max-|t| intervals), `sequential` (when looks are set),
  `settings` (n_resamples, seed, power).
- per arm metric: `se`, `df`, `unreplicated`, `prior_sd_used`; per position: `conditional`
  (sum A_k / sum A_{k-1}) and `simultaneous: true`.
- per comparison: `why` (one sentence), `se`, `df`, `tost_ci` (the 1 - 2 alpha interval),
  `unreplicated`, `deterministic`, `no_boots`, `between_boot_sd` (pooled over the pair),
  `permutation_p`/`permutation_min_p`/`permutation_exact` (B >= 4 per arm),
  `bootstrap_ci` (studentized cluster bootstrap, B >= 10 per arm), `new_prompts_ci`
  (pigeonhole bootstrap: would it hold on new prompts?).
`mde` is the effect this comparison detects with 80 % power; `boots_needed` is boots per arm
for 80 % power at max(|difference|, margin). Unavailable numbers are null, never NaN.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from bench.errors import SpecabError
from bench.stats._compare import ArmMetric, arm_metric, arm_metric_json, comparisons
from bench.stats._data import (
    METRICS,
    ArmData,
    Settings,
    arm_data,
    arm_names,
    failed_counts,
    resolve_settings,
)
from bench.stats._position import per_position, per_position_comparisons
from bench.stats._resample import (
    cluster_bootstrap,
    permutation_test,
    pigeonhole_interval,
    pigeonhole_ratios,
    pigeonhole_weights,
)
from bench.stats._sequential import Decision, decide_data
from bench.stats._text import clean, why
from bench.stats._variance import arm_components, pooled_components

PriorSD = float | Mapping[str, float] | None
COMPARISON_KEYS = (
    "arm",
    "baseline",
    "metric",
    "difference",
    "ci_low",
    "ci_high",
    "p_value",
    "p_adjusted",
    "method",
    "margin",
    "verdict",
    "mde",
    "boots_needed",
)


def _prior(value: PriorSD) -> dict[str, float]:
    """A single number is the pos0 SD; a mapping may give both metrics."""
    if value is None:
        return {}
    items = {"acceptance_pos0": value} if isinstance(value, int | float) else dict(value)
    for k, v in items.items():
        if k not in METRICS or not float(v) >= 0:
            raise SpecabError(
                f"prior between-boot SD {k}={v!r} is invalid",
                field="--prior-between-boot-sd",
                fix="pass X (pos0) or X,Y (pos0, mean length) with X, Y >= 0 from an A/A run",
            )
    return {k: float(v) for k, v in items.items()}


def _prepare(
    probes: pd.DataFrame,
    boots: pd.DataFrame,
    manifest: Mapping[str, Any],
    source: str | None,
    **opts: Any,
) -> tuple[list[str], Settings, dict[str, ArmData]]:
    arms = arm_names(manifest, boots)
    settings = resolve_settings(manifest, arms, **opts)
    return arms, settings, arm_data(probes, boots, arms, source)


def analyze(
    probes: pd.DataFrame,
    boots: pd.DataFrame,
    manifest: Mapping[str, Any],
    *,
    baseline: str | None = None,
    alpha: float | None = None,
    margin_pos0: float | None = None,
    margin_length: float | None = None,
    prior_between_boot_sd: PriorSD = None,
    looks: Sequence[int] | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    power: float = 0.8,
    source: str | None = None,
) -> dict[str, Any]:
    """The `analyze --json` object for loaded results (only status == "ok" boots count)."""
    arms, s, data = _prepare(
        probes,
        boots,
        manifest,
        source,
        baseline=baseline,
        alpha=alpha,
        margin_pos0=margin_pos0,
        margin_length=margin_length,
        looks=list(looks) if looks is not None else None,
    )
    prior = _prior(prior_between_boot_sd)
    result = analyze_data(data, arms, s, prior, n_resamples=n_resamples, seed=seed, power=power)
    failed = failed_counts(boots, arms)
    for entry in result["arms"]:
        entry["failed_boots"] = failed[entry["arm"]]
    result["experiment"] = str(manifest.get("experiment", ""))
    return clean(result)


def analyze_data(
    data: dict[str, ArmData],
    arms: list[str],
    s: Settings,
    prior: dict[str, float],
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    power: float = 0.8,
) -> dict[str, Any]:
    """Everything `analyze` reports, from per-arm count arrays."""
    notes: list[str] = []
    stats: dict[tuple[str, str], ArmMetric | None] = {
        (a, m): arm_metric(data[a], m, prior) for a in arms for m in METRICS
    }
    arm_entries = []
    for a in arms:
        ad = data[a]
        arm_entries.append(
            {
                "arm": a,
                "boots": ad.n_boots,
                "failed_boots": 0,
                "metrics": {
                    m: arm_metric_json(stats[(a, m)], m, s.alpha, ad.per_pos.shape[2])
                    for m in METRICS
                },
                "per_position": per_position(ad, s.alpha),
            }
        )
        if ad.n_boots == 1:
            notes.append(f"arm {a}: 1 boot (unreplicated): no between-boot variance")
        elif ad.n_boots == 0:
            notes.append(f"arm {a}: no ok boots")
    comps = comparisons(stats, arms, s.baseline, s.alpha, s.margins, power)
    rng = np.random.default_rng(seed)
    if n_resamples > 0:
        _resampling(comps, data, s.alpha, n_resamples, rng, notes)
    for i, c in enumerate(comps):
        c["between_boot_sd"] = c.pop("_between_boot_sd", None)
        c["why"] = why(c, s.alpha, c["between_boot_sd"])
        if c["deterministic"]:
            notes.append(f"{c['arm']} vs {c['baseline']}: deterministic on this probe set")
        comps[i] = {k: c[k] for k in COMPARISON_KEYS} | {
            k: v for k, v in c.items() if k not in COMPARISON_KEYS
        }
    return {
        "schema_version": 1,
        "experiment": "",
        "alpha": s.alpha,
        "baseline": s.baseline,
        "margins": s.margins,
        "arms": arm_entries,
        "comparisons": comps,
        "per_position_comparisons": per_position_comparisons(data, arms, s),
        "variance_components": _components(data, arms),
        "sequential": decide_data(data, arms, s, prior).to_dict() if s.looks else None,
        "settings": {"n_resamples": n_resamples, "seed": seed, "power": power},
        "notes": list(dict.fromkeys(notes)),
    }


def _resampling(
    comps: list[dict[str, Any]],
    data: dict[str, ArmData],
    alpha: float,
    n_resamples: int,
    rng: np.random.Generator,
    notes: list[str],
) -> None:
    """Permutation p, cluster-bootstrap and pigeonhole intervals, added to each comparison."""
    usable = [a for a, ad in data.items() if ad.n_boots >= 2]
    star: dict[tuple[str, str], np.ndarray[Any, Any]] = {}
    if usable:
        n_p = data[usable[0]].drafts.shape[1]
        wp, wb = pigeonhole_weights(n_p, [data[a].n_boots for a in usable], n_resamples, rng)
        for a, w in zip(usable, wb, strict=True):
            ad = data[a]
            nums = [ad.cells(m)[0] for m in METRICS]
            for m, r in zip(METRICS, pigeonhole_ratios(nums, ad.drafts, wp, w), strict=True):
                star[(a, m)] = r
    for c in comps:
        c.update(
            permutation_p=None,
            permutation_min_p=None,
            permutation_exact=None,
            bootstrap_ci=None,
            new_prompts_ci=None,
        )
        di, dj = data[c["baseline"]], data[c["arm"]]
        if c["difference"] is None or c["deterministic"]:
            continue
        ti, tj = di.totals(c["metric"]), dj.totals(c["metric"])
        if min(di.n_boots, dj.n_boots) >= 4:
            p, pmin, exact = permutation_test(*ti, *tj, n_resamples, rng)
            c.update(permutation_p=p, permutation_min_p=pmin, permutation_exact=exact)
        if min(di.n_boots, dj.n_boots) >= 10:
            c["bootstrap_ci"] = list(cluster_bootstrap(*ti, *tj, alpha, n_resamples, rng))
        key_i, key_j = (c["baseline"], c["metric"]), (c["arm"], c["metric"])
        if key_i in star and key_j in star and c["df"] is not None:
            diff_star = star[key_j] - star[key_i]
            c["new_prompts_ci"] = list(
                pigeonhole_interval(c["difference"], diff_star, c["df"], alpha)
            )
    small = [c for c in comps if c["permutation_min_p"] and c["permutation_min_p"] > alpha / 4]
    if small:
        notes.append(
            f"permutation test: with these boot counts the smallest attainable p is "
            f"{min(c['permutation_min_p'] for c in small):.3g}"
        )


def _components(data: dict[str, ArmData], arms: list[str]) -> dict[str, Any]:
    per_arm: dict[str, Any] = {}
    pooled: dict[str, Any] = {}
    for m in METRICS:
        comps, boots = [], []
        for a in arms:
            if data[a].n_boots == 0:
                continue
            comp = arm_components(*data[a].cells(m), binomial=m == "acceptance_pos0")
            per_arm.setdefault(a, {})[m] = comp
            comps.append(comp)
            boots.append(data[a].n_boots)
        pooled[m] = pooled_components(comps, boots) if comps else None
    return {
        "per_arm": per_arm,
        "pooled": pooled,
        "units": "between_boot_sd in metric units; sigma2_* from a crossed boots x prompts "
        "ANOVA on per-cell ratios; design_effect = (boot-level SE / naive cell-level SE)^2",
    }


def decide(
    probes: pd.DataFrame,
    boots: pd.DataFrame,
    manifest: Mapping[str, Any],
    looks: Sequence[int] | None = None,
    *,
    baseline: str | None = None,
    alpha: float | None = None,
    margin_pos0: float | None = None,
    margin_length: float | None = None,
    prior_between_boot_sd: PriorSD = None,
    source: str | None = None,
) -> Decision:
    """Sequential decision at the current look: stop (decided) or continue (add boots)."""
    arms, s, data = _prepare(
        probes,
        boots,
        manifest,
        source,
        baseline=baseline,
        alpha=alpha,
        margin_pos0=margin_pos0,
        margin_length=margin_length,
        looks=list(looks) if looks is not None else None,
    )
    if not s.looks:
        raise SpecabError(
            "no sequential looks planned", field="--looks", fix="pass e.g. --looks 3,6,10"
        )
    return decide_data(data, arms, s, _prior(prior_between_boot_sd))
