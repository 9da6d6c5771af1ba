"""One boot outside Ray (`specab boot`, the real tests' single boots) under the watchdog a
Ray task's boot has: if this process dies, even by SIGKILL, the server's process groups die
with it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench.run.boot.one_boot import BootOutcome, BootRequest, run_boot
from bench.run.node import NodeEnvironment


def guarded_boot(
    req: BootRequest, node: NodeEnvironment, *, on_started: Callable[[int, int], None] | None = None
) -> BootOutcome:
    """`run_boot` under a `BootGuard` holding its process groups."""
    from bench.run.process import BootGuard

    with BootGuard(node.guard_file(req.attempt.boot_id), grace_s=5.0) as guard:
        return run_boot(req, node, on_started=on_started, watch=guard)


def boot_here(req: BootRequest, log: Path) -> BootOutcome:
    """`guarded_boot` on this machine, in a work directory of its own removed after it."""
    workdir = Path(tempfile.mkdtemp(prefix="specab-boot-"))
    try:
        return guarded_boot(req, NodeEnvironment(workdir=workdir, log_file=log))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
