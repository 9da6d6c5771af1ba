"""The `comparisons` of an analysis: one typed `Comparison` per row of `families.family_rows`,
with the interval its verdict rests on, power, the resampling extras (acceptance metrics) and
the one-sentence why. A log-scale metric (speed) is computed on log boot values and reported
relative: difference and intervals as ratio - 1, plus the ratio and its interval."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bench.records import METRIC, too_few_boots
from bench.stats.compare.families import Row
from bench.stats.compare.primary import Primary
from bench.stats.compare.resampling import Extras, Wanted, resampling_extras
from bench.stats.compare.why import why
from bench.stats.describe import pooled_sd
from bench.stats.inputs import VerdictSettings, effect_scale, margin_for
from bench.stats.methods import VERDICTS, boots_needed, detectable, family
from bench.stats.schema import Comparison


def comparisons(
    prim: Primary,
    s: VerdictSettings,
    power: float,
    n_resamples: int,
    rng: np.random.Generator,
) -> tuple[list[Comparison], list[str]]:
    """Every row as a Comparison (resampling extras for the metrics the registry marks),
    and the notes they call for."""
    wanted = [
        None
        if not METRIC[r.metric].resampled
        or r.fam.deterministic[r.i]
        or r.fam.unreplicated[r.i]
        or r.fam.no_boots[r.i]
        else Wanted(s.baseline, r.arm, r.metric, float(r.fam.diff[r.i]), float(r.fam.df[r.i]))
        for r in prim.rows
    ]
    extras = resampling_extras(wanted, prim.data, prim.level, n_resamples, rng)
    out, notes = [], []
    for r, ex in zip(prim.rows, extras, strict=True):
        c = build_comparison(prim, r, s, power, ex)
        if c.deterministic:
            notes.append(f"{r.arm} vs {s.baseline}: deterministic on this probe set")
        out.append(c.model_copy(update={"why": explain(c, prim)}))
    notes += [duet_note(c) for c in out if c.pairing == "duet"]
    small = [c.permutation_min_p for c in out if c.permutation_min_p]
    if small and min(small) > prim.level / 4:
        notes.append(
            "permutation test: with these boot counts the smallest attainable p is "
            f"{min(small):.3g}"
        )
    return out, notes


def duet_note(c: Comparison) -> str:
    """Both widths of a speed comparison made within co-run groups, and what they mean."""
    paired = _f(c.ci_high) is not None and _f(c.ci_low) is not None
    lone = _f(c.ci_unpaired_high) is not None and _f(c.ci_unpaired_low) is not None
    if not (paired and lone):
        return f"speed of {c.arm} vs {c.baseline} compared within co-run groups (duets)"
    wp = float(c.ci_high) - float(c.ci_low)  # type: ignore[arg-type]
    wu = float(c.ci_unpaired_high) - float(c.ci_unpaired_low)  # type: ignore[arg-type]
    if wp <= 0:
        saved = ""
    elif wp < wu:
        saved = f"; unpaired, the same width would take ≈ {(wu / wp) ** 2:.1f}x the boots"
    else:
        saved = (
            "; here the pairing cost more than it saved (each group spends a df), and the "
            "verdict keeps it: pairing is fixed by the design before the data, and choosing "
            "the narrower interval after seeing both would overstate the confidence"
        )
    return (
        f"speed of {c.arm} vs {c.baseline} compared within co-run groups (boots measured at "
        f"once on one host): interval width {wp:.1%} against {wu:.1%} unpaired{saved}"
    )


def explain(c: Comparison, prim: Primary) -> str:
    if prim.before_first_look and not c.no_boots:
        return (
            f"{why(c, prim.level)} — but the sequential design has not reached its first "
            "look, so nothing is decided yet"
        )
    return why(c, prim.level)


def build_comparison(
    prim: Primary, r: Row, s: VerdictSettings, power: float, ex: Extras
) -> Comparison:
    """One arm against the baseline on one metric, from its row of the family."""
    f, i, metric = r.fam, r.i, r.metric
    ei, ej = prim.est[s.baseline][metric], prim.est[r.arm][metric]
    det, unrep = bool(f.deterministic[i]), bool(f.unreplicated[i])
    relative = METRIC[metric].relative
    out = np.expm1 if relative else (lambda x: x)
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
        method += "_log" if relative else ""
    if det:
        vci, level, kind = (d, d), None, "exact"
    elif verdict == "equivalent":
        vci, level, kind = (float(f.lo2[i]), float(f.hi2[i])), 2 * r.level, "tost"
    else:
        vci = (float(f.v_lo[i]), float(f.v_hi[i]))
        sequential = prim.sequential and r.primary
        level, kind = float(f.level[i]), "holm_sequential" if sequential else "holm"
    need = None
    if det:
        need = 2
    elif sd is not None and not math.isnan(d):
        # at Holm's first step, alpha / m: what `specab plan` plans at, so both answer alike
        holm_first = s.alpha / max(len(f.diff), 1)
        need = boots_needed(sd, max(abs(d), effect_scale(metric, margin)), holm_first, power)
    return Comparison(
        arm=r.arm,
        baseline=s.baseline,
        metric=metric,
        difference=out(f.diff[i]),
        ci_low=out(f.lo[i]),
        ci_high=out(f.hi[i]),
        p_value=f.p[i],
        p_adjusted=f.p_adj[i],
        method=method,
        margin=margin,
        verdict=verdict,
        mde=float(out(detectable(f.se[i], f.df[i], r.level, power))) if not det else None,
        boots_needed=need,
        why="",
        verdict_ci=None if math.isnan(vci[0]) else (out(vci[0]), out(vci[1])),
        verdict_ci_level=level,
        verdict_ci_kind=kind if not math.isnan(vci[0]) else None,
        se=f.se[i],
        df=f.df[i],
        tost_ci=None if math.isnan(f.lo2[i]) else (out(f.lo2[i]), out(f.hi2[i])),
        unreplicated=unrep,
        deterministic=det,
        no_boots=bool(f.no_boots[i]),
        too_few_boots=not det
        and not bool(f.no_boots[i])
        and (
            too_few_boots(ei.boots, prior=ei.prior_used)
            or too_few_boots(ej.boots, prior=ej.prior_used)
        ),
        between_boot_sd=sd,
        permutation_p=ex.permutation_p,
        permutation_min_p=ex.permutation_min_p,
        permutation_exact=ex.permutation_exact,
        bootstrap_ci=ex.bootstrap_ci,
        new_prompts_ci=ex.new_prompts_ci,
        family="primary" if r.primary else "secondary",
        scale="relative" if relative else "absolute",
        ratio=np.exp(f.diff[i]) if relative else None,
        ratio_ci_low=np.exp(f.lo[i]) if relative else None,
        ratio_ci_high=np.exp(f.hi[i]) if relative else None,
        **_pairing(prim, r, s, out),
    )


def _pairing(prim: Primary, r: Row, s: VerdictSettings, out: Any) -> dict[str, Any]:
    """A paired metric (speed): whether it was compared within co-run groups, and the
    unpaired raw interval."""
    if not METRIC[r.metric].paired:
        return {}
    ei, ej = prim.est[s.baseline][r.metric], prim.est[r.arm][r.metric]
    plain = family([(ei, ej, margin_for(r.metric, s.margins[r.metric]))], r.level)
    paired = (r.arm, r.metric) in prim.paired
    return {
        "pairing": "duet" if paired else "none",
        "ci_unpaired_low": out(plain.lo[0]),
        "ci_unpaired_high": out(plain.hi[0]),
    }


def _f(x: Any) -> float | None:
    v = float(x)
    return v if math.isfinite(v) else None
