"""The body of one Ray task = one boot attempt, run on the node Ray placed it on.

The task chooses what is node-local (workdir, log file, compile-cache root, CPU binding:
a `NodeSetup`, see `bench.run.node`) and runs the boot under a `BootGuard` watchdog that kills the
server's process groups and containers if this worker dies (force-cancel, driver killed),
so no EngineCore outlives its boot. A gang boot's task runs in bundle 0 of the boot's
placement group (the head); it starts the other members as Ray actors in the other bundles
(`remote_members.RayMembers`), each with its own watchdog on its node, and returns their
logs.
Per-boot settings reach the server through its launch environment only; the worker's own
environment is never changed (Ray reuses workers across boots).

Error contract: runtime failures come back as a failed record; a user mistake
(SpecabError) comes back as `user_error`, whole, and aborts the run; anything else is a bug
and propagates, so the driver stops with its traceback instead of retrying it.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.errors import SpecabError
from bench.records import BootRecord, ProbeRecord
from bench.run.boot import BootRequest, NodeSetup, failed_record, run_boot
from bench.run.node import (
    CACHE_ROOT,
    GPU_ENV,
    cache_key,
    cache_state,
    compile_cache_path,
    cpu_binding_for,
    fresh_node_log,
    jit_cache_env,
    node_workdir,
    read_log_tail,
    share_model_infos,
    visible_gpus,
)
from bench.run.placement.remote_members import MemberNode, RayMembers
from bench.run.process import BootGuard


@dataclass(frozen=True)
class AttemptSpec:
    """What the driver sends to the task (all picklable)."""

    request: BootRequest
    driver_log: str  # the log in the driver's results dir, used as is on the driver's node
    driver_node_id: str = ""  # "" = every node shares the driver's filesystem
    compile_cache: bool = True  # keep vLLM's compile cache per arm definition on the node
    definition: str = ""  # the arm's definition sha256 (the manifest's): the cache's key
    cpu_slot: int | None = None  # CPU-only boots: which of the node's slots (for pinning)
    member_slots: tuple[int | None, ...] = ()  # a gang boot: cpu_slot of members 1..N-1
    member_options: dict[str, Any] = field(default_factory=dict)  # their Ray resources


@dataclass
class TaskResult:
    """What the task returns: a record to write, or the user error that aborts the run."""

    record: BootRecord | None = None
    probes: list[ProbeRecord] = field(default_factory=list)
    node_id: str = ""
    log_bytes: bytes | None = None  # set when the log was written on another node
    user_error: SpecabError | None = None  # the exception itself: file, field and fix
    member_logs: dict[str, bytes] = field(default_factory=dict)  # gang: {file name: log}


def compile_cache_dir(workdir: Path, a: AttemptSpec) -> Path:
    """vLLM's compile cache of this boot: kept per arm on the node, or fresh per boot."""
    at = a.request.attempt
    key = cache_key(at.arm, a.definition)
    return compile_cache_path(workdir, key, at.boot_id, keep=a.compile_cache)


def cpu_binding(a: AttemptSpec) -> dict[str, str]:
    """The head's (or single server's) CPU binding on this node (see `bench.run.node`)."""
    return cpu_binding_for(a.cpu_slot, a.request.spec.resources.cpu)


def _node_setup(a: AttemptSpec, workdir: Path, local: bool) -> NodeSetup:
    """Log file, compile-cache root and CPU binding of this boot on this node."""
    boot_id = a.request.attempt.boot_id
    gpus = visible_gpus(a.request.spec.resources.gpu)  # what the server sees = the record
    cache = compile_cache_dir(workdir, a)
    state = cache_state(cache)
    spec = a.request.spec
    in_image = (spec.arm(a.request.attempt.arm).container or spec.server.container) is not None
    if not in_image:
        share_model_infos(cache, os.environ)
    jit = jit_cache_env(workdir, os.environ) if in_image else {}
    return NodeSetup(
        workdir=workdir,
        log_file=Path(a.driver_log)
        if local
        else fresh_node_log(workdir, str(Path(a.driver_log).parent), f"{boot_id}.log"),
        server_env={CACHE_ROOT: str(cache), **jit, **cpu_binding(a), GPU_ENV: gpus},
        compile_cache=state,
        gpu=gpus,
    )


def _members(a: AttemptSpec) -> RayMembers | None:
    """The other members' launcher of a gang boot (None for a single-node boot)."""
    spec = a.request.spec
    n = spec.resources.nodes
    if n == 1:
        return None
    hosts = a.request.attempt.hosts(n)
    slots = a.member_slots or (None,) * (n - 1)
    nodes = [
        MemberNode(
            label=hosts[r],
            cpu=spec.resources.cpu,
            cpu_slot=slots[r - 1],
            compile_cache=a.compile_cache,
            cache_key=cache_key(a.request.attempt.arm, a.definition),
            pre_boot=tuple(spec.server.pre_boot),
            min_free_memory_gb=spec.server.min_free_memory_gb,
            memory_wait_s=spec.server.memory_wait_s,
            driver_node_id=a.driver_node_id,
            driver_log_dir=str(Path(a.driver_log).parent),
            gpu=spec.resources.gpu,
        )
        for r in range(1, n)
    ]
    return RayMembers(nodes, a.member_options)


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
    members = _members(a)
    try:
        node = _node_setup(a, workdir, local)
        with BootGuard(workdir / "pgids" / f"{boot_id}.{os.getpid()}", grace_s=5.0) as guard:
            outcome = run_boot(req, node, watch=guard, members=members)
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
        result.log_bytes = read_log_tail(node.log_file)
    if members is not None:
        result.member_logs = members.shipped_logs(boot_id)
    return result


def placement_failed(a: AttemptSpec, error: str) -> TaskResult:
    """The failed attempt of a gang boot whose placement group could not be placed."""
    record = failed_record(a.request, error, started_at=datetime.now(UTC))
    return TaskResult(record, [], "")
