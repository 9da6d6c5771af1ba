"""`run-ab --track URI` on real Ray with the fake server, into a real MLflow sqlite store read
back with MLflow's own client: each boot is logged as it lands (its metrics exist before the
last boot ends), the tracked runs equal what `export mlflow` writes afterwards from the same
directory, and a tracker that is down is said once while the campaign finishes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.cli import run
from bench.store import load_results

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600), pytest.mark.usefixtures("shared_ray")]
mlflow = pytest.importorskip("mlflow", reason="the tracking extra: pip install -e '.[tracking]'")

ARMS = {"base": {"SPECAB_FAKE_ACCEPT": "0.5"}, "fix": {"SPECAB_FAKE_ACCEPT": "0.8"}}


def _runs(client: Any, experiment: str) -> tuple[Any, dict[str, Any]]:
    """The parent run of an experiment and its arm runs by name."""
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("specab.kind") == "experiment"]
    children = {
        r.data.tags["mlflow.runName"]: r
        for r in runs
        if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id
    }
    return parent, children


def _artifacts(client: Any, run_id: str, path: str | None = None) -> set[str]:
    out: set[str] = set()
    for a in client.list_artifacts(run_id, path):
        out |= _artifacts(client, run_id, a.path) if a.is_dir else {a.path}
    return out


def _content(client: Any, run: Any) -> dict[str, Any]:
    """What a run says, without what differs between two writes (ids, times, names)."""
    tags = {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.")}
    history = {
        key: sorted(
            (m.step, round(m.value, 9)) for m in client.get_metric_history(run.info.run_id, key)
        )
        for key in run.data.metrics
    }
    return {
        "params": run.data.params,
        "tags": tags,
        "history": history,
        "artifacts": _artifacts(client, run.info.run_id),
        "status": run.info.status,
    }


def test_a_tracked_campaign_is_logged_as_it_runs_and_equals_the_export(
    tmp_path: Path,
    fake_experiment: Callable[..., Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)  # a sqlite store keeps its artifacts in ./mlruns
    spec = fake_experiment(tmp_path / "exp", ARMS, name="tracked", boots_per_arm=3)
    root = tmp_path / "results"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert run(["run-ab", str(spec), "--results-dir", str(root), "--quiet", "--track", uri]) == 0
    out = capsys.readouterr().out
    assert "tracked in MLflow at " in out and "failed" not in out
    assert run(["export", "mlflow", str(root), "--tracking-uri", uri, "--experiment", "later"]) == 0

    client = MlflowClient(uri)
    parent, arms = _runs(client, "tracked")
    e_parent, e_arms = _runs(client, "later")
    assert sorted(arms) == sorted(e_arms) == ["base", "fix"]
    assert _content(client, parent) == _content(client, e_parent)
    for name in arms:
        assert _content(client, arms[name]) == _content(client, e_arms[name]), name
    assert arms["fix"].data.tags["verdict.acceptance_pos0"] == "improved"
    assert arms["fix"].data.tags["boot_modes"] == "1"  # one population (2: the boots apart named)
    assert {"analysis.json", "report/report.html"} <= _artifacts(client, parent.info.run_id)

    # live: the first boot to land was in MLflow before the last boot ended
    ok = load_results(root).ok_boots().sort_values("finished_at")
    first, last = ok.iloc[0], ok.iloc[-1]
    history = client.get_metric_history(arms[first["arm"]].info.run_id, "boot.acceptance_pos0")
    logged = min(m.timestamp for m in history if m.step == int(first["order"]))
    assert logged < last["finished_at"].timestamp() * 1000


def test_a_tracker_that_is_down_is_said_once_and_the_campaign_finishes(
    tmp_path: Path, fake_experiment: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    spec = fake_experiment(tmp_path / "exp", ARMS, name="untracked", boots_per_arm=2)
    root = tmp_path / "results"
    down = "http://127.0.0.1:9"  # nothing listens: every request is refused
    args = ["run-ab", str(spec), "--results-dir", str(root), "--quiet", "--no-report"]
    assert run([*args, "--track", down]) == 0
    out = capsys.readouterr().out
    assert out.count(f"tracking: MLflow at {down} failed") == 1, out
    assert f"specab export mlflow {root} --tracking-uri {down}" in out
    assert len(load_results(root).ok_boots()) == 4
