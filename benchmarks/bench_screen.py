"""Screening candidates without an order against today's fixed design with looks, on the
same simulated runs (docs/statistics.md, "Screening candidates").

Each simulated run has a baseline and four candidates (the generative model of
`bench.simulate`, 100 prompts per boot, boots to 16 per arm). Both rules are the product's
own code on the same data:
- **screening**: `bench.stats.screen.screening` (what `analyze` reports and `run-ab` stops
  booting by), one-sided per candidate at looks 3, 6, 10, 16; a candidate decided at a look
  takes no more boots;
- **today**: `run-ab` with experiment.looks = 3, 6, 10, 16 and pos0 the only primary metric:
  `bench.stats.decide` on every arm's first n boots (`first_boots`, as the driver takes a
  look), every arm booted until every comparison is decided. A candidate counts as cleared
  when its verdict says it is not worse by more than the margin (equivalent, improved,
  small_improvement or small_regression), lowered when it says worse (regressed or
  small_regression).

Cases: three harmless candidates and one that lowers pos0 by 4x the margin (boots, share
of harmless cleared, harmful found); and the least favourable one, every candidate worse by
exactly the margin (the share of runs that clear any: the error both keep ≤ alpha).

Run: .venv/bin/python benchmarks/bench_screen.py [--reps 200]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import optimize

from bench.records import SCREEN_SPENDING, SCREEN_SPREAD, ManifestScreen, Results
from bench.run.driver import first_boots
from bench.simulate import simulate_run, simulated_manifest
from bench.stats import AnalysisOptions, decide
from bench.stats.inputs import arm_data
from bench.stats.screen import screening

LOOKS = (3, 6, 10, 16)
ALPHA = 0.05
NOT_WORSE = {"equivalent", "improved", "small_improvement", "small_regression"}
WORSE = {"regressed", "small_regression"}
MARGIN = 0.02  # --margin


def _pos0(delta: float) -> float:
    r = simulate_run({"a": delta}, boots=4, prompts=3000, seed=99)
    p = r.probes
    first = p["accepted_per_pos"].map(lambda v: v[0]).sum()
    return float(first / p["num_drafts"].sum())


def _shift_for(diff: float, base: float) -> float:
    """The logit shift whose pos0 differs from the baseline's by `diff` (same draws)."""
    return float(optimize.brentq(lambda d: _pos0(d) - base - diff, -2.0, 2.0, xtol=1e-5))


def _one(deltas: dict[str, float], seed: int) -> tuple[dict[str, str], int, dict[str, str], int]:
    """(screening statuses, its boots, today's statuses, its boots) on one simulated run."""
    run = simulate_run(deltas, boots=LOOKS[-1], prompts=100, seed=seed)
    manifest = simulated_manifest(
        deltas,
        boots=LOOKS[-1],
        looks=list(LOOKS),
        primary_metrics=["acceptance_pos0"],
        margins={"acceptance_pos0": MARGIN},
    )
    manifest = manifest.model_copy(
        update={
            "screen": ManifestScreen(
                metric="acceptance_pos0",
                margin=MARGIN,
                looks=list(LOOKS),
                spending=SCREEN_SPENDING,
                spread=SCREEN_SPREAD,
            )
        }
    )
    res = Results(manifest=manifest, boots=run.boots_frame, probes=run.probes)
    arms = list(deltas)
    data = arm_data(res.probes, res.boots, arms, None).arms
    s = screening(data, arms, arms[0], manifest.screen, ALPHA)  # type: ignore[arg-type]
    used = [LOOKS[(c.decided_at_look or len(LOOKS)) - 1] for c in s.candidates]
    screen = {c.arm: c.status for c in s.candidates}
    today: dict[str, str] = {}
    for n in LOOKS:
        d = decide(first_boots(res, n), AnalysisOptions(looks=LOOKS))
        if d.action == "stop" or n == LOOKS[-1]:
            for row in d.comparisons:
                v = row.verdict
                today[row.arm] = "lowered" if v in WORSE else "cleared" if v in NOT_WORSE else "-"
            return screen, sum(used) + max(used), today, n * len(arms)
    raise AssertionError("unreachable")


def _case(
    deltas: dict[str, float], reps: int
) -> list[tuple[dict[str, str], int, dict[str, str], int]]:
    return [_one(deltas, seed) for seed in range(reps)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--margin", type=float, default=0.02, help="pos0 margin")
    args = ap.parse_args()
    global MARGIN
    reps, MARGIN = args.reps, args.margin
    base = _pos0(0.0)
    worse_margin, worse_4 = _shift_for(-MARGIN, base), _shift_for(-4 * MARGIN, base)
    print(
        f"margin {MARGIN}; pos0 {base:.4f}; logit shifts: -margin {worse_margin:+.4f}, "
        f"-4 margin {worse_4:+.4f}"
    )
    print(f"reps {reps}, 2 MCSE at 0.05: {2 * math.sqrt(ALPHA * (1 - ALPHA) / reps):.3f}")
    mixed = {"base": 0.0, "h1": 0.0, "h2": 0.0, "h3": 0.0, "bad": worse_4}
    rows = _case(mixed, reps)
    for name, st, bt in (("screening", 0, 1), ("today", 2, 3)):
        harmless = np.mean([r[st][h] == "cleared" for r in rows for h in ("h1", "h2", "h3")])
        found = np.mean([r[st]["bad"] == "lowered" for r in rows])
        wrong = np.mean([r[st]["bad"] == "cleared" for r in rows])
        boots = np.mean([r[bt] for r in rows])
        print(
            f"3 harmless + 1 lowering by 4 margins, {name}: harmless cleared {harmless:.3f}, "
            f"harmful lowered {found:.3f}, harmful cleared {wrong:.3f}, boots {boots:.1f}"
        )
    lf = {"base": 0.0, **{f"w{i}": worse_margin for i in range(4)}}
    rows = _case(lf, reps)
    for name, st, bt in (("screening", 0, 1), ("today", 2, 3)):
        any_cleared = np.mean([any(v == "cleared" for v in r[st].values()) for r in rows])
        boots = np.mean([r[bt] for r in rows])
        print(
            f"4 worse by exactly the margin, {name}: any cleared {any_cleared:.3f}, "
            f"boots {boots:.1f}"
        )


if __name__ == "__main__":
    main()
