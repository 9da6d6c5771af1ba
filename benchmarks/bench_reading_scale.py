"""The reading side at campaign scale: `specab status`, `analyze --json` and `report` on a
simulated results directory, each in its own process, CPU-seconds and peak memory side by
side with the figures measured before this release (the same sizes, this machine class).

    .venv/bin/python benchmarks/bench_reading_scale.py [--arms 20 --boots 50 --prompts 1000]
        [--dir DIR] [--skip report]

The directory (arms x boots x prompts probe rows, written through `bench.simulate` as run-ab
writes one) is built once under DIR and reused. Each command runs in a fresh interpreter, so
its imports count, as they do for a user; CPU is user + system of that process and its
children (`os.wait4`), memory its peak resident set. Targets for 1,000 boots x 1,000 probes:
status <= 1 s CPU, analyze --json <= 10 s CPU and <= 700 MB, report <= 30 s CPU.

Measured at 20 x 50 x 1,000 on a 2-core AMD EPYC without AVX-512 (three runs): analyze
--json 686-692 MB and 14.8-15.5 CPU-s (735-759 MB before each probe file's counts were
narrowed as read and freed pages returned; the peak is now the resampling, on top of the
loaded probes and the per-arm cells); status 108 MB, 1.4-2.0 CPU-s; report 850 MB and
27.5 CPU-s (917-933 MB and 45-50 CPU-s before it read only the probe columns analyze reads
and the output hashes, and built its output-identity table once, on integer codes rather
than by grouping 10^6 strings twice): its peak is the analysis plus 10^6 output hashes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

# The release before (its code run the same way on the 20 x 50 x 1,000 directory, a quiet
# 2-core AMD EPYC with AVX-512): (CPU s, peak MB).
BEFORE = {"status": (18.4, 1219), "analyze --json": (27.2, 1600), "report": (38.8, 1596)}
COMMANDS = {
    "status": ["status", "{dir}", "--json"],
    "analyze --json": ["analyze", "{dir}", "--json"],
    "report": ["report", "{dir}", "--out", "{out}"],
}


def build(root: Path, arms: int, boots: int, prompts: int) -> Path:
    """The simulated directory (built once: a second run reuses it), in a child process: a
    child's peak memory starts at its parent's (Linux keeps the high-water mark across
    fork and exec), so the parent must stay small for the figures below to be the
    commands' own."""
    path = root / f"scale-{arms}x{boots}x{prompts}"
    if (path / "manifest.json").is_file():
        return path
    code = (
        "import sys; from bench.simulate import simulate_results; "
        "a, b, p = map(int, sys.argv[2:5]); "
        "names = {f'arm{i:02d}': 0.01 * (i % 3) for i in range(a)}; "
        "simulate_results(sys.argv[1], names, boots=b, prompts=p, seed=1, experiment='scale')"
    )
    t0 = time.monotonic()
    cmd = [sys.executable, "-c", code, str(path), str(arms), str(boots), str(prompts)]
    subprocess.run(cmd, check=True)
    print(f"built {path} in {time.monotonic() - t0:.0f} s")
    return path


def measure(argv: list[str]) -> tuple[float, float, float, int]:
    """(wall s, CPU s, peak MB, exit code) of `specab ARGV` in a fresh interpreter."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.cli", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss / 1024, proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arms", type=int, default=20)
    ap.add_argument("--boots", type=int, default=50)
    ap.add_argument("--prompts", type=int, default=1000)
    ap.add_argument("--dir", type=Path, default=Path("/var/tmp/specab-scale"))
    ap.add_argument("--skip", action="append", default=[], help="a command to leave out")
    a = ap.parse_args()
    a.dir.mkdir(parents=True, exist_ok=True)
    root = build(a.dir, a.arms, a.boots, a.prompts)
    table = Table(title=f"{a.arms} arms x {a.boots} boots x {a.prompts} probes")
    for col in ("command", "wall s", "CPU s", "peak MB", "before: CPU s", "before: MB", "ratio"):
        table.add_column(col, justify="right" if col != "command" else "left")
    same_size = (a.arms, a.boots, a.prompts) == (20, 50, 1000)
    for name, template in COMMANDS.items():
        if name in a.skip:
            continue
        argv = [x.format(dir=root, out=a.dir / "report") for x in template]
        wall, cpu, mb, rc = measure(argv)
        before = BEFORE[name] if same_size else None
        table.add_row(
            name + ("" if rc == 0 else f" (exit {rc})"),
            f"{wall:.1f}",
            f"{cpu:.1f}",
            f"{mb:.0f}",
            f"{before[0]:.1f}" if before else "-",
            f"{before[1]:.0f}" if before else "-",
            f"{before[0] / cpu:.1f}x less CPU" if before else "-",
        )
    Console().print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
