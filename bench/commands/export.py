"""`specab export mlflow DIR`: a results directory as MLflow runs, for teams that compare runs
in a tracker (AIPerf's `--mlflow-tracking-uri`, specdec_bench's `--mlflow` do the same).

One parent run per experiment (its settings as params, the report and figures as
artifacts), one nested child run per arm: the arm's definition and hashes as params (the
whole definition as an artifact), every ok boot's metrics with step = its launch order, the
arm's estimates and intervals as summary metrics, and each comparison's verdict as a tag.
MLflow is an optional extra (`pip install 'specab[tracking]'`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bench.errors import SpecabError

if TYPE_CHECKING:
    from bench.records import ManifestArm
    from bench.stats import Analysis

export_app = typer.Typer(help="Export results to experiment trackers.")
PARAM_CHARS = 500  # MLflow's smallest param limit across versions and backends
PER_BOOT = ("acceptance_pos0", "mean_accepted_length", "output_tokens_per_s")


def _mlflow() -> Any:
    try:
        import mlflow
    except ImportError:
        raise SpecabError(
            "MLflow is not installed",
            field="export mlflow",
            fix="pip install 'specab[tracking]' (mlflow-skinny; sqlalchemy for a sqlite store)",
        ) from None
    return mlflow


def check_tracking_uri(mlflow: Any, uri: str | None) -> None:
    """Ask MLflow to resolve `uri` (and a tracking server to answer once, within seconds)
    before anything is read or logged; whatever it refuses is one line naming the option."""
    if not uri:
        return
    import os
    from unittest import mock

    # one try with a short timeout: MLflow's default retries a dead server for minutes
    quick = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
    try:
        with mock.patch.dict(os.environ, quick):
            client = mlflow.tracking.MlflowClient(tracking_uri=uri)
            if uri.startswith(("http://", "https://")):
                client.search_experiments(max_results=1)
    except Exception as exc:  # MLflow raises many types; every refusal is the user's URI
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise SpecabError(
            f"MLflow cannot use {uri!r}: {first[:300]}",
            field="--tracking-uri",
            fix="pass a running tracking server (http://HOST:5000) or a database store "
            "(sqlite:///mlflow.db)",
        ) from None


def _param(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= PARAM_CHARS else text[: PARAM_CHARS - 1] + "…"


def _arm_run(mlflow: Any, arm: Any, entry: ManifestArm | None, result: Analysis) -> None:
    """One nested run: params, per-boot metrics by launch order, summaries, verdict tags."""
    definition = entry.model_dump(mode="json") if entry is not None else {}
    flat = {f"arm.{k}": _param(v) for k, v in definition.get("definition", {}).items()}
    mlflow.log_params(
        {"arm": arm.arm, "definition_sha256": definition.get("definition_sha256", ""), **flat}
    )
    mlflow.log_dict(definition, "arm-definition.json")
    for boot in arm.per_boot:
        values = {m: getattr(boot, m) for m in PER_BOOT if getattr(boot, m) is not None}
        mlflow.log_metrics({f"boot.{m}": v for m, v in values.items()}, step=int(boot.order))
    for name, est in arm.metrics.items():
        for part in ("estimate", "ci_low", "ci_high", "between_boot_sd"):
            value = getattr(est, part)
            if value is not None:
                mlflow.log_metric(f"{name}.{part}", float(value))
    mlflow.log_metrics({"boots": arm.boots, "failed_boots": arm.failed_boots})
    for c in result.comparisons:
        if c.arm == arm.arm:
            mlflow.set_tags(
                {f"verdict.{c.metric}": c.verdict, f"difference.{c.metric}": f"{c.difference}"}
            )


def export_mlflow_run(
    results_dir: Path, *, tracking_uri: str | None, experiment: str | None
) -> tuple[str, str, int]:
    """Log `results_dir` to MLflow; (experiment id, parent run id, child runs)."""
    from bench import stats
    from bench.report import render_report
    from bench.store import load_results

    mlflow = _mlflow()
    check_tracking_uri(mlflow, tracking_uri)
    res = load_results(results_dir)
    result = stats.analyze(res.probes, res.boots, res.manifest, source=str(results_dir))
    report_dir = results_dir / "report"
    if not (report_dir / "report.html").is_file():
        render_report(results_dir, None)
    if tracking_uri:
        mlflow.set_tracking_uri(tracking_uri)
    exp = mlflow.set_experiment(experiment or res.experiment)
    definitions = {a.name: a for a in res.manifest.arms}
    m = res.manifest
    with mlflow.start_run(run_name=res.experiment) as parent:
        mlflow.log_params(
            {
                "experiment": res.experiment,
                "baseline": result.baseline,
                "alpha": result.alpha,
                "primary_metrics": _param(result.primary_metrics),
                "margins": _param(result.margins),
                "spec_sha256": m.spec_sha256,
                "specab_version": m.specab_version,
                "probe_sets": _param([(s.name, s.sha256) for s in m.probe_sets]),
            }
        )
        mlflow.set_tags(
            {"specab.results_dir": str(results_dir.resolve()), "specab.kind": "experiment"}
        )
        mlflow.log_dict(result.to_json(), "analysis.json")
        mlflow.log_artifacts(str(report_dir), artifact_path="report")
        for arm in result.arms:
            with mlflow.start_run(run_name=arm.arm, nested=True):
                mlflow.set_tag("specab.kind", "arm")
                _arm_run(mlflow, arm, definitions.get(arm.arm), result)
        return str(exp.experiment_id), str(parent.info.run_id), len(result.arms)


@export_app.command("mlflow")
def export_mlflow(
    results_dir: Annotated[Path, typer.Argument(metavar="DIR", help="Results directory.")],
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
    exp_id, run_id, children = export_mlflow_run(
        results_dir, tracking_uri=tracking_uri, experiment=experiment
    )
    typer.echo(f"logged to MLflow experiment {exp_id}: run {run_id} with {children} arm run(s)")


def register(app: typer.Typer) -> None:
    app.add_typer(export_app, name="export")
