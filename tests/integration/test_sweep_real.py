"""A real sweep end to end across two real hosts (four real server starts, one per host at a
time): `[sweep]` over num_speculative_tokens {1, 2} on the tiny demo models, 2 boots per
cell, through `specab run-ab --address` run on host 1 of the namespace test bed against a Ray
head there and a worker on host 2 (own address, /tmp, /dev/shm, process table; see
cluster/testbed.py). Host 2's boot logs must come back to the results directory. Then
`validate`, `analyze --json` and the report show the generated arms, the selection with its
guarantee and what to paste. Where the machine refuses the test bed (not root), the same
sweep runs on local Ray instead. Numbers differ between CPUs, so the assertions are about
structure and consistency, never about which k wins."""

from __future__ import annotations

import io
import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from testbed_helpers import TB, namespace_hosts

from bench.cli import run
from bench.demo import DemoModels
from bench.store import load_results

pytestmark = [pytest.mark.vllm, pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(1200)]

SWEEP = """
[sweep]
grid = { "speculative_config.num_speculative_tokens" = [1, 2] }
margin = 0.5
"""


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
    spec = real_experiment(
        tmp,
        tiny_models,
        name="sweep-real",
        experiment={"boots_per_arm": 2, "seed": 5},
        probes={"max_tokens": 16},
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
        address = bed.ray_cluster(cpus=1)
        done = bed.run("h1", [sys.executable, "-m", "bench.cli", *args, "--address", address],
                       timeout=900)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    return spec, root, done.stdout


def test_validate_lists_the_generated_cells(sweep_run: tuple[Path, Path, str]) -> None:
    rc, out = _cli(["validate", str(sweep_run[0])])
    assert rc == 0, out
    assert "2 arm(s) x 2 boot(s) = 4 boots" in out and "group all: k1, k2" in out


def test_run_ab_boots_every_cell_and_selects(sweep_run: tuple[Path, Path, str]) -> None:
    _, root, out = sweep_run
    ok = load_results(root).ok_boots()
    if TB.refusal() is None:  # on the test bed: both hosts booted, every log came back
        assert sorted(set(ok["host"])) == ["h1", "h2"], ok["host"].tolist()
        for boot_id in ok["boot_id"]:
            log = (root / "logs" / f"{boot_id}.log").read_text()
            assert "[specab] launching:" in log
    assert sorted(zip(ok["arm"], ok["boot"], strict=True)) == [
        ("k1", 0),
        ("k1", 1),
        ("k2", 0),
        ("k2", 1),
    ]
    assert (ok["num_drafts"] > 0).all()
    manifest = json.loads((root / "manifest.json").read_text())
    assert [c["arm"] for c in manifest["sweep"]["cells"]] == ["k1", "k2"]
    assert "selection: maximize output_tokens_per_s" in out and "all: " in out


def test_analyze_json_and_report_carry_the_selection(sweep_run: tuple[Path, Path, str]) -> None:
    _, root, _ = sweep_run
    rc, out = _cli(["analyze", str(root), "--json"])
    assert rc == 0
    sel = json.loads(out)["selection"]
    (group,) = sel["groups"]
    assert group["status"] in ("chosen", "undecided") and group["subset"]
    by = {c["arm"]: c for c in group["configs"]}
    assert by["k1"]["speculative_tokens"] == 1 and by["k2"]["speculative_tokens"] == 2
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
