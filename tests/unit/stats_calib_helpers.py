"""Vectorized calibration helpers: the same core functions `analyze` uses, applied to many
simulated experiments at once (leading axis = replicate)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from bench.stats._core import arm_stats, compare
from bench.stats.simulate import PromptSet, SimParams, simulate_boot_totals

F = NDArray[np.float64]


def metric_totals(drafts: NDArray[np.int64], acc: NDArray[np.int64]) -> dict[str, tuple[F, F]]:
    """(numerator, denominator) boot totals (R, arms, B) of both primary metrics."""
    d = drafts.astype(np.float64)
    return {
        "acceptance_pos0": (acc[..., 0].astype(np.float64), d),
        "mean_accepted_length": (acc.sum(axis=-1).astype(np.float64), d),
    }


def compare_arms(num: F, den: F, i: int, j: int, alpha: float) -> dict[str, F]:
    """Welch comparison j - i for every replicate (num/den: (R, arms, B))."""
    ri, sei, _, dfi = arm_stats(num[:, i], den[:, i])
    rj, sej, _, dfj = arm_stats(num[:, j], den[:, j])
    return compare(ri, sei, dfi, rj, sej, dfj, alpha)


def simulate(
    rng: np.random.Generator,
    deltas: list[float],
    boots: int,
    replicates: int,
    *,
    prompts: int = 100,
    params: SimParams = SimParams(),
    prompt_set: PromptSet | None = None,
) -> dict[str, tuple[F, F]]:
    drafts, acc = simulate_boot_totals(
        rng, deltas, boots, prompts, params, replicates, chunk=250, prompt_set=prompt_set
    )
    return metric_totals(drafts, acc)


def mcse(p: float, n: int) -> float:
    return float(np.sqrt(p * (1.0 - p) / n))


def sequential_run(
    m: dict[str, tuple[F, F]],
    looks: tuple[int, ...],
    alpha: float,
    margins: dict[str, float],
) -> tuple[NDArray[np.bool_], F]:
    """Vectorized `decide` for arm 1 vs arm 0 on both metrics (Holm across the two): for
    every replicate, whether the design stopped with a difference claim, and boots used."""
    from bench.stats._core import holm
    from bench.stats._sequential import obf_boundaries, sequential_status

    _, nominal = obf_boundaries(looks, alpha)
    n_rep = next(iter(m.values()))[0].shape[0]
    stopped = np.zeros(n_rep, dtype=bool)
    claimed = np.zeros(n_rep, dtype=bool)
    used = np.full(n_rep, float(looks[-1]))
    for i, n in enumerate(looks):
        level = nominal[i]
        parts = [compare_arms(num[..., :n], den[..., :n], 0, 1, level) for num, den in m.values()]
        p_adj = holm(np.stack([c["p"] for c in parts], axis=-1))
        lo2 = np.stack([c["lo2"] for c in parts], axis=-1)
        hi2 = np.stack([c["hi2"] for c in parts], axis=-1)
        margin = np.array([margins[k] for k in m])
        diff, equiv = sequential_status(p_adj, lo2, hi2, margin, level)
        decided = (diff | equiv).all(axis=-1) | (i == len(looks) - 1)
        now = decided & ~stopped
        claimed |= now & diff.any(axis=-1)
        used[now] = n
        stopped |= now
    return claimed, used
