"""An answer when the budget ends (docs/statistics.md, "When the budget ends"): vLLM's
`tune_speculative_k` rule and specab, side by side on the same simulated sweeps, through the
product's own code (`replay_looks` decides "chosen", `best_guess` gives the best estimate and
its probability; both are what analyze runs).

vLLM's rule, as its sweep script states it: per configuration, median - 1.4826 * MAD of the
runs' throughput; refuse the data when a configuration's relative MAD (1.4826 * MAD / median)
exceeds 0.1; otherwise name the smallest k whose score is within 1 % of the best score.

Per family of truths (log throughput per configuration; boots normal around it, SDs differing
by configuration) it prints: vLLM's rule named a k more than delta worse than the best
(a wrong answer given without warning) / refused; specab's wrong claims ("chosen" more than
delta worse), undecided share, how often its best estimate is within delta of the best, and
the calibration of its stated probability over undecided groups (stated vs actual per bin).

Run: .venv/bin/python benchmarks/bench_budget_answer.py [--reps 3000]
"""

from __future__ import annotations

import argparse
import itertools
import math
from collections.abc import Callable

import numpy as np

from bench.stats.select import best_guess, replay_looks

DELTA = 0.05
ALPHA = 0.05
BINS = (0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0 + 1e-9)


def vllm_rule(tput: np.ndarray) -> np.ndarray:
    """Index vLLM's rule names per sweep (..., K, B) of throughputs; -1: refused as noisy."""
    med = np.median(tput, axis=-1)
    mad = 1.4826 * np.median(np.abs(tput - med[..., None]), axis=-1)
    score = med - mad
    noisy = (mad / med > 0.1).any(axis=-1)
    ok = score >= score.max(axis=-1, keepdims=True) * 0.99  # within 1 % of the best score
    pick = ok.argmax(axis=-1)  # configurations are in k order: the smallest k
    return np.where(noisy, -1, pick)


Truth = Callable[[np.random.Generator, int], np.ndarray]


def _within(spread: float, k: int) -> Truth:
    return lambda rng, reps: np.log1p(-rng.uniform(0.0, spread, (reps, k)))


def _one_best(gap: float, k: int) -> Truth:
    def make(rng: np.random.Generator, reps: int) -> np.ndarray:
        theta = np.log1p(-rng.uniform(gap, 2 * gap, (reps, k)))
        theta[np.arange(reps), rng.integers(0, k, reps)] = 0.0
        return theta

    return make


FAMILIES: dict[str, tuple[Truth, int, int, float]] = {
    # name: (truth, K, boots per configuration, per-boot noise)
    "issue: 4 within 10 %, 3 boots, 5 % noise": (_within(0.10, 4), 4, 3, 0.05),
    "4 within 20 %, 3 boots, 5 % noise": (_within(0.20, 4), 4, 3, 0.05),
    "6 within 10 %, 3 boots, 3 % noise": (_within(0.10, 6), 6, 3, 0.03),
    "one best, others 5-10 % worse, 3 boots, 5 %": (_one_best(0.05, 4), 4, 3, 0.05),
    "one best, others 6-12 % worse, 5 boots, 8 %": (_one_best(0.06, 4), 4, 5, 0.08),
    "one best, others 8-16 % worse, 3 boots, 3 %": (_one_best(0.08, 6), 6, 3, 0.03),
}


def run_family(truth: Truth, k: int, b: int, noise: float, reps: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    theta = truth(rng, reps)
    sd = noise * np.where(np.arange(k) % 2, 1.0, 1.5)[None, :] * np.ones((reps, 1))
    logs = theta[..., None] + sd[..., None] * rng.standard_normal((reps, k, b))
    margin = -math.log1p(-DELTA)
    good = theta >= theta.max(axis=-1, keepdims=True) - margin
    rows = np.arange(reps)
    cost = np.broadcast_to(np.arange(k, dtype=np.float64), (reps, k))
    rep = replay_looks(logs, cost, (b,), (ALPHA,), margin=margin, cheapest=True, fixed=True)
    guess = best_guess(logs, margin)
    pick = vllm_rule(np.exp(logs))
    named = pick >= 0
    undecided = rep.chosen < 0
    return {
        "vllm_wrong": float((named & ~good[rows, np.maximum(pick, 0)]).mean()),
        "vllm_refused": float((~named).mean()),
        "vllm_right": float((named & good[rows, np.maximum(pick, 0)]).mean()),
        "specab_wrong_claim": float((~undecided & ~good[rows, np.maximum(rep.chosen, 0)]).mean()),
        "undecided": float(undecided.mean()),
        "guess_right": float(good[rows, guess.best].mean()),
        "stated": guess.probability[undecided],
        "actual": good[rows, guess.best][undecided],
    }


def calibration(stated: np.ndarray, actual: np.ndarray) -> list[tuple[str, int, float, float]]:
    out = []
    for lo, hi in itertools.pairwise(BINS):
        s = (stated >= lo) & (stated < hi)
        if s.sum():
            out.append((f"[{lo:.2f}, {min(hi, 1):.2f})", int(s.sum()), float(stated[s].mean()),
                        float(actual[s].mean())))  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3000)
    reps = ap.parse_args().reps
    print(f"delta {DELTA:.0%}, alpha {ALPHA}, {reps} simulated sweeps per family")
    stated_all, actual_all = [], []
    for i, (name, (truth, k, b, noise)) in enumerate(FAMILIES.items()):
        r = run_family(truth, k, b, noise, reps, seed=100 + i)
        stated_all.append(r["stated"])
        actual_all.append(r["actual"])
        print(f"\n{name}")
        print(f"  vLLM rule: wrong k (> delta worse, no warning) {r['vllm_wrong']:.3f}, "
              f"right {r['vllm_right']:.3f}, refused {r['vllm_refused']:.3f}")  # fmt: skip
        print(f"  specab: wrong claims {r['specab_wrong_claim']:.3f}, undecided "
              f"{r['undecided']:.3f}, best estimate right {r['guess_right']:.3f}")  # fmt: skip
        cal = calibration(r["stated"], r["actual"])
        print("  stated probability (undecided groups): " + "; ".join(
            f"{b} n={n} stated {s:.2f} actual {a:.2f}" for b, n, s, a in cal))  # fmt: skip
    print("\nall families, undecided groups: stated vs actual")
    for b, n, s, a in calibration(np.concatenate(stated_all), np.concatenate(actual_all)):
        print(f"  {b}: n={n}, stated {s:.3f}, actual {a:.3f}")


if __name__ == "__main__":
    main()
