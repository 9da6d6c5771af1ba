"""Culprit search on simulated 32-point histories: specab's search (`bench.stats.bisect`,
the product's own `run_search`) against three rules in use, on the same simulated boots:
fixed-B bisection (B boots per visited point, each classified by the nearer end), asv
find's rule (one boot per point, the half with the larger jump) and Chromium Pinpoint's
(p = min of KS and Mann-Whitney p; ≤ 0.01 different, above a "same" threshold simulated for
the ends' effect size same, else +10 repeats, up to 40).

    .venv/bin/python benchmarks/bench_bisect.py [--reps 2000] [--points 32]

Each row: a history (one step of δ boot SDs at a uniformly drawn point, no step, two
steps, a flaky point with heavy-tailed boots, a point next to the culprit that cannot be
built); each column: the share of searches that named the culprit, that gave a range
holding it, that were wrong (a wrong point, a range without it, or a change where there is
none), the wrong share among the culprits named (what a user who acts on a name meets),
and the mean boots. Boot values are normal with SD 1 unless said. The calibration grid of
specab's own search (step sizes 0.5-4 SD, the culprit at the edges, t3 boots, unequal
spread, 1-4 slots, 16-128 points) is `--grid`.
"""

from __future__ import annotations

import argparse
import functools
import math
from collections.abc import Callable

import numpy as np
from scipy import stats as st

from bench.stats.bisect import BisectSettings, run_search

Draw = Callable[[int, int], np.ndarray]
ALPHA = 0.05


def history(kind: str, n: int, rng: np.random.Generator, delta: float):  # type: ignore[no-untyped-def]
    """(levels, draw, culprits, unavailable) of one simulated history."""
    c = int(rng.integers(2, n - 1))
    levels = np.where(np.arange(n) >= c, delta, 0.0)
    culprits = {c}
    unavailable: set[int] = set()
    flaky = -1
    if kind == "no step":
        levels[:] = 0.0
        culprits = set()
    elif kind == "two steps":
        c2 = int(rng.integers(2, n - 1))
        while abs(c2 - c) < 2:
            c2 = int(rng.integers(2, n - 1))
        levels = delta / 2 * ((np.arange(n) >= c) + (np.arange(n) >= c2))
        culprits = {c, c2}
    elif kind == "flaky point":
        flaky = int(rng.choice([p for p in range(1, n - 1) if p != c]))
    elif kind == "unbuildable next to it":
        unavailable = {c - 1}

    def draw(point: int, k: int) -> np.ndarray:
        if point == flaky:  # heavy tails: t with 3 df, scaled to SD 2
            return levels[point] + 2 * rng.standard_t(3, k) / math.sqrt(3)
        return levels[point] + rng.standard_normal(k)

    return draw, culprits, unavailable


# --- the peers' rules ---------------------------------------------------------------------


def _nearest_open(lo: int, hi: int, unavailable: set[int]) -> int | None:
    mid = (lo + hi) // 2
    for d in range(hi - lo):
        for m in (mid - d, mid + d):
            if lo < m < hi and m not in unavailable:
                return m
    return None


def fixed_b(draw: Draw, n: int, unavailable: set[int], B: int):  # type: ignore[no-untyped-def]
    g, b = draw(0, B), draw(n - 1, B)
    boots = 2 * B
    se = math.sqrt(g.var(ddof=1) / B + b.var(ddof=1) / B)
    if abs(b.mean() - g.mean()) <= st.t.ppf(1 - ALPHA / 2, 2 * B - 2) * se:
        return ("none",), boots
    mid_level, up = (g.mean() + b.mean()) / 2, b.mean() > g.mean()
    lo, hi = 0, n - 1
    while hi - lo > 1:
        m = _nearest_open(lo, hi, unavailable)
        if m is None:
            return ("range", lo + 1, hi), boots
        x = draw(m, B)
        boots += B
        if (x.mean() > mid_level) == up:
            hi = m
        else:
            lo = m
    return ("point", hi), boots


def asv_find(draw: Draw, n: int, unavailable: set[int]):  # type: ignore[no-untyped-def]
    lo, hi = 0, n - 1
    vals = {lo: float(draw(lo, 1)[0]), hi: float(draw(hi, 1)[0])}
    while hi - lo > 1:
        m = _nearest_open(lo, hi, unavailable)
        if m is None:
            return ("range", lo + 1, hi), len(vals)
        vals[m] = float(draw(m, 1)[0])
        if abs(vals[m] - vals[lo]) > abs(vals[hi] - vals[m]):
            hi = m
        else:
            lo = m
    return ("point", hi), len(vals)


def _p(a: np.ndarray, b: np.ndarray) -> float:
    return float(min(st.ks_2samp(a, b).pvalue, st.mannwhitneyu(a, b).pvalue))


@functools.cache
def _same_threshold(n: int, effect: float) -> float:
    """Pinpoint's "same" bar for n repeats a side at this effect (in SDs): the p that
    99 % of comparisons of a real effect of that size fall below (simulated, cached)."""
    rng = np.random.default_rng(12345)
    ps = [_p(rng.standard_normal(n), effect + rng.standard_normal(n)) for _ in range(400)]
    return float(np.quantile(ps, 0.99))


def _pinpoint_compare(a: np.ndarray, b: np.ndarray, effect: float) -> str:
    p = _p(a, b)
    if p <= 0.01:
        return "different"
    return "same" if p >= _same_threshold(len(a), round(effect, 1)) else "unknown"


def pinpoint(draw: Draw, n: int, unavailable: set[int]):  # type: ignore[no-untyped-def]
    reps: dict[int, np.ndarray] = {0: draw(0, 10), n - 1: draw(n - 1, 10)}

    def more(p: int) -> None:
        reps[p] = np.concatenate([reps[p], draw(p, 10)])

    pooled = math.sqrt((reps[0].var(ddof=1) + reps[n - 1].var(ddof=1)) / 2)
    effect = abs(reps[n - 1].mean() - reps[0].mean()) / max(pooled, 1e-9)
    while (v := _pinpoint_compare(reps[0], reps[n - 1], effect)) == "unknown" and len(reps[0]) < 40:
        more(0)
        more(n - 1)
    if v != "different":
        return ("none",), sum(len(x) for x in reps.values())
    lo, hi = 0, n - 1
    while hi - lo > 1:
        m = _nearest_open(lo, hi, unavailable)
        if m is None:
            break
        reps[m] = draw(m, 10)
        while (v := _pinpoint_compare(reps[lo], reps[m], effect)) == "unknown" and len(
            reps[m]
        ) < 40:
            more(m)
            if len(reps[lo]) < len(reps[m]):
                more(lo)
        if v == "unknown":
            break
        if v == "different":
            hi = m
        else:
            lo = m
    boots = sum(len(x) for x in reps.values())
    return (("point", hi) if hi - lo == 1 else ("range", lo + 1, hi)), boots


def specab(draw: Draw, n: int, unavailable: set[int]):  # type: ignore[no-untyped-def]
    step, points, _ = run_search(draw, BisectSettings(n_points=n, alpha=ALPHA), unavailable)
    if step.outcome == "not_reproduced":
        return ("none",), points.size
    if step.outcome == "culprit":
        return ("point", step.first), points.size
    return ("range", step.first, step.last), points.size


def score(found: tuple, culprits: set[int]) -> str:  # type: ignore[type-arg]
    if found[0] == "none":
        return "right" if not culprits else "missed"
    if found[0] == "point":
        return "right" if found[1] in culprits else "wrong"
    return "range" if any(found[1] <= c <= found[2] for c in culprits) else "wrong"


RULES = {
    "specab": specab,
    "fixed B=3": functools.partial(fixed_b, B=3),
    "fixed B=5": functools.partial(fixed_b, B=5),
    "fixed B=10": functools.partial(fixed_b, B=10),
    "asv find": asv_find,
    "Pinpoint": pinpoint,
}
CASES = [
    ("one step", 0.75), ("one step", 1.0), ("one step", 2.0), ("one step", 3.0), ("no step", 2.0),
    ("two steps", 2.0), ("flaky point", 2.0), ("unbuildable next to it", 2.0),
]  # fmt: skip


def grid(reps: int) -> None:
    """specab's search alone over the calibration grid (`bench.simulate.tally_searches`)."""
    from bench.simulate import HistoryCase, tally_searches

    cases = [HistoryCase(d) for d in (0.5, 0.75, 1.0, 1.5, 2.0, 4.0)]
    cases += [HistoryCase(1.0, culprit=1), HistoryCase(1.0, culprit=31)]
    cases += [
        HistoryCase(1.0, tails="t3"),
        HistoryCase(1.0, bad_sd=2.0),
        HistoryCase(1.0, bad_sd=0.5),
    ]
    cases += [HistoryCase(1.0, slots=2), HistoryCase(1.0, slots=4)]
    cases += [HistoryCase(1.0, n_points=16), HistoryCase(1.0, n_points=128)]
    print(f"{reps} searches per row: named / wrong among named (2 MCSE) / range / range "
          "without the culprit / did not reproduce / mean boots")  # fmt: skip
    for i, c in enumerate(cases):
        t = tally_searches(c, reps, seed=1000 + i)
        print(f"| {c.label} | {t.named / reps:.3f} | {t.wrong_among_named:.3f} "
              f"({2 * t.mcse(ALPHA):.3f}) | {t.ranges / reps:.3f} | {t.ranges_without / reps:.3f} "
              f"| {t.not_reproduced / reps:.3f} | {t.boots:.1f} |", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--points", type=int, default=32)
    ap.add_argument("--grid", action="store_true", help="specab's calibration grid alone")
    args = ap.parse_args()
    if args.grid:
        grid(args.reps)
        return
    print(f"{args.points} points, {args.reps} searches per cell; "
          "right / range / wrong / wrong among named / boots")  # fmt: skip
    for kind, delta in CASES:
        cells = []
        for name, rule in RULES.items():
            rng = np.random.default_rng(7)  # every rule sees the same histories
            tally = {"right": 0, "range": 0, "wrong": 0, "missed": 0}
            boots = named = named_wrong = 0
            for _ in range(args.reps):
                draw, culprits, unavailable = history(kind, args.points, rng, delta)
                found, used = rule(draw, args.points, unavailable)
                verdict = score(found, culprits)
                tally[verdict] += 1
                named += found[0] == "point"
                named_wrong += found[0] == "point" and verdict == "wrong"
                boots += used
            r = {k: v / args.reps for k, v in tally.items()}
            among = named_wrong / named if named else float("nan")
            cells.append(
                f"{name}: {r['right']:.3f} / {r['range']:.3f} / {r['wrong']:.3f} / "
                f"{among:.3f} / {boots / args.reps:.1f}"
            )
        label = kind if kind != "one step" else f"one step, δ = {delta:g} SD"
        print(f"{label}\n    " + "\n    ".join(cells), flush=True)


if __name__ == "__main__":
    main()
