"""`run-ab --track URI`: a campaign in MLflow while it runs, so a team watches it in MLflow's
own UI instead of a log file on a compute node.

The driver only hands each landed boot to `LiveTracker.boot_landed`, which queues it; one
background thread does every MLflow call (`mlflow_runs`, the very calls `export mlflow`
makes). On each landing it reads the results so far (the driver's, in memory) and logs the
ok boots not logged yet with the values `analyze` reports for them; at the end it logs the
analysis, the report and the verdicts. A tracker that is down or refuses a call never stops
or slows the campaign: the first failure is said once, and the rest of the run goes
untracked (`specab export mlflow DIR` writes the same runs afterwards). A URI MLflow cannot
parse, or MLflow missing, is refused before anything is written.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.errors import SpecabError
from bench.records import ALL_METRICS, Results
from bench.tracking.mlflow_runs import (
    TrackedRuns,
    finish_runs,
    log_boot,
    mlflow_client,
    open_runs,
    quick_requests,
)

OPTION = "--track"
FINISH_WAIT_S = 120.0  # the end of a run waits this long at most for the tracker


class LiveTracker:
    """Logs a results directory to MLflow as its boots land (one background thread)."""

    def __init__(self, uri: str, results_dir: Path, note: Callable[[str], None]) -> None:
        self.client = mlflow_client(uri, OPTION)  # one line, exit 2, before anything
        self.uri, self.root, self.note = uri, results_dir, note
        self.runs: TrackedRuns | None = None
        self.logged: dict[str, tuple[Any, ...]] = {}  # boot_id -> the values logged
        self.failed: str | None = None
        self.current: Callable[[], Results] | None = None  # the driver's results, in memory
        self._queue: queue.Queue[str] = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="specab-track", daemon=True)
        self._thread.start()

    def boot_landed(
        self, _record: object = None, current: Callable[[], Results] | None = None
    ) -> None:
        """Called by the driver after a boot's files are written, with its results so far:
        never blocks, never raises."""
        self.current = current or self.current
        self._queue.put("sync")

    def finish(self) -> str:
        """Log the end (analysis, report, verdicts) and wait for it, at most FINISH_WAIT_S;
        returns one line on where the campaign was tracked."""
        self._queue.put("finish")
        self._thread.join(FINISH_WAIT_S)
        if self._thread.is_alive():
            return f"tracking: MLflow at {self.uri} did not finish within {FINISH_WAIT_S:.0f} s"
        if self.failed or self.runs is None:
            return (
                f"tracking: not tracked ({self.failed or 'nothing landed'}); write the runs "
                f"now with: specab export mlflow {self.root} --tracking-uri {self.uri}"
            )
        return f"tracked in MLflow at {self.uri}: run {self.runs.parent}"

    def close(self) -> None:
        """Stop the thread without logging more (the run failed before its end)."""
        self._queue.put("close")

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            while item == "sync" and not self._queue.empty():
                item = self._queue.get()  # boots that landed meanwhile: one sync for all
            if item == "close":
                return
            if self.failed is None:
                try:
                    with quick_requests():
                        self._sync()
                        if item == "finish" and self.runs is not None:
                            self._finish()
                except Exception as exc:  # a tracker's failure is never the campaign's
                    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                    self.failed = f"{type(exc).__name__}: {first[:200]}"
                    self.note(
                        f"tracking: MLflow at {self.uri} failed ({self.failed}); the campaign "
                        "goes on untracked"
                    )
            if item == "finish":
                return

    def _sync(self) -> None:
        """Open the runs once the manifest exists; log every ok boot not logged yet."""
        from bench.stats import per_boot
        from bench.store import load_results

        if not (self.root / "manifest.json").is_file():
            return
        try:
            res = self.current() if self.current else load_results(self.root)
            boots = per_boot(res)
        except SpecabError:
            return  # results the analysis cannot read yet; the next landing tries again
        if self.runs is None:
            self.runs = open_runs(self.client, res.experiment, res.manifest, self.root)
        for arm, metrics in boots.items():
            for b in metrics:
                values = (b.order, *(getattr(b, m) for m in ALL_METRICS))
                if self.logged.get(b.boot_id) != values:
                    log_boot(self.runs, arm, b)
                    self.logged[b.boot_id] = values

    def _finish(self) -> None:
        from bench import stats
        from bench.report import render_report
        from bench.store import load_results

        assert self.runs is not None
        report_dir = self.root / "report"
        if not (report_dir / "report.html").is_file():
            render_report(self.root, None)
        res = self.current() if self.current else load_results(self.root)
        result = stats.analyze(res, source=str(self.root))
        finish_runs(self.runs, result, report_dir)
