"""`specab export mlflow`: a results directory logged to a real MLflow sqlite store and read
back with MLflow's own client."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli import run
from bench.simulate import simulate_results
from bench.store import load_results

mlflow = pytest.importorskip("mlflow", reason="the tracking extra: pip install -e '.[tracking]'")


def test_parent_run_child_per_arm_per_boot_metrics_verdicts_and_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)  # a sqlite store keeps its artifacts in ./mlruns
    results = simulate_results(
        tmp_path / "res",
        {"base": 0.0, "fix": 0.4},
        boots=3,
        seed=3,
        speed={"base": 100.0, "fix": 110.0},
    )
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert run(["export", "mlflow", str(results), "--tracking-uri", uri, "--experiment", "t"]) == 0
    assert "with 2 arm run(s)" in capsys.readouterr().out
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("t")
    runs = client.search_runs([exp.experiment_id])
    by_kind = {
        r.data.tags["specab.kind"]: r
        for r in runs
        if r.data.tags.get("specab.kind") == "experiment"
    }
    parent = by_kind["experiment"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(r.data.tags["mlflow.runName"] for r in children) == ["base", "fix"]
    assert parent.data.params["baseline"] == "base" and parent.data.params["experiment"] == "sim"
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"analysis.json", "report"} <= artifacts
    report = {a.path for a in client.list_artifacts(parent.info.run_id, "report")}
    assert "report/report.html" in report
    fix = next(r for r in children if r.data.tags["mlflow.runName"] == "fix")
    assert fix.data.tags["verdict.mean_accepted_length"] == "improved"
    history = client.get_metric_history(fix.info.run_id, "boot.mean_accepted_length")
    ok = load_results(results).ok_boots()
    assert sorted(m.step for m in history) == sorted(ok[ok["arm"] == "fix"]["order"].tolist())
    assert fix.data.metrics["boots"] == 3 and "mean_accepted_length.estimate" in fix.data.metrics
    assert fix.data.params["arm"] == "fix"


def test_a_directory_that_is_not_results_is_refused_before_the_store_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes").mkdir()
    db = tmp_path / "mlflow.db"
    assert (
        run(["export", "mlflow", str(tmp_path / "notes"), "--tracking-uri", f"sqlite:///{db}"]) == 2
    )
    captured = capsys.readouterr()
    assert "no manifest.json here" in captured.err
    assert not db.exists()  # the directory is checked before MLflow is touched
    assert "INFO" not in captured.out + captured.err


def test_mlflows_own_log_lines_stay_out_of_the_output(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    results = simulate_results(tmp_path / "res", {"base": 0.0, "fix": 0.4}, boots=2, seed=5)
    uri = f"sqlite:///{tmp_path / 'fresh.db'}"  # a new store: MLflow creates its tables
    assert run(["export", "mlflow", str(results), "--tracking-uri", uri]) == 0
    out = capfd.readouterr()
    assert "with 2 arm run(s)" in out.out
    assert "mlflow.store" not in out.out + out.err and "alembic" not in out.out + out.err
