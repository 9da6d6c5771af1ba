"""The suite's floor on this machine: each lane of `make test` alone, then their sum.

    .venv/bin/python benchmarks/bench_lanes.py [--lanes real,bed,other,lint] [--out DIR]
    .venv/bin/python benchmarks/bench_lanes.py --costs FILE...   (tables only)

`make test` runs lint and three pytests at once (tests/run-lanes.sh). Where they keep every
core busy, no schedule can end before the work of all of them is done:

    floor = sum over lanes of (CPU-s alone) / cores

This runs each lane alone, one after the other, with the markers and the environment
tests/run-lanes.sh gives it, and prints per lane its wall, its CPU-s (the whole machine's,
from /proc/stat: run it on an idle machine) and the cores it kept busy; then the sum and the
floor. A `make test` run well above the floor lost time to the lanes slowing each other
(shared caches, Ray daemons living longer); a floor above the budget means less work, not a
better schedule. Each lane's pytest output goes to DIR (its slowest tests at the end).
Lint runs without mypy's and ruff's caches; for the pytests' fresh-clone figures, give the
run an empty `XDG_CACHE_HOME` outside /tmp (vLLM's caches live there).

Then, per pytest lane, its costliest tests: each test's wall and the machine's CPU-s over
it (tests/run_pytest.py's SPECAB_TEST_COST lines; a module fixture's boots count in its
first test). `make test` writes the same lines beside each lane's log
(`.venv/real-tests.log.cost`, `.bed.cost`, `.other.cost`), and `--costs` tabulates them by
wall alone: there the machine's CPU is the three lanes' together.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# the machine's busy CPU-s from /proc/stat, as the boot benchmark measures it (this folder)
from bench_boot_phases import machine_cpu_seconds
from rich.console import Console
from rich.markup import escape
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
LANES_SCRIPT = ROOT / "tests" / "run-lanes.sh"


def _markers() -> dict[str, str]:
    """The lanes' marker expressions, read from tests/run-lanes.sh (one source of truth)."""
    text = LANES_SCRIPT.read_text()
    marks = {}
    for key in ("REAL", "BED"):
        line = re.search(rf'^{key}="([^"]+)"$', text, re.M)
        if line is None:
            sys.exit(f"{LANES_SCRIPT}: no {key}=... marker line; update {__file__}")
        marks[key] = line.group(1)
    real, bed = marks["REAL"], marks["BED"]
    return {"real": real, "bed": bed, "other": f"not ({real} or {bed})"}


def _commands(python: str, out: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    pytest = [python, str(ROOT / "tests" / "run_pytest.py"), "-p", "no:cacheprovider"]
    marks = _markers()
    passive = {"OMP_WAIT_POLICY": "PASSIVE"}
    one_thread = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return {
        "real": ([*pytest, "-m", marks["real"]], passive),
        "bed": ([*pytest, "-m", marks["bed"]], passive),
        "other": ([*pytest, "-m", marks["other"]], one_thread),
        # mypy and ruff without their caches, as on a fresh clone
        "lint": (
            ["make", "--no-print-directory", "lint"],
            {"MYPY_CACHE_DIR": str(out / "mypy-cache"), "RUFF_NO_CACHE": "true"},
        ),
    }


def _run_lane(
    name: str, argv: list[str], extra: dict[str, str], out: Path
) -> tuple[float, float, int]:
    env = {**os.environ, **extra, "SPECAB_TEST_COST": str(out / f"{name}.cost")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as the Makefile: bytecode written once, reused
    log = out / f"{name}.log"
    cpu0, t0 = machine_cpu_seconds(), time.monotonic()
    with log.open("w") as fh:
        rc = subprocess.run(argv, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    return time.monotonic() - t0, machine_cpu_seconds() - cpu0, rc


def costliest(path: Path, top: int, *, alone: bool) -> Table:
    """A lane's `top` tests: by the machine's CPU-s when the lane ran alone, else by wall."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        node, wall, cpu = line.rsplit("\t", 2)
        rows.append((float(cpu) if alone else float(wall), float(wall), float(cpu), node))
    rows.sort(reverse=True)
    wall_sum, cpu_sum = sum(r[1] for r in rows), sum(r[2] for r in rows)
    said = f"{wall_sum:.0f} s wall, {cpu_sum:.0f} CPU-s" if alone else f"{wall_sum:.0f} s wall"
    table = Table(title=f"{path.name}: {len(rows)} tests, {said}; the {min(top, len(rows))} "
                  f"costliest{'' if alone else ' (wall under the other lanes)'}")  # fmt: skip
    cols = ["test (setup, call, teardown)", "wall s", *(["CPU-s"] if alone else []), "share"]
    for col in cols:
        table.add_column(col, justify="left" if col.startswith("test") else "right")
    for key, wall, cpu, node in rows[:top]:
        total = cpu_sum if alone else wall_sum
        share = f"{key / total:.1%}" if total else "—"
        table.add_row(escape(node), f"{wall:.0f}", *([f"{cpu:.0f}"] if alone else []), share)
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lanes", default="real,bed,other,lint", help="comma-separated subset")
    ap.add_argument("--out", type=Path, default=None, help="where each lane's log goes")
    ap.add_argument("--costs", type=Path, nargs="+", help="only tabulate these cost files")
    ap.add_argument("--top", type=int, default=12, help="tests shown per lane")
    args = ap.parse_args()
    console = Console(width=160)
    if args.costs:
        for path in args.costs:
            if path.is_file():
                console.print(costliest(path, args.top, alone=False))
        return
    lanes = [x.strip() for x in args.lanes.split(",") if x.strip()]
    unknown = sorted(set(lanes) - {"real", "bed", "other", "lint"})
    if unknown:
        ap.error(f"--lanes: unknown {unknown}; choose from bed, lint, other, real")
    out = args.out or Path(tempfile.mkdtemp(prefix="specab-bench-lanes-"))
    out.mkdir(parents=True, exist_ok=True)
    commands = _commands(str(Path(sys.executable)), out)
    cores = len(os.sched_getaffinity(0))
    table = Table(title=f"each lane alone ({cores} cores; logs in {out})")
    for col in ("lane", "wall", "CPU-s", "cores busy", "status"):
        table.add_column(col, justify="left" if col == "lane" else "right")
    total_cpu = total_wall = 0.0
    for name in lanes:
        argv, extra = commands[name]
        console.print(f"running {name}: {' '.join(argv)}")
        wall, cpu, rc = _run_lane(name, argv, extra, out)
        total_cpu, total_wall = total_cpu + cpu, total_wall + wall
        table.add_row(name, f"{wall:.0f} s", f"{cpu:.0f}", f"{cpu / wall:.2f}", f"rc {rc}")
    table.add_row("sum", f"{total_wall:.0f} s", f"{total_cpu:.0f}", "", "")
    console.print(table)
    floor = total_cpu / cores
    console.print(
        f"floor of these lanes at once: {total_cpu:.0f} CPU-s / {cores} cores = "
        f"{floor:.0f} s ({floor / 60:.1f} min), before the install; one after the other "
        f"they took {total_wall / 60:.1f} min"
    )
    for name in lanes:
        if (out / f"{name}.cost").is_file():
            console.print(costliest(out / f"{name}.cost", args.top, alone=True))


if __name__ == "__main__":
    main()
