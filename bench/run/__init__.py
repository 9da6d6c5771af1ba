"""Running boots. The layers, each importing only the ones before it: `attempt` (the
driver's columns of one attempt, which both sides share) and `node` (what a node gives an
attempt, asked and made once: scratch, compile cache, CPU binding, GPUs, log shipping);
`process` (one node's processes of a boot); `boot` (one boot end to end); `placement` (Ray:
capacity, the task, remote gang members); `driver` (run-ab: order, dispatch, retries,
resume, looks, progress)."""

from bench.run.attempt import Attempt
from bench.run.boot import BootOutcome, BootRequest, guarded_boot, run_boot
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
    "CPU_BIND", "MAX_LOG_BYTES", "Attempt", "BootOutcome", "BootRequest", "Ledger",
    "NodeAsk", "NodeEnvironment", "RunOptions", "RunSummary", "boot_seed", "cache_state",
    "cpu_binding_for", "engine_seed", "fresh_node_log", "guarded_boot", "jit_cache_env",
    "node_environment", "node_workdir", "read_log_tail", "run_ab", "run_boot",
    "share_model_infos", "visible_gpus",
]  # fmt: skip
