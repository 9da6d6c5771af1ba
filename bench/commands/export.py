"""`specab export mlflow DIR`: a results directory as MLflow runs, for teams that compare runs
in a tracker (AIPerf's `--mlflow-tracking-uri`, specdec_bench's `--mlflow` do the same).

The runs' structure is `bench.tracking.mlflow_runs` (what `run-ab --track` writes boot by boot
while a campaign runs): one parent run per experiment, one nested child run per arm with
every ok boot's metrics at step = its launch order, estimates and verdicts. MLflow is an
optional extra (`pip install 'specab[tracking]'`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bench.commands.options import (
    ResultsDir,
    results_dir_not_spec,
)

export_app = typer.Typer(help="Export results to experiment trackers.")
OPTION = "--tracking-uri"


def export_mlflow_run(
    results_dir: Path, *, tracking_uri: str | None, experiment: str | None
) -> tuple[str, str, int]:
    """Log `results_dir` to MLflow; (experiment id, parent run id, child runs)."""
    from bench import stats
    from bench.report import render_report
    from bench.store import load_results
    from bench.tracking import (
        check_server,
        finish_runs,
        log_boot,
        mlflow_client,
        open_runs,
        quick_requests,
    )

    res = load_results(results_dir)  # refuse a directory before the store is touched
    client = mlflow_client(tracking_uri, OPTION)
    check_server(client, tracking_uri, OPTION)
    result = stats.analyze(res, source=str(results_dir))
    report_dir = results_dir / "report"
    if not (report_dir / "report.html").is_file():
        render_report(results_dir, None)
    with quick_requests():
        runs = open_runs(client, experiment or res.experiment, res.manifest, results_dir)
        for arm in result.arms:
            for boot in arm.per_boot:
                log_boot(runs, arm.arm, boot)
        finish_runs(runs, result, report_dir)
    exp = client.get_run(runs.parent).info.experiment_id
    return str(exp), runs.parent, len(runs.children)


@export_app.command("mlflow")
def export_mlflow(
    results_dir: ResultsDir,
    tracking_uri: Annotated[
        str | None,
        typer.Option(
            "--tracking-uri",
            help="e.g. http://mlflow:5000 or sqlite:///mlflow.db "
            "(default: MLFLOW_TRACKING_URI, else MLflow's default).",
        ),
    ] = None,
    experiment: Annotated[
        str | None, typer.Option("--experiment", help="MLflow experiment (default: DIR's).")
    ] = None,
) -> None:
    """One parent run for the experiment, one child run per arm (per-boot metrics by launch
    order, estimates, verdict tags), the report and figures as artifacts."""
    results_dir_not_spec(results_dir)
    exp_id, run_id, children = export_mlflow_run(
        results_dir, tracking_uri=tracking_uri, experiment=experiment
    )
    typer.echo(f"logged to MLflow experiment {exp_id}: run {run_id} with {children} arm run(s)")


def register(app: typer.Typer) -> None:
    app.add_typer(export_app, name="export")
