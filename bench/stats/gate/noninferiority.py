"""A regression gate against a stored, trusted reference (`specab gate`): non-inferiority
on boot values, Welch on the two boot samples.

For each metric (higher is better: pos0 acceptance, mean accepted length, tokens/s) the new
run's boots are compared with the reference's: d = mean(new) − mean(ref) for acceptance,
d = mean(log new) − mean(log ref) for speed (a ratio, like `analyze`). L is the one-sided
(1 − α) lower bound of d with the Welch–Satterthwaite df. The gate **passes** when L > −Δ
(shown not worse than the reference by the margin Δ; for speed L > log(1 − Δ)): a new run
that is truly Δ worse passes with probability ≤ α, whatever B. It **fails** otherwise, and
says whether the boots show a regression (the upper bound below −Δ: `regressed`) or cannot
tell (`inconclusive`: too few boots or too much noise for that margin — with the boots per
side that would keep false failures at a true difference of 0 near α).

What a stored reference cannot rule out: everything that changed between the two runs
besides the patch (vLLM build, drivers, host, load) moves d too. The honest alternative is
an A/B with the reference configuration re-booted in the same run."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import numpy as np
from numpy.typing import NDArray

from bench.records import METRIC
from bench.stats.methods import F, interval, t_quantile, welch
from bench.stats.schema import GateCheck, GateVerdict


def gate_bounds(new: np.ndarray, ref: np.ndarray, alpha: float) -> tuple[F, F, F]:
    """Difference of means and its one-sided (1 - alpha) lower and upper Welch bounds, for
    boot values along the last axis (any batch axes in front: calibration runs many)."""
    se_a = np.std(new, axis=-1, ddof=1) / np.sqrt(new.shape[-1])
    se_b = np.std(ref, axis=-1, ddof=1) / np.sqrt(ref.shape[-1])
    se, df = welch(se_a, new.shape[-1] - 1, se_b, ref.shape[-1] - 1)
    d = new.mean(axis=-1) - ref.mean(axis=-1)
    lo, hi = interval(d, se, df, 2 * alpha)  # each end one-sided at 1 - alpha
    return d, lo, hi


def gate_verdicts(lo: F, hi: F, bound: float) -> NDArray[np.str_]:
    """pass where the lower bound clears -margin, regressed where even the upper does not."""
    return np.where(lo > bound, "pass", np.where(hi < bound, "regressed", "inconclusive"))


def boots_for_gate(sd: float, margin: float, alpha: float) -> int | None:
    """Boots per side so that a run with no true change fails with probability ≈ alpha:
    the smallest B with margin ≥ 2 t_(1-alpha, 2B-2) SD sqrt(2 / B)."""
    if not math.isfinite(sd) or sd <= 0 or margin <= 0:
        return None
    for b in range(2, 100_000):
        if margin >= 2 * float(t_quantile(1 - alpha, 2 * b - 2)) * sd * math.sqrt(2 / b):
            return b
    return None


def gate_check(
    new: Sequence[float],
    ref: Sequence[float],
    *,
    arm: str,
    reference_arm: str,
    metric: str,
    margin: float,
    alpha: float,
    relative: bool = False,
) -> GateCheck:
    """The non-inferiority check of one metric (see the module docstring). Needs >= 2 boots
    on each side: a single boot has no between-boot variance to test against."""
    a, b = np.asarray(new, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if relative:
        a, b = np.log(a), np.log(b)
    d, lo, hi = (float(x) for x in gate_bounds(a, b, alpha))
    bound = -(METRIC[metric].margin_scale(margin)[0] if relative else margin)
    verdict = cast(GateVerdict, str(gate_verdicts(np.array(lo), np.array(hi), bound)))
    sd = float(np.sqrt((np.var(a, ddof=1) + np.var(b, ddof=1)) / 2))
    need = boots_for_gate(sd, -bound, alpha)
    ma, mb = float(a.mean()), float(b.mean())
    show = (lambda v: math.expm1(v)) if relative else (lambda v: v)
    means = (math.exp(ma), math.exp(mb)) if relative else (ma, mb)
    return GateCheck(
        arm=arm,
        reference_arm=reference_arm,
        metric=metric,
        scale="relative" if relative else "absolute",
        reference=means[1],
        new=means[0],
        difference=show(d),
        lower_bound=show(lo),
        upper_bound=show(hi),
        margin=margin,
        boots_reference=len(b),
        boots_new=len(a),
        verdict=verdict,
        boots_needed=need,
    )
