"""A results directory as MLflow runs — written by `specab export mlflow` after a run, or
boot by boot while it runs (`run-ab --track`, `live_tracking`): the same calls, so the two
write the same runs.

One parent run per experiment: the manifest's settings as params (the analysis' baseline,
alpha, metrics and margins at the end), `analysis.json` and the report as artifacts. One
child run per arm (tag `mlflow.parentRunId`): the arm's definition and hashes as params and
an artifact, every ok boot's values as metrics with step = its launch order, and at the end
the arm's estimates and intervals, boot counts and each comparison's verdict as tags.
MLflow is an optional extra (`pip install 'specab[tracking]'`); everything goes through
`MlflowClient`, whose calls are safe from any thread.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.errors import SpecabError
from bench.records import ALL_METRICS, Manifest

if TYPE_CHECKING:
    from bench.stats import Analysis, BootMetrics

PARAM_CHARS = 500  # MLflow's smallest param limit across versions and backends
PER_BOOT = ALL_METRICS  # each is a field of the analysis's per-boot row
# One try with a short timeout: MLflow's default retries a dead server for minutes.
QUICK = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}


def mlflow_client(uri: str | None, option: str) -> Any:
    """An `MlflowClient` for `uri` (None: MLFLOW_TRACKING_URI, else MLflow's default); a URI
    MLflow refuses, or MLflow missing, is one line naming `option`."""
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise SpecabError(
            "MLflow is not installed",
            field=option,
            fix="pip install 'specab[tracking]' (mlflow-skinny; sqlalchemy for a sqlite store)",
        ) from None
    for name in ("mlflow", "alembic"):  # their INFO lines (database set-up) are not ours
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        return MlflowClient(tracking_uri=uri)
    except Exception as exc:  # MLflow raises many types; every refusal is the user's URI
        raise _refused(uri, option, exc) from None


def check_server(client: Any, uri: str | None, option: str) -> None:
    """Ask an http(s) tracking server to answer once, within seconds (one line if not)."""
    if not uri or not uri.startswith(("http://", "https://")):
        return
    try:
        with quick_requests():
            client.search_experiments(max_results=1)
    except Exception as exc:
        raise _refused(uri, option, exc) from None


def _refused(uri: str | None, option: str, exc: Exception) -> SpecabError:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return SpecabError(
        f"MLflow cannot use {uri!r}: {first[:300]}",
        field=option,
        fix="pass a running tracking server (http://HOST:5000) or a database store "
        "(sqlite:///mlflow.db)",
    )


@contextmanager
def quick_requests() -> Iterator[None]:
    """MLflow's HTTP settings for one try within seconds, unless the user set them."""
    added = {k: v for k, v in QUICK.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


def _param(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= PARAM_CHARS else text[: PARAM_CHARS - 1] + "…"


@dataclass
class TrackedRuns:
    """The parent run and one child run per arm of one results directory."""

    client: Any
    parent: str
    children: dict[str, str] = field(default_factory=dict)


def open_runs(client: Any, experiment: str, manifest: Manifest, results_dir: Path) -> TrackedRuns:
    """Create the parent and the arms' runs with what the manifest says (before any boot)."""
    found = client.get_experiment_by_name(experiment)
    exp_id = found.experiment_id if found else client.create_experiment(experiment)
    tags = {"specab.results_dir": str(results_dir.resolve()), "specab.kind": "experiment"}
    parent = client.create_run(exp_id, run_name=manifest.experiment, tags=tags).info.run_id
    params = {
        "experiment": manifest.experiment,
        "spec_sha256": manifest.spec_sha256,
        "specab_version": manifest.specab_version,
        "probe_sets": _param([(s.name, s.sha256) for s in manifest.probe_sets]),
    }
    _log_params(client, parent, params)
    runs = TrackedRuns(client, parent)
    for entry in manifest.arms:
        tags = {"mlflow.parentRunId": parent, "specab.kind": "arm"}
        child = client.create_run(exp_id, run_name=entry.name, tags=tags).info.run_id
        definition = entry.model_dump(mode="json")
        flat = {f"arm.{k}": _param(v) for k, v in definition.get("definition", {}).items()}
        _log_params(
            client, child, {"arm": entry.name, "definition_sha256": entry.definition_sha256, **flat}
        )
        client.log_dict(child, definition, "arm-definition.json")
        runs.children[entry.name] = child
    return runs


def _log_params(client: Any, run: str, params: dict[str, Any]) -> None:
    from mlflow.entities import Param

    client.log_batch(run, params=[Param(k, str(v)) for k, v in params.items()])


def log_boot(runs: TrackedRuns, arm: str, boot: BootMetrics) -> None:
    """One ok boot's values on its arm's run, at step = its launch order."""
    from mlflow.entities import Metric

    run = runs.children.get(arm)
    if run is None:
        return
    now = int(time.time() * 1000)
    metrics = [
        Metric(f"boot.{m}", float(getattr(boot, m)), now, int(boot.order))
        for m in PER_BOOT
        if getattr(boot, m) is not None
    ]
    runs.client.log_batch(run, metrics=metrics)


def finish_runs(runs: TrackedRuns, result: Analysis, report_dir: Path) -> None:
    """The end of a run: the analysis' settings, the analysis and the report on the parent;
    estimates, counts, verdicts and whether its boots are one population on each arm; every
    run marked finished."""
    from mlflow.entities import Metric

    from bench.report import analysis_json

    client, now = runs.client, int(time.time() * 1000)
    _log_params(
        client,
        runs.parent,
        {
            "baseline": result.baseline,
            "alpha": result.alpha,
            "primary_metrics": _param(result.primary_metrics),
            "margins": _param(result.margins),
        },
    )
    client.log_dict(runs.parent, analysis_json(result), "analysis.json")
    client.log_artifacts(runs.parent, str(report_dir), artifact_path="report")
    for arm in result.arms:
        run = runs.children.get(arm.arm)
        if run is None:
            continue
        metrics = [
            Metric(f"{name}.{part}", float(getattr(est, part)), now, 0)
            for name, est in arm.metrics.items()
            for part in ("estimate", "ci_low", "ci_high", "between_boot_sd")
            if getattr(est, part) is not None
        ]
        metrics += [
            Metric("boots", arm.boots, now, 0),
            Metric("failed_boots", arm.failed_boots, now, 0),
        ]
        client.log_batch(run, metrics=metrics)
        modes = max((m.modes for m in arm.modes), default=1)
        client.set_tag(run, "boot_modes", str(modes))  # 2: some boots lie apart (named)
        if modes > 1:
            apart = sorted({b for m in arm.modes for b in m.other_boots})
            client.set_tag(run, "boots_apart", ", ".join(apart))
        if arm.low_drafting:  # out of acceptance, in speed
            listed = ", ".join(f"{x.boot_id} ({x.share:.0%})" for x in arm.low_drafting)
            client.set_tag(run, "boots_low_drafting", listed)
        for c in result.comparisons:
            if c.arm == arm.arm:
                client.set_tag(run, f"verdict.{c.metric}", c.verdict)
                client.set_tag(run, f"difference.{c.metric}", f"{c.difference}")
    for run in [*runs.children.values(), runs.parent]:
        client.set_terminated(run)
