"""Running boots: the vLLM server lifecycle, probes and counters of one boot, the Ray task
around it, the reaper that leaves no orphan, and the run-ab driver (ordering, retries,
resume, sequential looks, progress)."""

from bench.run._attempts import Attempt, Ledger, RunOptions, RunSummary
from bench.run._boot import BootOutcome, BootRequest, NodeSetup, guarded_boot, run_boot
from bench.run._manifest import build_manifest
from bench.run._orchestrate import run_ab
from bench.run._ordering import boot_seed, engine_seed

__all__ = [
    "Attempt", "BootOutcome", "BootRequest", "Ledger", "NodeSetup", "RunOptions", "RunSummary",
    "boot_seed", "build_manifest", "engine_seed", "guarded_boot", "run_ab", "run_boot",
]  # fmt: skip
