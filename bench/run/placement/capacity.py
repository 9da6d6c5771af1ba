"""Ray connection and capacity: local Ray started in-process, or an existing cluster.

Slots are computed per node from the per-boot `[resources]`: a node holding 8 CPUs and
1 GPU runs min(8 / cpu, 1 / gpu) boots at once. The driver keeps per-node slot counts itself
and places each boot with node affinity, which is what lets it balance arms across nodes.
A gang boot (`nodes = N`) takes one slot on each of N distinct nodes (the resources are
then per node), placed as one STRICT_SPREAD placement group, and all N within one fabric
group: nodes started with the same custom resource `specab_fabric_<group>` (Sparks linked
pairwise: one group per pair; NCCL has no route between pairs). Nodes without one form one
group of their own.
"""

from __future__ import annotations

import math
import os
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.errors import SpecabError
from bench.experiment import ResourcesSection

FABRIC_PREFIX = "specab_fabric_"  # a node's fabric group: Ray resource specab_fabric_<group>


@dataclass(frozen=True)
class NodeSlots:
    node_id: str
    label: str  # hostname, made unique when several nodes share one (local test clusters)
    slots: int
    fabric: str = ""  # the node's fabric group ("": none declared)


def fabric_of(resources: dict[str, float]) -> str:
    """The fabric group a node declares (`specab_fabric_<group>`), "" when none."""
    groups = sorted(k.removeprefix(FABRIC_PREFIX) for k in resources if k.startswith(FABRIC_PREFIX))
    return groups[0] if groups else ""


def fabric_groups(nodes: list[NodeSlots]) -> dict[str, list[NodeSlots]]:
    out: dict[str, list[NodeSlots]] = {}
    for n in nodes:
        out.setdefault(n.fabric, []).append(n)
    return out


def ray_request(res: ResourcesSection) -> dict[str, float]:
    """The per-boot request in Ray's resource names (memory in bytes)."""
    req: dict[str, float] = {"CPU": res.cpu, "GPU": res.gpu, **res.custom}
    if res.memory_gb:
        req["memory"] = res.memory_gb * 2**30
    return {k: v for k, v in req.items() if v > 0}


def boot_capacity(slots: list[int], gang: int) -> int:
    """Most boots of `gang` distinct nodes that can run at once on nodes with `slots`: the
    largest k with sum(min(s, k)) >= gang * k (a node serves each gang at most once)."""
    k = 0
    while sum(min(s, k + 1) for s in slots) >= gang * (k + 1):
        k += 1
    return k


def gang_capacity(nodes: list[NodeSlots], gang: int) -> int:
    """Most boots of `gang` nodes at once when each gang stays within one fabric group."""
    if gang == 1:
        return boot_capacity([n.slots for n in nodes], 1)
    return sum(boot_capacity([n.slots for n in g], gang) for g in fabric_groups(nodes).values())


def bundle(res: ResourcesSection) -> dict[str, float]:
    """One node's bundle of a gang boot's placement group (Ray refuses empty bundles)."""
    return ray_request(res) or {"CPU": 0.001}


def task_options(res: ResourcesSection) -> dict[str, Any]:
    opts: dict[str, Any] = {"num_cpus": res.cpu, "num_gpus": res.gpu, "max_retries": 0}
    if res.memory_gb:
        opts["memory"] = int(res.memory_gb * 2**30)
    if res.custom:
        opts["resources"] = dict(res.custom)
    return opts


def node_capacity(node_resources: dict[str, float], req: dict[str, float]) -> int:
    """How many boots with request `req` fit on a node at once."""
    if not req:
        return max(1, int(node_resources.get("CPU", 1)))
    return min(math.floor(node_resources.get(k, 0.0) / v + 1e-9) for k, v in req.items())


def connect(address: str | None, *, num_cpus: int | None = None) -> bool:
    """Start local Ray in-process (address None) or join `address`; True if we started it."""
    import ray

    if ray.is_initialized():
        return False
    common: dict[str, Any] = {
        "log_to_driver": False,  # boots log to files; worker chatter would break the display
        "configure_logging": True,
        "logging_level": "ERROR",
    }
    if address is None:
        local: dict[str, Any] = {
            "address": "local",  # never silently join someone else's `ray start` cluster
            "include_dashboard": False,
            "object_store_memory": 80 * 2**20,
            "num_cpus": num_cpus or os.cpu_count() or 1,
        }
        try:
            ray.init(**local, **common)
        except Exception as exc:  # Ray raises a bare Exception for this one
            if not _stopped_a_slow_start(exc):
                raise
            ray.init(**local, **common)  # once more: a busy node's raylet may be slow, once
        return True
    try:
        ray.init(address=address, **common)
    except (ConnectionError, ValueError) as exc:
        raise SpecabError(
            f"cannot connect to the Ray cluster at {address!r} ({exc})",
            field="--address",
            fix="start it with `ray start --head` (see cluster/README.md) or omit --address "
            "to run on local Ray",
        ) from None
    return True


def local_session() -> Path | None:
    """The session directory of the Ray this process started (Ray's temp dir, e.g.
    /tmp/ray/session_...), to remove when it ends: each local run would leave one behind."""
    import ray

    context = ray.get_runtime_context()
    session = Path(context.get_temp_dir()) / context.get_session_name()
    return session if session.name.startswith("session_") and session.is_dir() else None


def disconnect(session: Path | None) -> None:
    """Shut this process's Ray down, then remove `session` (a local Ray's own session
    directory; None: a cluster's, which its owner keeps) and its `session_latest` link when
    it points there. Never another process's session: only the path this run recorded."""
    import ray

    ray.shutdown()
    if session is None:
        return
    shutil.rmtree(session, ignore_errors=True)
    latest = session.parent / "session_latest"
    if latest.is_symlink() and os.readlink(latest) == str(session):
        latest.unlink(missing_ok=True)


def _stopped_a_slow_start(exc: Exception) -> bool:
    """Stop what a local start left when its raylet did not register in Ray's fixed 30 s
    (seen on a busy 2-core machine, the driver pinned to one core); True if it was that.

    Ray loses the `Node` when its constructor raises, so it is taken from the traceback to
    run Ray's own `kill_all_processes` (GCS, raylet and the rest that start spawned)."""
    if "timed out during startup" not in str(exc):
        return False
    tb = exc.__traceback__
    while tb is not None:
        node: Any = tb.tb_frame.f_locals.get("self")
        if type(node).__name__ == "Node" and hasattr(node, "kill_all_processes"):
            node.kill_all_processes(check_alive=False, allow_graceful=True, wait=True)
            return True
        tb = tb.tb_next
    return False


def cluster_slots(res: ResourcesSection, spec_file: str | Path) -> list[NodeSlots]:
    """Alive nodes and how many boots each can run; SpecabError if none can run one."""
    import ray

    req = ray_request(res)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    names = Counter(str(n.get("NodeManagerHostname", "?")) for n in nodes)
    out = []
    for n in sorted(nodes, key=lambda n: str(n["NodeID"])):
        host = str(n.get("NodeManagerHostname", "?"))
        label = host if names[host] == 1 else f"{host}:{str(n['NodeID'])[:6]}"
        offers = dict(n.get("Resources", {}))
        k = node_capacity(offers, req)
        if k > 0:
            out.append(NodeSlots(str(n["NodeID"]), label, k, fabric_of(offers)))
    if not out:
        have = sorted({k for n in nodes for k in n.get("Resources", {}) if "node:" not in k})
        raise SpecabError(
            f"no Ray node can run a boot needing {req} (cluster resources: {have})",
            file=spec_file,
            field="resources",
            fix="lower [resources] or start nodes with them, e.g. `ray start --resources "
            "'{\"GB10\": 1}'`",
        )
    if len(out) < res.nodes:
        raise SpecabError(
            f"a boot spans {res.nodes} nodes but only {len(out)} Ray node(s) can run a member "
            f"needing {req}",
            file=spec_file,
            field="resources.nodes",
            fix=f"start {res.nodes} nodes with those resources, or lower [resources] nodes",
        )
    groups = fabric_groups(out)
    if res.nodes > 1 and max(len(g) for g in groups.values()) < res.nodes:
        sizes = ", ".join(f"{f or '(none)'}: {len(g)}" for f, g in sorted(groups.items()))
        raise SpecabError(
            f"a boot spans {res.nodes} nodes of one fabric group, but no group has that many "
            f"nodes that can run a member (nodes per group: {sizes})",
            file=spec_file,
            field="resources.nodes",
            fix=f"give {res.nodes} linked nodes the same `{FABRIC_PREFIX}<group>` resource "
            "(docs/cluster.md, GB10 recipe), or lower [resources] nodes",
        )
    return out
