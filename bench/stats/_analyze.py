"""The statistics engine: `analyze` returns the typed `analyze --json` object (`Analysis`).

Pure functions of the loaded frames (no I/O, no printing). Method: STATISTICS.md. The boot
is the unit of replication; ratio of sums within boot; Welch intervals on jackknife
(leverage-robust) boot SEs; Holm across the primary family (each arm vs baseline x {pos0,
mean length}); each verdict rests on the Holm-compatible interval it quotes (`verdict_ci`).
With sequential looks the family is the one the design decided at the look reached.
Additive keys beyond DESIGN.md are described on the models (`bench.stats._models`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from bench.records import METRICS
from bench.stats._core import VERDICTS, boots_needed, detectable
from bench.stats._data import Dataset, failed_counts
from bench.stats._decide import Primary, prepare, primary
from bench.stats._extras import Extras, Wanted, resampling_extras
from bench.stats._models import (
    Analysis,
    AnalysisSettings,
    Comparison,
    PriorInfo,
)
from bench.stats._parts import arm_result, components, position_comparisons
from bench.stats._settings import Prior, Settings
from bench.stats._text import why
from bench.stats._variance import pooled_sd

COMPARISON_KEYS = tuple(list(Comparison.model_fields)[:13])
BEFF_WARN = 0.75  # warn when Kish effective boots fall below this share of the boots


def analyze(
    probes: pd.DataFrame,
    boots: pd.DataFrame,
    manifest: Mapping[str, Any],
    *,
    baseline: str | None = None,
    alpha: float | None = None,
    margin_pos0: float | None = None,
    margin_length: float | None = None,
    prior: Prior | None = None,
    looks: Sequence[int] | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    power: float = 0.8,
    source: str | None = None,
) -> Analysis:
    """The analysis of loaded results (only status == "ok" boots count)."""
    arms, s, ds = prepare(
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
    return analyze_data(
        ds,
        arms,
        s,
        prior or Prior(),
        failed=failed_counts(boots, arms),
        experiment=str(manifest.get("experiment", "")),
        n_resamples=n_resamples,
        seed=seed,
        power=power,
    )


def analyze_data(
    ds: Dataset,
    arms: list[str],
    s: Settings,
    prior: Prior,
    *,
    failed: Mapping[str, int],
    experiment: str = "",
    n_resamples: int = 10_000,
    seed: int = 0,
    power: float = 0.8,
) -> Analysis:
    """Everything `analyze` reports, from per-arm count arrays."""
    data = ds.arms
    notes = list(ds.notes)
    prim, decision = primary(data, arms, s, prior)
    arm_entries = [arm_result(data[a], s.alpha, prior, failed.get(a, 0)) for a in arms]
    for e in arm_entries:
        if e.boots == 1:
            notes.append(f"arm {e.arm}: 1 boot (unreplicated): no between-boot variance")
        elif e.boots == 0:
            notes.append(f"arm {e.arm}: no ok boots")
        elif e.effective_boots is not None and e.effective_boots < BEFF_WARN * e.boots:
            notes.append(
                f"arm {e.arm}: unequal work per boot: {e.effective_boots:.1f} effective boots "
                f"of {e.boots} (Kish, by drafts); its intervals use a jackknife SE and "
                f"{max(e.effective_boots - 1, 0):.1f} df, so they are wider: rerun boots with "
                "the same probes and max_tokens to recover the power"
            )
    if {e.positions for e in arm_entries if e.boots} == {1}:
        notes.append(
            "one speculative token: mean accepted length is 1 + pos0, so the two primary "
            "comparisons are one test counted twice (Holm is conservative here)"
        )
    comps = _comparisons(prim, s, power, n_resamples, np.random.default_rng(seed), notes)
    if decision is not None:
        n = decision.looks[(decision.look or 1) - 1]
        notes.append(
            f"sequential design: comparisons use the first {n} boots per arm at the look's "
            f"nominal alpha {prim.level:.3g} ({decision.action})"
        )
    return Analysis(
        experiment=experiment,
        alpha=s.alpha,
        arms=arm_entries,
        comparisons=comps,
        variance_components=components(data, arms),
        baseline=s.baseline,
        margins=s.margins,
        compared_probes=ds.compared_probes,
        per_position_comparisons=position_comparisons(data, arms, s),
        sequential=decision,
        settings=AnalysisSettings(
            n_resamples=n_resamples,
            seed=seed,
            power=power,
            prior=PriorInfo(between_boot_sd=dict(prior.sd), df=dict(prior.df), source=prior.source)
            if prior.sd
            else None,
        ),
        notes=list(dict.fromkeys(notes)),
    )


def _comparisons(
    prim: Primary,
    s: Settings,
    power: float,
    n_resamples: int,
    rng: np.random.Generator,
    notes: list[str],
) -> list[Comparison]:
    f = prim.fam
    keys = [(a, m) for a in prim.others for m in METRICS]
    wanted = [
        None
        if f.deterministic[i] or f.unreplicated[i] or f.no_boots[i]
        else Wanted(s.baseline, a, m, float(f.diff[i]), float(f.df[i]))
        for i, (a, m) in enumerate(keys)
    ]
    extras = resampling_extras(wanted, prim.data, prim.level, n_resamples, rng)
    out = []
    for i, (a, m) in enumerate(keys):
        c = _one(prim, i, a, m, s, power, extras[i])
        if c.deterministic:
            notes.append(f"{a} vs {s.baseline}: deterministic on this probe set")
        out.append(c.model_copy(update={"why": _why(c, prim)}))
    small = [c.permutation_min_p for c in out if c.permutation_min_p]
    if small and min(small) > prim.level / 4:
        notes.append(
            "permutation test: with these boot counts the smallest attainable p is "
            f"{min(small):.3g}"
        )
    return out


def _why(c: Comparison, prim: Primary) -> str:
    if prim.before_first_look and not c.no_boots:
        return (
            f"{why(c, prim.level)} — but the sequential design has not reached its first "
            "look, so nothing is decided yet"
        )
    return why(c, prim.level)


def _one(
    prim: Primary, i: int, arm: str, metric: str, s: Settings, power: float, ex: Extras
) -> Comparison:
    f = prim.fam
    ei, ej = prim.est[s.baseline][metric], prim.est[arm][metric]
    det, unrep = bool(f.deterministic[i]), bool(f.unreplicated[i])
    margin = s.margins[metric]
    d = float(f.diff[i])
    sd, _ = pooled_sd([_f(ei.sd), _f(ej.sd)], [_f(ei.df) or 0.0, _f(ej.df) or 0.0])
    code = int(f.code[i])
    if prim.before_first_look:
        code = VERDICTS.index("inconclusive")
    verdict = VERDICTS[code]
    if det or unrep or bool(f.no_boots[i]):
        method = "deterministic" if det else "unreplicated"
    else:
        method = "welch_prior_sd" if (ei.prior_used or ej.prior_used) else "welch"
    if det:
        vci, level, kind = (d, d), None, "exact"
    elif verdict == "equivalent":
        vci, level, kind = (float(f.lo2[i]), float(f.hi2[i])), 2 * prim.level, "tost"
    else:
        vci = (float(f.v_lo[i]), float(f.v_hi[i]))
        level, kind = float(f.level[i]), "holm_sequential" if prim.sequential else "holm"
    need = None
    if det:
        need = 2
    elif sd is not None and not math.isnan(d):
        need = boots_needed(sd, max(abs(d), margin), s.alpha, power)
    return Comparison(
        arm=arm,
        baseline=s.baseline,
        metric=metric,
        difference=f.diff[i],
        ci_low=f.lo[i],
        ci_high=f.hi[i],
        p_value=f.p[i],
        p_adjusted=f.p_adj[i],
        method=method,
        margin=margin,
        verdict=verdict,
        mde=float(detectable(f.se[i], f.df[i], prim.level, power)) if not det else None,
        boots_needed=need,
        why="",
        verdict_ci=None if math.isnan(vci[0]) else vci,
        verdict_ci_level=level,
        verdict_ci_kind=kind if not math.isnan(vci[0]) else None,
        se=f.se[i],
        df=f.df[i],
        tost_ci=None if math.isnan(f.lo2[i]) else (f.lo2[i], f.hi2[i]),
        unreplicated=unrep,
        deterministic=det,
        no_boots=bool(f.no_boots[i]),
        between_boot_sd=sd,
        permutation_p=ex.permutation_p,
        permutation_min_p=ex.permutation_min_p,
        permutation_exact=ex.permutation_exact,
        bootstrap_ci=ex.bootstrap_ci,
        new_prompts_ci=ex.new_prompts_ci,
    )


def _f(x: Any) -> float | None:
    v = float(x)
    return v if math.isfinite(v) else None
