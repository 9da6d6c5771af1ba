"""Calibration table of the sweep selection (docs/statistics.md, "Choosing a configuration"),
by simulation on the product's own code (`bench.stats.select.mcb.replay_looks`, what run-ab
eliminates with and analyze reports). Boot values are normal on the log scale; SDs differ
between configurations (every other one 2x); alpha = 0.05, margin 5 % unless stated.

Rows: (1) a wrong claim, least favourable case (the best leads every other configuration
by exactly the margin), fixed design, K x B; (2) probability of correct selection at the
boots `boots_to_select` plans; (3) all configurations equal: a single "winner" claimed;
(4) elimination across looks vs the fixed design, boots and PCS.

Run: .venv/bin/python benchmarks/bench_selection.py [--reps 4000]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from bench.stats.select import boots_to_select, replay_looks, spend

ALPHA = 0.05


def _run(theta, sd, looks, reps, seed, margin=0.05):
    rng = np.random.default_rng(seed)
    theta, sd = np.asarray(theta, float), np.asarray(sd, float)
    k = theta.size
    v = theta[None, :, None] + sd[None, :, None] * rng.standard_normal((reps, k, looks[-1]))
    cost = np.broadcast_to(np.arange(k, dtype=float), (reps, k))
    m = -math.log1p(-margin)
    return replay_looks(v, cost, looks, spend(looks, ALPHA), margin=m, cheapest=True)


def _lf(k, sd, margin=0.05):
    m = -math.log1p(-margin)
    theta = np.full(k, -m)
    theta[k // 2] = 0.0
    return theta, np.full(k, sd) * np.where(np.arange(k) % 2, 1.0, 2.0), k // 2


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=4000)
    reps = ap.parse_args().reps
    se = math.sqrt(ALPHA * (1 - ALPHA) / reps)
    print(f"reps {reps}, MCSE at 0.05: {se:.4f}")
    print("(1) wrong claim, least favourable, SD 0.03/0.06 (bound 0.05):")
    for k in (3, 5, 10):
        row = []
        for b in (3, 5, 10):
            t, s, best = _lf(k, 0.03)
            r = _run(t, s, (b,), reps, 10 * k + b)
            row.append(f"B={b} {((r.chosen >= 0) & (r.chosen != best)).mean():.3f}")
        print(f"  K={k}: " + ", ".join(row))
    print("(2) PCS at the planned boots (target >= 0.95):")
    for k, sd, margin in ((3, 0.02, 0.05), (5, 0.02, 0.10), (10, 0.02, 0.05), (3, 0.05, 0.10)):
        t, s, best = _lf(k, sd, margin)
        b = boots_to_select(float(s.max()), -math.log1p(-margin), k, ALPHA)
        r = _run(t, s, (b,), reps, b + k, margin)
        pcs = (r.chosen == best).mean()
        print(f"  K={k} SD {sd}/{2 * sd} margin {margin:.0%}: B={b} PCS {pcs:.3f}")
    print("(3) all equal, a single winner claimed (bound 0.05):")
    for k in (3, 5, 10):
        row = []
        for b in (3, 5, 10):
            s = np.full(k, 0.05) * np.where(np.arange(k) % 2, 1.0, 2.0)
            r = _run(np.zeros(k), s, (b,), reps, 7 * k + b)
            row.append(f"B={b} {(r.subset.sum(-1) == 1).mean():.3f}")
        print(f"  K={k}: " + ", ".join(row))
    print("(4) elimination, looks vs fixed B=10 (boots, PCS):")
    scen = {
        "spread K=5 (0, -10 %, ..., -40 %), SD 0.05-0.075": (
            [0.0, -0.1, -0.2, -0.3, -0.4], 0.05, 1.5),
        "k-sweep K=6 (-35 %, -12 %, best, -4 %, -10 %, -20 %), SD 0.05-0.075": (
            [-0.35, -0.12, 0.0, -0.04, -0.10, -0.2], 0.05, 1.5),
    }  # fmt: skip
    for name, (theta, sd, ratio) in scen.items():
        k = len(theta)
        s = np.full(k, sd) * np.where(np.arange(k) % 2, 1.0, ratio)
        best = int(np.argmax(theta))
        fixed = _run(theta, s, (10,), reps, 1)
        print(f"  {name}:")
        n_fixed, pcs_fixed = fixed.boots.sum(-1).mean(), (fixed.chosen == best).mean()
        print(f"    fixed B=10: {n_fixed:.1f} boots, PCS {pcs_fixed:.3f}")
        for looks in ((3, 6, 10), (3, 5, 7, 10)):
            r = _run(theta, s, looks, reps, 1)
            used = r.boots.sum(-1).mean()
            saved, pcs = 1 - used / n_fixed, (r.chosen == best).mean()
            print(f"    looks {list(looks)}: {used:.1f} boots ({saved:.0%} saved), PCS {pcs:.3f}")


if __name__ == "__main__":
    main()
