"""Bookkeeping of boot attempts for the run-ab driver: what a results directory already
holds (for `--resume`), the row of an attempt that ended without a result (worker or node
died), the columns the driver owns in every row, and the run's summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.experiment import Experiment
from bench.run._cluster import NodeSlots
from bench.run._ordering import PlannedBoot
from bench.store import load_results


@dataclass
class RunSummary:
    """What one run-ab invocation did (this run only; earlier runs are on disk)."""

    root: Path
    ok: dict[str, int]
    failed: dict[str, int]
    lost: list[tuple[str, int]] = field(default_factory=list)
    stopped: str | None = None
    interrupted: bool = False
    per_node: dict[str, dict[str, int]] = field(default_factory=dict)
    wall_s: float = 0.0
    busy_s: float = 0.0  # sum of boot + probe seconds of this run's attempts
    loop_s: float = 0.0  # first dispatch to last result (wall_s minus Ray start-up etc.)
    slots: int = 0

    @property
    def complete(self) -> bool:
        return not (self.lost or self.stopped or self.interrupted)


@dataclass
class _InFlight:
    plan: PlannedBoot
    attempt: int
    boot_id: str
    order: int
    node: NodeSlots
    started_at: datetime
    t0: float


@dataclass
class InFlight:
    """A dispatched attempt, as the driver remembers it."""

    plan: PlannedBoot
    attempt: int
    boot_id: str
    order: int
    node: NodeSlots
    started_at: datetime
    t0: float  # monotonic dispatch time
    slot: int = 0  # index among the node's slots


def now_utc() -> datetime:
    return datetime.now(UTC)


def existing_attempts(root: Path) -> tuple[dict[str, set[int]], dict[tuple[str, int], int], int]:
    """(ok boot indices per arm, highest attempt per (arm, boot), next global order)."""
    b = load_results(root).boots
    ok: dict[str, set[int]] = {}
    last: dict[tuple[str, int], int] = {}
    for arm, boot, attempt, status in zip(
        b["arm"], b["boot"], b["attempt"], b["status"], strict=True
    ):
        key = (str(arm), int(boot))
        last[key] = max(last.get(key, 0), int(attempt))
        if status == "ok":
            ok.setdefault(str(arm), set()).add(int(boot))
    order = int(b["order"].max()) + 1 if len(b) and b["order"].notna().any() else 0
    return ok, last, order


def failed_row(spec: Experiment, f: InFlight, error: str, log_path: str) -> dict[str, Any]:
    """A failed attempt row built by the driver (also the defaults under a task's row)."""
    return {
        "experiment": spec.experiment.name,
        "arm": f.plan.arm,
        "boot": f.plan.boot,
        "attempt": f.attempt,
        "boot_id": f.boot_id,
        "status": "failed",
        "error": error,
        "host": f.node.label,
        "gpu": "",
        "started_at": f.started_at,
        "finished_at": now_utc(),
        "log_path": log_path,
    }


def stamp_row(
    row: dict[str, Any], experiment: str, f: InFlight, log_path: str, seed: int | None
) -> None:
    """Columns the driver owns: identity, launch order, block, node label, log path."""
    row.update(
        experiment=experiment,
        arm=f.plan.arm,
        boot=f.plan.boot,
        attempt=f.attempt,
        boot_id=f.boot_id,
        order=f.order,
        block=f.plan.block,
        host=f.node.label,
        log_path=log_path,
    )
    if "engine_seed" not in row:
        row["engine_seed"] = seed
