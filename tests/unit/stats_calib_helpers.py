"""Calibration helpers: simulated boot totals pushed through the product's own functions
(`bench.stats.methods`: `estimate`, `family`, `look_decision`), many
replicates at once on a leading axis. Nothing here re-implements a statistic."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from bench.records import METRICS
from bench.simulate import HeldFixed, PromptSet, SimParams, simulate_boot_totals
from bench.stats.methods import Est, Family, estimate, family, look_decision, obf_boundaries

F = NDArray[np.float64]
Totals = dict[str, tuple[F, F]]  # metric -> (numerator, denominator), each (R, arms, B)


def metric_totals(drafts: NDArray[np.int64], acc: NDArray[np.int64]) -> Totals:
    """(numerator, denominator) boot totals (R, arms, B) of both primary metrics."""
    d = drafts.astype(np.float64)
    return {
        "acceptance_pos0": (acc[..., 0].astype(np.float64), d),
        "mean_accepted_length": (acc.sum(axis=-1).astype(np.float64), d),
    }


def simulate(
    rng: np.random.Generator,
    deltas: list[float],
    boots: int,
    replicates: int,
    *,
    prompts: int = 100,
    params: SimParams = SimParams(),
    prompt_set: PromptSet | None = None,
) -> Totals:
    drafts, acc = simulate_boot_totals(
        rng, deltas, boots, prompts, params, replicates, chunk=250, held=HeldFixed(prompt_set)
    )
    return metric_totals(drafts, acc)


def arm_estimates(m: Totals, arm: int, n: int | None = None) -> dict[str, Est]:
    """The product's estimate of every metric for one arm (first n boots)."""
    return {k: estimate(num[:, arm, :n], den[:, arm, :n]) for k, (num, den) in m.items()}


def compare_one(m: Totals, metric: str, i: int, j: int, alpha: float) -> Family:
    """A family of one comparison (j vs i on one metric): the raw interval decides."""
    num, den = m[metric]
    return family([(estimate(num[:, i], den[:, i]), estimate(num[:, j], den[:, j]), 0.01)], alpha)


def primary_family(m: Totals, arms: int, alpha: float, margins: dict[str, float]) -> Family:
    """Arms 1.. vs arm 0 on both metrics, Holm across them (the primary family)."""
    est = [arm_estimates(m, a) for a in range(arms)]
    pairs = [(est[0][k], est[a][k], margins[k]) for a in range(1, arms) for k in METRICS]
    return family(pairs, alpha)


def sequential_run(
    m: Totals, looks: tuple[int, ...], alpha: float, margins: dict[str, float]
) -> tuple[NDArray[np.bool_], F]:
    """The run-ab driver's loop over looks (take each look once, stop at the first "stop"),
    each look decided by the product's `look_decision`. Per replicate: did the design stop
    with a difference claim, and the boots per arm it used."""
    _, nominal = obf_boundaries(looks, alpha)
    n_rep = next(iter(m.values()))[0].shape[0]
    stopped = np.zeros(n_rep, dtype=bool)
    claimed = np.zeros(n_rep, dtype=bool)
    used = np.full(n_rep, float(looks[-1]))
    for i, n in enumerate(looks):
        est = [arm_estimates(m, 0, n), arm_estimates(m, 1, n)]
        _, status, stop = look_decision(est, METRICS, margins, nominal[i], i == len(looks) - 1)
        now = stop & ~stopped
        claimed |= now & (status == 0).any(axis=-1)
        used[now] = n
        stopped |= now
    return claimed, used


def mcse(p: float, n: int) -> float:
    return float(np.sqrt(p * (1.0 - p) / n))
