"""The body of one Ray task = one boot attempt, run on the node Ray placed it on.

The task chooses what is node-local (workdir, log file, compile-cache root, CPU binding:
a `NodeSetup`) and runs the boot under a `BootGuard` watchdog that kills the server's
process groups if this worker dies (force-cancel, driver killed), so no EngineCore outlives
its boot. Per-boot settings reach the server through its launch environment only; the
worker's own environment is never changed (Ray reuses workers across boots).

Error contract: runtime failures come back as a failed record; a user mistake
(SpecabError) comes back as `user_error`, whole, and aborts the run; anything else is a bug
and propagates, so the driver stops with its traceback instead of retrying it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from bench.errors import SpecabError
from bench.records import BootRecord, ProbeRecord
from bench.run._boot import BootRequest, NodeSetup, failed_record, run_boot
from bench.run.reaper import BootGuard

MAX_LOG_BYTES = 4 * 2**20  # log tail shipped back when the node does not share the results dir
CPU_BIND = "VLLM_CPU_OMP_THREADS_BIND"
CACHE_ROOT = "VLLM_CACHE_ROOT"


@dataclass(frozen=True)
class AttemptSpec:
    """What the driver sends to the task (all picklable)."""

    request: BootRequest
    driver_log: str  # the log in the driver's results dir, used as is on the driver's node
    driver_node_id: str = ""  # "" = every node shares the driver's filesystem
    compile_cache: bool = True  # keep vLLM's compile cache per arm on the node
    cpu_slot: int | None = None  # CPU-only boots: which of the node's slots (for pinning)


@dataclass
class TaskResult:
    """What the task returns: a record to write, or the user error that aborts the run."""

    record: BootRecord | None = None
    probes: list[ProbeRecord] = field(default_factory=list)
    node_id: str = ""
    log_bytes: bytes | None = None  # set when the log was written on another node
    user_error: SpecabError | None = None  # the exception itself: file, field and fix


def node_workdir(experiment: str) -> Path:
    """Node-local scratch: overlays, patch dirs (content-hashed, reused) and pgid files."""
    root = Path(os.environ.get("SPECAB_WORKDIR") or Path(tempfile.gettempdir()) / "specab-work")
    return root / experiment


def compile_cache_dir(workdir: Path, a: AttemptSpec) -> Path:
    """vLLM's compile cache of this boot: kept per arm on the node, or fresh per boot."""
    at = a.request.attempt
    return workdir / "vllm-cache" / (at.arm if a.compile_cache else f"fresh-{at.boot_id}")


def _cache_state(path: Path) -> str:
    """`warm` when a previous boot left a non-empty cache there, else `cold`."""
    warm = path.is_dir() and any(path.rglob("*"))
    path.mkdir(parents=True, exist_ok=True)
    return "warm" if warm else "cold"


def cpu_binding(a: AttemptSpec) -> dict[str, str]:
    """Pin a CPU-only server to its slot's cores (vllm-cpu's default `auto` binding puts
    every server on the same cores). The experiment file's env, merged over this by
    `launch_plan`, wins when it sets the binding itself."""
    if a.cpu_slot is None:
        return {}
    per = max(1, int(a.request.spec.resources.cpu))
    cpus = sorted(os.sched_getaffinity(0))
    mine = cpus[a.cpu_slot * per : (a.cpu_slot + 1) * per]
    return {CPU_BIND: ",".join(str(c) for c in mine)} if mine else {}


def _gpu_ids() -> str:
    import ray

    ids = ray.get_gpu_ids()
    return ",".join(str(i) for i in ids) or os.environ.get("CUDA_VISIBLE_DEVICES", "")


def _log_tail(path: Path) -> bytes | None:
    if not path.is_file():
        return None
    with path.open("rb") as fh:
        fh.seek(max(0, path.stat().st_size - MAX_LOG_BYTES))
        return fh.read()


def _node_setup(a: AttemptSpec, workdir: Path, local: bool) -> NodeSetup:
    """Log file, compile-cache root and CPU binding of this boot on this node."""
    boot_id = a.request.attempt.boot_id
    cache = compile_cache_dir(workdir, a)
    return NodeSetup(
        workdir=workdir,
        log_file=Path(a.driver_log) if local else workdir / "logs" / f"{boot_id}.log",
        server_env={CACHE_ROOT: str(cache), **cpu_binding(a)},
        compile_cache=_cache_state(cache),
        gpu=_gpu_ids(),
    )


def run_attempt(a: AttemptSpec) -> TaskResult:
    """Run one boot attempt via `run_boot` (see the module docstring for what it raises)."""
    import ray

    node_id = str(ray.get_runtime_context().get_node_id())
    local = not a.driver_node_id or node_id == a.driver_node_id
    req = a.request
    boot_id = req.attempt.boot_id
    workdir = node_workdir(req.spec.experiment.name)
    started = datetime.now(UTC)
    node: NodeSetup | None = None
    try:
        node = _node_setup(a, workdir, local)
        with BootGuard(workdir / "pgids" / f"{boot_id}.{os.getpid()}", grace_s=5.0) as guard:
            outcome = run_boot(req, node, on_started=guard.record)
        result = TaskResult(outcome.record, outcome.probes, node_id)
    except SpecabError as exc:
        return TaskResult(node_id=node_id, user_error=exc)
    except OSError as exc:  # scratch dirs or the watchdog: a runtime failure of this node
        error = f"{type(exc).__name__}: {exc}"
        record = failed_record(req, error, started_at=started, node=node)
        result = TaskResult(record, [], node_id)
    finally:
        if not a.compile_cache:
            shutil.rmtree(compile_cache_dir(workdir, a), ignore_errors=True)
    if not local and node is not None:
        result.log_bytes = _log_tail(node.log_file)
    return result
