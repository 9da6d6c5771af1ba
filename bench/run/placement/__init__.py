"""Where a boot runs under Ray: per-node slots and boot capacity from `[resources]`, the
Ray connection (`capacity`), the task body of one boot attempt on the node Ray placed it on
(`task`), and a gang's members on other nodes, one Ray actor each in its bundle of the boot's
placement group (`remote_members`)."""

from bench.run.placement.capacity import (
    NodeSlots,
    boot_capacity,
    bundle,
    cluster_slots,
    connect,
    disconnect,
    gang_capacity,
    local_session,
    node_capacity,
    ray_request,
    task_options,
)
from bench.run.placement.task import AttemptSpec, TaskResult, placement_failed, run_attempt

__all__ = [
    "AttemptSpec",
    "NodeSlots",
    "TaskResult",
    "boot_capacity",
    "bundle",
    "cluster_slots",
    "connect",
    "disconnect",
    "gang_capacity",
    "local_session",
    "node_capacity",
    "placement_failed",
    "ray_request",
    "run_attempt",
    "task_options",
]  # fmt: skip
