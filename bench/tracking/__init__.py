"""Where a campaign is tracked: a results directory as MLflow runs (`mlflow_runs`: one parent
run per experiment, one child run per arm), written after a run (`specab export mlflow`) or
boot by boot while it runs (`live_tracking`: `run-ab --track`), by the same calls. It reads
what `bench.store` loads, logs what `bench.stats` computed and the report `bench.report`
renders; MLflow is an optional extra, imported only when a tracker is used."""

# The face loads its modules on first use (PEP 562): importing it never imports MLflow.
from typing import TYPE_CHECKING, Any

from bench import lazy_attribute

if TYPE_CHECKING:
    from bench.tracking.live_tracking import LiveTracker
    from bench.tracking.mlflow_runs import (
        check_server,
        finish_runs,
        log_boot,
        mlflow_client,
        open_runs,
        quick_requests,
    )

_WHERE = {
    "LiveTracker": "bench.tracking.live_tracking",
    "check_server": "bench.tracking.mlflow_runs",
    "finish_runs": "bench.tracking.mlflow_runs",
    "log_boot": "bench.tracking.mlflow_runs",
    "mlflow_client": "bench.tracking.mlflow_runs",
    "open_runs": "bench.tracking.mlflow_runs",
    "quick_requests": "bench.tracking.mlflow_runs",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _WHERE, name)


__all__ = [
    "LiveTracker", "check_server", "finish_runs", "log_boot", "mlflow_client", "open_runs",
    "quick_requests",
]  # fmt: skip
