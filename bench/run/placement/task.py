"""The body of one Ray task = one boot attempt, run on the node Ray placed it on.

The task asks its node once for what is node-local (workdir, log file, compile cache, JIT
caches, CPU binding, GPUs: `node_ask`, answered by `bench.run.node`'s `node_environment`),
passes that record down, and runs the boot under a `BootGuard` watchdog that kills the
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

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.errors import SpecabError
from bench.records import BootRecord, ProbeRecord
from bench.run.boot import BootRequest, failed_record, run_boot
from bench.run.compile_caches import DEFAULT_CACHE_GB, gib_to_bytes
from bench.run.node import NodeAsk, NodeEnvironment, cache_key, node_environment
from bench.run.placement.remote_members import MemberNode, RayMembers
from bench.run.process import BootGuard


@dataclass(frozen=True)
class AttemptSpec:
    """What the driver sends to the task (all picklable)."""

    request: BootRequest
    driver_log: str  # the log in the driver's results dir, used as is on the driver's node
    driver_node_id: str = ""  # "" = every node shares the driver's filesystem
    compile_cache: bool = True  # keep vLLM's compile cache per arm definition on the node
    compile_cache_gb: float = DEFAULT_CACHE_GB  # the node's kept compile caches, at most
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


def node_ask(a: AttemptSpec, rank: int = 0) -> NodeAsk:
    """What the attempt's server of `rank` (0: the head or the only one; r: gang member r)
    asks of its node: the one place the driver's settings become node settings."""
    spec, at = a.request.spec, a.request.attempt
    slot = a.cpu_slot if rank == 0 else (a.member_slots or (None,) * rank)[rank - 1]
    arm = spec.arm(at.arm)
    return NodeAsk(
        experiment=spec.experiment.name,
        boot_id=at.boot_id,
        rank=rank,
        driver_log_dir=str(Path(a.driver_log).parent),
        driver_node_id=a.driver_node_id,
        cache_key=cache_key(at.arm, a.definition),
        keep_cache=a.compile_cache,
        cache_max_bytes=gib_to_bytes(a.compile_cache_gb),
        in_image=(arm.container or spec.server.container) is not None,
        cpu_slot=slot,
        cpu=spec.resources.cpu,
        gpu=spec.resources.gpu,
    )


def _members(a: AttemptSpec) -> RayMembers | None:
    """The other members' launcher of a gang boot (None for a single-node boot)."""
    spec = a.request.spec
    n = spec.resources.nodes
    if n == 1:
        return None
    hosts = a.request.attempt.hosts(n)
    server = spec.server
    nodes = [
        MemberNode(
            label=hosts[r],
            ask=node_ask(a, r),
            pre_boot=tuple(server.pre_boot),
            min_free_memory_gb=server.min_free_memory_gb,
            memory_wait_s=server.memory_wait_s,
        )
        for r in range(1, n)
    ]
    return RayMembers(nodes, a.member_options)


def run_attempt(a: AttemptSpec) -> TaskResult:
    """Run one boot attempt via `run_boot` (see the module docstring for what it raises)."""
    import ray

    node_id = str(ray.get_runtime_context().get_node_id())
    req = a.request
    started = datetime.now(UTC)
    node: NodeEnvironment | None = None
    members = _members(a)
    try:
        node = node_environment(node_ask(a), node_id)
        with BootGuard(node.guard_file(req.attempt.boot_id), grace_s=5.0) as guard:
            outcome = run_boot(req, node, watch=guard, members=members)
        result = TaskResult(outcome.record, outcome.probes, node_id)
    except SpecabError as exc:
        return TaskResult(node_id=node_id, user_error=exc)
    except OSError as exc:  # scratch dirs or the watchdog: a runtime failure of this node
        error = f"{type(exc).__name__}: {exc}"
        record = failed_record(req, error, started_at=started, node=node)
        result = TaskResult(record, [], node_id)
    finally:
        if node is not None:
            node.release()
    if node is not None:
        result.log_bytes = node.shipped_log()
    if members is not None:
        result.member_logs = members.shipped_logs(req.attempt.boot_id)
    return result


def placement_failed(a: AttemptSpec, error: str) -> TaskResult:
    """The failed attempt of a gang boot whose placement group could not be placed."""
    record = failed_record(a.request, error, started_at=datetime.now(UTC))
    return TaskResult(record, [], "")
