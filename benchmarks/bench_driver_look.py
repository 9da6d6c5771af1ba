"""The driver's CPU at a sequential look on a campaign of 1,000 boots: the results re-read
from the directory (what every look, elimination and live-tracking sync did before the
writer kept them) against the writer's results in memory (`ResultsWriter.results`: the files
decoded once, each attempt appended as written). One run of each, on the same directory.

    .venv/bin/python benchmarks/bench_driver_look.py [--arms 2 --boots 500 --prompts 100]

The directory is written through a `ResultsWriter` as run-ab writes one (it made the
directory, so it never reads it back), the look finding one attempt appended since the last
build. CPU is this process's
(`time.process_time`): the look's decision (`SequentialRun._decide` at the last planned look:
`decide` on its first n boots per arm) with each way of getting the results; then the whole
campaign's reading, one read per landed boot, which grows with the square of the boots when
each read decodes every file so far.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.run.driver import SequentialRun
from bench.simulate import simulate_run, simulated_manifest
from bench.store import ResultsWriter, load_results


def cpu(fn):  # type: ignore[no-untyped-def]
    t = time.process_time()
    out = fn()
    return out, time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arms", type=int, default=2)
    ap.add_argument("--boots", type=int, default=500, help="per arm")
    ap.add_argument("--prompts", type=int, default=100)
    args = ap.parse_args()
    arms = {f"arm{i}": 0.02 * i for i in range(args.arms)}
    looks = (args.boots // 5, args.boots)
    run = simulate_run(arms, boots=args.boots, prompts=args.prompts, seed=1)
    manifest = simulated_manifest(arms, boots=args.boots, prompts=args.prompts, looks=looks)
    with tempfile.TemporaryDirectory() as tmp:
        writer = ResultsWriter.create(Path(tmp) / "r", manifest)
        by_boot = dict(tuple(run.probes.groupby("boot_id", sort=False)))
        for rec in run.boots[:-1]:
            writer.write_boot(rec, by_boot[rec.boot_id].reset_index(drop=True))
        _, first = cpu(lambda: load_results(writer.root))  # what a --resume reads, once
        last = run.boots[-1]
        writer.write_boot(last, by_boot[last.boot_id].reset_index(drop=True))
        n_boots = len(run.boots)
        print(f"{n_boots} boots x {args.prompts} prompts; look at {looks[-1]} boots per arm")
        print(f"reading the directory once (a --resume): {first:.2f} CPU-s")
        names = list(arms)
        memory = SequentialRun(writer.root, looks, names, current=writer.results)
        disk = SequentialRun(writer.root, looks, names)
        d_mem, t_mem = cpu(lambda: memory._decide(looks[-1]))  # builds the appended results
        d_disk, t_disk = cpu(lambda: disk._decide(looks[-1]))
        assert d_disk == d_mem, "the two reads must decide alike"
        _, decide_only = cpu(lambda: memory._decide(looks[-1]))  # results cached: the decision
        _, read_disk = cpu(lambda: load_results(writer.root))
        retry = last.boot_id.rsplit("__a", 1)[0] + "__a9"  # one more attempt lands
        writer.write_boot(
            last.model_copy(update={"attempt": 9, "boot_id": retry, "status": "failed",
                                    "error": "simulated", "order": n_boots})
        )  # fmt: skip
        _, read_mem = cpu(writer.results)
    print(f"the decision alone (decide on the look's boots): {decide_only:.2f} CPU-s")
    print(f"look, results re-read from disk:   {t_disk:.2f} CPU-s (a read alone {read_disk:.2f})")
    print(f"look, results from memory:         {t_mem:.2f} CPU-s (a read alone {read_mem:.2f})")
    print(f"ratio: {t_disk / t_mem:.2f}x at the look; reading {read_disk / read_mem:.2f}x")
    # one read per landed boot over the campaign: the k-th read covers k boots
    campaign_disk = sum(read_disk * k / n_boots for k in range(1, n_boots + 1))
    campaign_mem = sum(read_mem * k / n_boots for k in range(1, n_boots + 1))
    print(
        f"reads over the campaign (one per landed boot, estimated from the reads above): "
        f"{campaign_disk:.0f} CPU-s re-reading, {campaign_mem:.0f} CPU-s in memory"
    )


if __name__ == "__main__":
    main()
