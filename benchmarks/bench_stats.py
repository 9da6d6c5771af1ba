"""Speed of `bench.stats.analyze` on 3 arms x 30 boots x 500 probes x 8 positions with
10,000 resamples for every resampling part (permutation, cluster and pigeonhole bootstrap).
Target: <= 2 s on a 2-core machine. Prints the ratio against a straightforward scipy loop
over the same data: per comparison, scipy.stats.bootstrap (BCa over boots) and
scipy.stats.permutation_test with a Python statistic (it does less: no pigeonhole bootstrap,
no per-position or variance-component work).

Run: .venv/bin/python benchmarks/bench_stats.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import stats as st

from bench import stats
from bench.simulate import simulate_results
from bench.stats.inputs import arm_data
from bench.stats.methods import cluster_bootstrap, permutation_test
from bench.store import load_results

TARGET_S = 2.0


def scipy_loop(results, n_resamples: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """The straightforward way: scipy.stats.bootstrap per comparison, statistic in Python."""
    arms = results.arms()
    data = arm_data(results.probes, results.boots, arms, None).arms
    t0, c0 = time.perf_counter(), time.process_time()
    base = data[arms[0]]
    for arm in arms[1:]:
        for metric in ("acceptance_pos0", "mean_accepted_length"):
            ni, di = base.totals(metric)
            nj, dj = data[arm].totals(metric)

            def diff(ii, jj, ni=ni, di=di, nj=nj, dj=dj):  # type: ignore[no-untyped-def]
                ii, jj = ii.astype(int), jj.astype(int)
                return nj[jj].sum() / dj[jj].sum() - ni[ii].sum() / di[ii].sum()

            idx = (np.arange(ni.size, dtype=float), np.arange(nj.size, dtype=float))
            st.bootstrap(
                idx, diff, n_resamples=n_resamples, method="BCa", vectorized=False, random_state=0
            )
            # boot-label permutation test on the same statistic, resampled the plain way
            pooled_n, pooled_d = np.concatenate([ni, nj]), np.concatenate([di, dj])

            def perm(x, y, pn=pooled_n, pd=pooled_d):  # type: ignore[no-untyped-def]
                x, y = x.astype(int), y.astype(int)
                return pn[y].sum() / pd[y].sum() - pn[x].sum() / pd[x].sum()

            st.permutation_test(
                (
                    np.arange(ni.size, dtype=float),
                    np.arange(ni.size, ni.size + nj.size, dtype=float),
                ),
                perm,
                n_resamples=n_resamples,
                vectorized=False,
                random_state=0,
            )
    return time.perf_counter() - t0, time.process_time() - c0


def same_work(results, n_resamples: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Only the parts of analyze that the scipy loop also does: per comparison, the
    studentized cluster bootstrap and the boot-label permutation test."""
    arms = results.arms()
    data = arm_data(results.probes, results.boots, arms, None).arms
    rng = np.random.default_rng(0)
    t0, c0 = time.perf_counter(), time.process_time()
    base = data[arms[0]]
    for arm in arms[1:]:
        for metric in ("acceptance_pos0", "mean_accepted_length"):
            ti, tj = base.totals(metric), data[arm].totals(metric)
            cluster_bootstrap(*ti, *tj, 0.05, n_resamples, rng)
            permutation_test(*ti, *tj, n_resamples, rng)
    return time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--resamples", type=int, default=10_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        root = simulate_results(
            Path(tmp) / "bench",
            {"base": 0.0, "fix": 0.05, "same": 0.0},
            boots=30,
            prompts=500,
            positions=8,
        )
        t_sim = time.perf_counter() - t0
        t0 = time.perf_counter()
        results = load_results(root)
        t_load = time.perf_counter() - t0
        times, cpu = [], []
        for _ in range(args.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            options = stats.AnalysisOptions(n_resamples=args.resamples)
            stats.analyze(results, options)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        t_scipy, c_scipy = scipy_loop(results, args.resamples)
        same = [same_work(results, args.resamples) for _ in range(args.repeat)]
        t_same = statistics.median(x[0] for x in same)
        c_same = statistics.median(x[1] for x in same)
    best, med, med_cpu = min(times), statistics.median(times), statistics.median(cpu)
    print(f"data: 3 arms x 30 boots x 500 probes x 8 positions, {args.resamples} resamples")
    print(f"simulate + write results dir: {t_sim:.2f} s; load_results: {t_load:.2f} s")
    print(
        f"analyze: wall median {med:.3f} s, best {best:.3f} s; CPU median {med_cpu:.3f} s "
        f"over {args.repeat} runs (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    )
    print(
        "  (analyze = common-probe selection, jackknife estimates, Welch, Holm, exact/MC "
        "permutation, studentized cluster bootstrap, pigeonhole bootstrap, simultaneous "
        "cumulative and conditional positions, variance components, tokens/s per boot and "
        "its log-scale Welch comparisons, accepted-length distributions, typed result)"
    )
    print(
        "scipy loop (bootstrap BCa + permutation_test, 4 comparisons; no pigeonhole): "
        f"wall {t_scipy:.2f} s, CPU {c_scipy:.2f} s"
    )
    print(
        f"ratio scipy loop / whole analyze: wall {t_scipy / med:.1f}x, CPU {c_scipy / med_cpu:.1f}x"
    )
    print(
        f"same work in bench.stats (cluster bootstrap + permutation, 4 comparisons): wall "
        f"{t_same:.3f} s, CPU {c_same:.3f} s -> ratio wall {t_scipy / t_same:.0f}x, "
        f"CPU {c_scipy / c_same:.0f}x"
    )
    verdict = "met" if best <= TARGET_S else "MISSED"
    print(f"target <= {TARGET_S} s (best wall): {verdict} ({best / TARGET_S:.2f} of budget)")


if __name__ == "__main__":
    main()
