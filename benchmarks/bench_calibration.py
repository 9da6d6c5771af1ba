"""The statistics' calibrations at their full replicates: the same tests the suite runs
(`tests/unit/test_stats_calibration.py`, `test_boot_modes.py`), each at the count written in
it rather than the suite's share (`stats_calib_helpers.replicates`; the suite runs 200,
where a realized rate of alpha + 3 MCSE fails). Every simulated rate, coverage and power is
printed as the test measures it, against the same limits at the full count's MCSE.

    .venv/bin/python benchmarks/bench_calibration.py [PYTEST-ARGS...]

e.g. `-k coverage` for the coverage checks only. Exit status: pytest's. About 25 CPU-min
on a 2-core machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CALIBRATIONS = ("tests/unit/test_stats_calibration.py", "tests/unit/test_boot_modes.py")


def main(argv: list[str]) -> int:
    env = {**os.environ, "SPECAB_CALIBRATION": "full"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider"]
    start = time.monotonic()
    proc = subprocess.run(
        [*cmd, *CALIBRATIONS, *argv], cwd=ROOT, env=env, capture_output=True, text=True
    )
    for line in proc.stdout.splitlines():
        if "slowest" in line:  # pytest's durations follow the measurements
            break
        line = line.lstrip(".F")  # progress marks run into the next test's first line
        if line.strip() and not line.lstrip(". ").startswith("["):
            print(line)
    print(f"full calibration: {time.monotonic() - start:.0f} s, pytest exit {proc.returncode}")
    if proc.returncode:
        print(proc.stdout[-4000:], proc.stderr[-2000:], sep="\n", file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
