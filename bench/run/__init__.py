"""Running boots. The layers, each importing only the ones before it: `attempt` (the
driver's columns of one attempt, which both sides share), `compile_caches` (a node's kept
compile caches, bounded) and `node` (what a node gives an
attempt, asked and made once: scratch, compile cache, CPU binding, GPUs, log shipping);
`process` (one node's processes of a boot); `boot` (one boot end to end); `placement` (Ray:
capacity, the task, remote gang members); `driver` (run-ab: order, dispatch, retries,
resume, looks, progress)."""

from bench.run.attempt import Attempt
from bench.run.boot import BootOutcome, BootRequest, boot_here, guarded_boot, run_boot
from bench.run.compile_caches import (
    disk_bytes,
    evict_caches,
    gib_to_bytes,
    hold_cache,
    hold_file,
    node_caches,
)
from bench.run.driver import Ledger, RunOptions, RunSummary, boot_seed, engine_seed, run_ab
from bench.run.node import (
    CPU_BIND,
    MAX_LOG_BYTES,
    NodeAsk,
    NodeEnvironment,
    cache_state,
    cpu_binding_for,
    fresh_node_log,
    jit_cache_env,
    node_environment,
    node_workdir,
    read_log_tail,
    share_model_infos,
    visible_gpus,
)

__all__ = [
    "CPU_BIND",
    "MAX_LOG_BYTES",
    "Attempt",
    "BootOutcome",
    "BootRequest",
    "Ledger",
    "NodeAsk",
    "NodeEnvironment",
    "RunOptions",
    "RunSummary",
    "boot_here",
    "boot_seed",
    "cache_state",
    "cpu_binding_for",
    "disk_bytes",
    "engine_seed",
    "evict_caches",
    "fresh_node_log",
    "gib_to_bytes",
    "guarded_boot",
    "hold_cache",
    "hold_file",
    "jit_cache_env",
    "node_caches",
    "node_environment",
    "node_workdir",
    "read_log_tail",
    "run_ab",
    "run_boot",
    "share_model_infos",
    "visible_gpus",
]  # fmt: skip
