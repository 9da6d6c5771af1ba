"""A real sweep end to end across two real hosts (four real server starts, one per host at a
time): `[sweep]` over concurrency {1, 4} on the tiny demo models (K = 4), 2 boots per cell.
The cells double as the real load test (per-request acceptance and overlapping requests at
concurrency 4; test_methods_real boots a no-speculation arm at 4). On the namespace test
bed (cluster/testbed.py: own address, /tmp, /dev/shm, process table per host) the sweep runs
under Slurm when it is installed — `sbatch --nodes=2 cluster/specab.sbatch` on the bed's
slurmctld/slurmd, as users submit it, to the end — else through `specab run-ab --address`
from host 1 against a Ray head there and a worker on host 2. Host 2's boot logs must come
back to the results directory. Then `validate`, `analyze --json` and the report show the
generated arms, the selection with its guarantee and what to paste. Where the machine
refuses the test bed (not root), the same sweep runs on local Ray. Numbers differ between
CPUs, so the assertions are about structure and consistency, never about which cell wins."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from testbed_helpers import ROOT, TB, Bed, namespace_hosts

from bench.cli import run
from bench.demo import DemoModels
from bench.store import load_results

pytestmark = [
    pytest.mark.testbed,
    pytest.mark.vllm,
    pytest.mark.ray,
    pytest.mark.slow,
    pytest.mark.timeout(1200),
]

# Concurrency 1 and 4 at K = REAL_K, one selection group over both: the cells double as the
# real load test (per-request acceptance at concurrency 4, requests overlapping there).
SWEEP = """
[sweep]
grid = { concurrency = [1, 4] }
group_by = []
margin = 0.5
"""
K = 4  # conftest.REAL_K
N_PROBES = 12  # 3 rounds of 4 lanes
PROBES = Path(__file__).resolve().parents[2] / "arms" / "probes" / "python-code.jsonl"


def _cli(args: list[str]) -> tuple[int, str]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = run(args)
    return rc, buf.getvalue()


@pytest.fixture(scope="module")
def sweep_run(
    tiny_models: DemoModels,
    real_experiment: Callable[..., Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, Path, str]]:
    # Not under /tmp: every test-bed host has its own /tmp; this is the "shared filesystem".
    shared = Path(tempfile.mkdtemp(prefix="specab-sweep-", dir="/var/tmp"))
    try:
        yield _run_sweep(tiny_models, real_experiment, shared, tmp_path_factory.mktemp("bed"))
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _run_sweep(
    tiny_models: DemoModels, real_experiment: Callable[..., Path], tmp: Path, bed_dir: Path
) -> tuple[Path, Path, str]:
    probes = tmp / "probes.jsonl"
    probes.write_text("\n".join(PROBES.read_text().splitlines()[:N_PROBES]) + "\n")
    spec = real_experiment(
        tmp,
        tiny_models,
        name="sweep-real",
        experiment={"boots_per_arm": 2, "seed": 5},
        probes={"sets": [str(probes)], "max_tokens": 24, "timing_source": "per_request"},
        resources={"cpu": 1},
        arms=[],
    )
    spec.write_text(spec.read_text() + SWEEP)
    root = tmp / "results"
    args = ["run-ab", str(spec), "--results-dir", str(root), "--quiet"]
    if TB.refusal() is not None:  # no test bed here: the same sweep on local Ray
        rc, out = _cli(args)
        assert rc == 0, out
        return spec, root, out
    with namespace_hosts(2, bed_dir / "bed.json") as bed:
        if shutil.which("slurmctld") and shutil.which("munged"):
            return spec, root, _under_slurm(bed, bed_dir / "bed.json", spec, root)
        address = bed.ray_cluster(cpus=1)
        done = bed.run(
            "h1", [sys.executable, "-m", "bench.cli", *args, "--address", address], timeout=900
        )
        assert done.returncode == 0, done.stdout + done.stderr
    return spec, root, done.stdout


def _under_slurm(bed: Bed, state: Path, spec: Path, root: Path) -> str:
    """`sbatch --wait --nodes=2 cluster/specab.sbatch` as users submit it (no GPUs here)."""
    env = {**os.environ, "SLURM_CONF": TB.slurm_up(bed.info, state)}
    out = spec.parent / "job.out"
    argv = [
        "sbatch",
        "--wait",
        "--nodes=2",
        "--gpus-per-node=0",
        f"--output={out}",
        str(ROOT / "cluster" / "specab.sbatch"),
        str(spec),
        "--results-dir",
        str(root),
        "--no-report",  # the test renders it itself
    ]
    job = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    text = out.read_text() if out.exists() else ""
    assert job.returncode == 0, job.stdout + job.stderr + text
    return text


def test_validate_lists_the_generated_cells(sweep_run: tuple[Path, Path, str]) -> None:
    rc, out = _cli(["validate", str(sweep_run[0])])
    assert rc == 0, out
    assert "2 arm(s) x 2 boot(s) = 4 boots" in out and "group all: c1, c4" in out


def test_run_ab_boots_every_cell_and_selects(sweep_run: tuple[Path, Path, str]) -> None:
    _, root, out = sweep_run
    ok = load_results(root).ok_boots()
    if TB.refusal() is None:  # on the test bed: both hosts booted, every log came back
        assert sorted(set(ok["host"])) == ["h1", "h2"], ok["host"].tolist()
        for boot_id in ok["boot_id"]:
            log = (root / "logs" / f"{boot_id}.log").read_text()
            assert "[specab] launching:" in log
    cells = [("c1", 0), ("c1", 1), ("c4", 0), ("c4", 1)]
    assert sorted(zip(ok["arm"], ok["boot"], strict=True)) == cells
    assert (ok["num_drafts"] > 0).all()
    manifest = json.loads((root / "manifest.json").read_text())
    assert [c["arm"] for c in manifest["sweep"]["cells"]] == ["c1", "c4"]
    assert "selection: maximize output_tokens_per_s" in out and "all: " in out


def test_analyze_json_and_report_carry_the_selection(sweep_run: tuple[Path, Path, str]) -> None:
    _, root, _ = sweep_run
    rc, out = _cli(["analyze", str(root), "--json"])
    assert rc == 0
    sel = json.loads(out)["selection"]
    (group,) = sel["groups"]
    assert group["status"] in ("chosen", "undecided") and group["subset"]
    by = {c["arm"]: c for c in group["configs"]}
    assert by["c1"]["speculative_tokens"] == K and by["c4"]["speculative_tokens"] == K
    assert all(c["boots"] == 2 and c["estimate"] > 0 for c in by.values())
    for c in by.values():  # the MCB interval brackets the estimated difference
        other = next(o for o in by.values() if o is not c)
        diff = c["estimate"] / other["estimate"] - 1
        assert c["mcb_low"] <= max(diff, 0) + 1e-9 and min(diff, 0) - 1e-9 <= c["mcb_high"]
    if group["chosen"]:
        chosen = by[group["chosen"]]
        assert chosen["within_margin"]
        k = chosen["speculative_tokens"]
        assert f'"num_speculative_tokens": {k}' in group["paste"]
    rc, _ = _cli(["report", str(root)])
    assert rc == 0 and (root / "report" / "fig11_selection.png").is_file()
    assert "## Selection" in (root / "report" / "report.md").read_text()


def test_concurrent_boots_keep_per_request_acceptance(sweep_run: tuple[Path, Path, str]) -> None:
    """At concurrency 4 the per-probe counts come only from the responses; each boot's whole
    /metrics delta must still equal their sum (or the boot would have failed)."""
    res = load_results(sweep_run[1])
    ok = res.ok_boots()
    for _, boot in ok[ok["arm"] == "c4"].iterrows():
        assert boot["concurrency"] == 4 and boot["speculative"]
        rows = res.probes[res.probes["boot_id"] == boot["boot_id"]]
        assert len(rows) == N_PROBES and (rows["source"] == "per_request").all()
        for _, r in rows.iterrows():
            h = list(r["acceptance_histogram"])
            assert len(h) == K + 1 and sum(h) == r["num_drafts"] > 0
        assert boot["num_drafts"] == rows["num_drafts"].sum()


def test_requests_overlapped_at_concurrency_4_and_not_at_1(
    sweep_run: tuple[Path, Path, str],
) -> None:
    """Average requests in flight = total request time / probe phase wall time."""
    res = load_results(sweep_run[1])
    for _, boot in res.ok_boots().iterrows():
        rows = res.probes[res.probes["boot_id"] == boot["boot_id"]]
        in_flight = rows["latency_s"].sum() / boot["probe_seconds"]
        if boot["arm"] == "c1":
            assert in_flight <= 1.0, in_flight
        else:
            assert in_flight > 1.5, in_flight
        assert sorted(rows["sequence"]) == list(range(N_PROBES))
        assert ((rows["ttft_s"] > 0) & (rows["ttft_s"] < rows["latency_s"])).all()
        assert ((rows["tpot_s"] > 0) & (rows["tpot_s"] < rows["latency_s"])).all()
        assert rows["queue_s"].notna().all()
