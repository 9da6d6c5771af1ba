"""Variance components and planning (docs/statistics.md).

Per arm and metric: the between-boot SD (jackknife SE x sqrt(B_eff): what the intervals
use), the binomial floor sqrt(R(1-R)/D) for pos0 and the overdispersion ratio
(between-boot variance / binomial variance), a two-way crossed ANOVA on the cells
Y_bp = N_bp / D_bp (boots x prompts, one cell each, so residual = interaction + noise) giving
sigma2_boot, sigma2_prompt, sigma2_res and ICCs, and the design effect: (boot-level SE /
naive SE that treats every boot x prompt cell as independent)^2.

Planning: boots per arm for a target power from the pooled between-boot SD, and prompts per
boot P* = sqrt((c_boot / c_prompt) * sigma2_res / sigma2_boot) (Kalibera & Jones 2013):
extra prompts shrink only the sigma2_res / P part of a boot's variance, never sigma2_boot.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from bench.records import ACCEPTANCE_METRICS, METRIC
from bench.stats.inputs import ArmData
from bench.stats.methods import arm_stats, boots_needed
from bench.stats.schema import (
    ArmComponents,
    Plan,
    PooledComponents,
    VarianceComponents,
)

F = NDArray[np.float64]


def crossed_anova(y: F) -> dict[str, float | None]:
    """Method-of-moments components of y (B, P) = mu + boot + prompt + residual."""
    b, p = y.shape
    if b < 2 or p < 2:
        return {"sigma2_boot": None, "sigma2_prompt": None, "sigma2_res": None}
    grand = y.mean()
    rb, cp = y.mean(axis=1), y.mean(axis=0)
    ms_boot = p * np.sum((rb - grand) ** 2) / (b - 1)
    ms_prompt = b * np.sum((cp - grand) ** 2) / (p - 1)
    resid = y - rb[:, None] - cp[None, :] + grand
    ms_res = np.sum(resid**2) / ((b - 1) * (p - 1))
    # Rounding residue (identical boots give ~1e-32, not 0) would look like a real component.
    tiny = 1e-12 * max(float(y.var()), 1e-300)

    def clip(v: float) -> float:
        return float(v) if v > tiny else 0.0

    return {
        "sigma2_boot": clip((ms_boot - ms_res) / p),
        "sigma2_prompt": clip((ms_prompt - ms_res) / b),
        "sigma2_res": clip(ms_res),
    }


def arm_components(num: F, den: F, *, binomial: bool) -> ArmComponents:
    """Components for one arm and metric from cells num/den (B, P)."""
    b, _ = num.shape
    boot_num, boot_den = num.sum(axis=1), den.sum(axis=1)
    s = arm_stats(boot_num, boot_den)
    sd = float(s.sd) if b >= 2 else None
    floor = over = None
    if binomial:
        r = float(s.ratio)
        floor = math.sqrt(max(r * (1.0 - r), 0.0) / float(boot_den.mean()))
        over = (sd / floor) ** 2 if sd is not None and floor > 0 else None
    complete = np.all(den > 0, axis=0)  # prompts with drafts in every boot of this arm
    comp = crossed_anova(num[:, complete] / den[:, complete])
    total = float(sum(v for v in comp.values() if v is not None))

    def icc(key: str) -> float | None:
        v = comp[f"sigma2_{key}"]
        return v / total if v is not None and total > 0 else None

    # Naive SE: every (boot, prompt) cell taken as an independent replicate.
    cell_z = (num - s.ratio * den) / den.mean()
    naive = float(cell_z.std(ddof=1) / math.sqrt(cell_z.size)) if cell_z.size > 1 else 0.0
    boot_se = float(s.se) if b >= 2 else None
    return ArmComponents(
        between_boot_sd=sd,
        effective_boots=float(s.b_eff),
        binomial_floor_sd=floor,
        overdispersion=over,
        **comp,
        icc_boot=icc("boot"),
        icc_prompt=icc("prompt"),
        boot_se=boot_se,
        naive_se=naive,
        design_effect=(boot_se / naive) ** 2 if boot_se is not None and naive > 0 else None,
        prompts=int(complete.sum()),
    )


def pooled_sd(sds: list[float | None], dfs: list[float]) -> tuple[float | None, float]:
    """Pooled between-boot SD over arms (weights: each arm's df) and its degrees of freedom."""
    num, df = 0.0, 0.0
    for sd, d in zip(sds, dfs, strict=True):
        if sd is not None and math.isfinite(sd) and d > 0 and math.isfinite(d):
            num += d * sd * sd
            df += d
    return (math.sqrt(num / df), df) if df else (None, 0.0)


def pooled_components(per_arm: list[ArmComponents], boots: list[int]) -> PooledComponents:
    """Components pooled over arms (df-weighted mean of each variance)."""
    sd, df = pooled_sd([c.between_boot_sd for c in per_arm], [b - 1.0 for b in boots])
    parts: dict[str, float | None] = {}
    for key in ("sigma2_boot", "sigma2_prompt", "sigma2_res"):
        vals = [(getattr(c, key), b) for c, b in zip(per_arm, boots, strict=True)]
        vals = [(v, b) for v, b in vals if v is not None]
        w = sum(b - 1 for _, b in vals)
        parts[key] = sum(v * (b - 1) for v, b in vals) / w if w else None
    return PooledComponents(between_boot_sd=sd, df=df, **parts)


def plan_boots_and_prompts(
    pooled: PooledComponents,
    *,
    effect: float,
    alpha: float,
    power: float,
    prompts_now: int,
    boot_cost_s: float | None,
    prompt_cost_s: float | None,
) -> Plan:
    """Boots per arm for `effect` at `power`, and the Kalibera & Jones prompts per boot."""
    sd = pooled.between_boot_sd
    out: dict[str, Any] = {
        "effect": effect,
        "alpha": alpha,
        "power": power,
        "between_boot_sd": sd,
        "prompts_per_boot_now": prompts_now,
        "boots_per_arm": boots_needed(sd, effect, alpha, power) if sd is not None else None,
        "boot_cost_s": boot_cost_s,
        "prompt_cost_s": prompt_cost_s,
        "prompts_per_boot": None,
        "boots_per_arm_at_optimum": None,
        "note": None,
    }
    s_boot, s_res = pooled.sigma2_boot, pooled.sigma2_res
    if sd is None:
        out["note"] = "no arm has 2 or more boots: between-boot SD unknown; run more boots"
        return Plan.model_validate(out)
    if sd == 0:
        out["note"] = (
            "every arm's boots are identical (deterministic on this probe set): 2 boots per "
            "arm confirm it; more prompts only help the would-it-hold-on-new-prompts question"
        )
        return Plan.model_validate(out)
    if not boot_cost_s or not prompt_cost_s or s_boot is None or s_res is None:
        out["note"] = "costs or components unavailable: prompts per boot not computed"
        return Plan.model_validate(out)
    if s_boot <= 0:
        out["note"] = (
            "boot component not distinguishable from 0: more prompts per boot keep paying "
            "off (add prompts to the probe sets or raise probes.passes)"
        )
        return Plan.model_validate(out)
    p_star = math.sqrt((boot_cost_s / prompt_cost_s) * s_res / s_boot)
    out["prompts_per_boot"] = max(1, round(p_star))
    # Scale the measured boot variance to P* prompts: sigma2_boot + sigma2_res / P, in the
    # measured metric's units (the cell ANOVA is unweighted, so use it only as a ratio).
    v_now = s_boot + s_res / max(prompts_now, 1)
    v_star = s_boot + s_res / out["prompts_per_boot"]  # the whole prompts a boot will run
    sd_star = sd * math.sqrt(v_star / v_now)
    out["between_boot_sd_at_optimum"] = sd_star
    n_star = boots_needed(sd_star, effect, alpha, power)
    out["boots_per_arm_at_optimum"] = n_star
    # Machine time per arm, so the two allocations can be compared directly.
    n_now = out["boots_per_arm"]
    if n_now is not None:
        out["seconds_per_arm_now"] = n_now * (boot_cost_s + prompts_now * prompt_cost_s)
    if n_star is not None:
        p_int = out["prompts_per_boot"]
        out["seconds_per_arm_at_optimum"] = n_star * (boot_cost_s + p_int * prompt_cost_s)
    now_s, opt_s = out.get("seconds_per_arm_now"), out.get("seconds_per_arm_at_optimum")
    if now_s is not None and (opt_s is None or opt_s >= now_s):
        # whole boots can make P* dearer than today's allocation: today's is the optimum then
        out.update(
            prompts_per_boot=prompts_now,
            boots_per_arm_at_optimum=n_now,
            between_boot_sd_at_optimum=sd,
            seconds_per_arm_at_optimum=now_s,
            note="today's prompts per boot already cost the least machine time per arm",
        )
    elif out["prompts_per_boot"] > prompts_now:
        out["note"] = (
            f"the optimum runs {out['prompts_per_boot']} prompts per boot and a boot now runs "
            f"{prompts_now}: add prompts to the probe sets or raise probes.passes"
        )
    return Plan.model_validate(out)


def components(data: dict[str, ArmData], arms: list[str]) -> VarianceComponents:
    per_arm: dict[str, dict[str, ArmComponents]] = {}
    pooled = {}
    for m in ACCEPTANCE_METRICS:
        comps, boots = [], []
        for a in arms:
            if data[a].n_boots == 0 or not data[a].speculative:
                continue
            comp = arm_components(*data[a].cells(m), binomial=METRIC[m].binomial)
            per_arm.setdefault(a, {})[m] = comp
            comps.append(comp)
            boots.append(data[a].n_boots)
        pooled[m] = pooled_components(comps, boots) if comps else None
    return VarianceComponents(
        per_arm=per_arm,
        pooled=pooled,
        units="between_boot_sd in metric units (SD of one boot of average work); sigma2_* from "
        "a crossed boots x prompts ANOVA on per-cell ratios; design_effect = (boot-level SE / "
        "naive cell-level SE)^2",
    )
