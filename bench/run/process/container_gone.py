"""Whether a member's container is gone after its stop: the runtime's own listing, and the
wait for it. A runtime can return from `rm -f` while the container still exists (a GB10's
hands ~100 GB of unified memory back first): the boot's slot is held until it is gone, and
a boot measured in full stays ok, with a warning.

Past GONE_LIMIT_S the slot is freed, and the container is noted on the node
(`<node root>/lingering/<host>/<name>`): before the next boot on that node starts anything,
it waits for every noted container to go (`node_prep.wait_for_lingering`, within the node's
memory wait) and fails, naming the container, its memory and the fix, if one is still there. A
server started beside it would measure on memory the container still holds, or fail vLLM's
own free-memory check with no word of why."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from pathlib import Path

from bench.experiment import ContainerRef
from bench.run.node import node_root

CONTAINER_GONE_S = 30.0  # after stop + rm: longer than this is said in the boot's warnings
GONE_LIMIT_S = 300.0  # then the slot is freed, and the warning says the container remains


def container_exists(ref: ContainerRef) -> bool:
    """Whether the runtime still lists the container (an unusable runtime: assume gone)."""
    try:
        out = subprocess.run(ref.exists_command(), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and ref.name in out.stdout.split()


def wait_container_gone(container: ContainerRef) -> str | None:
    """After stop and rm -f: wait (holding the boot's slot) until the runtime lets the
    container go, at most GONE_LIMIT_S; a warning when it took longer than CONTAINER_GONE_S
    or is still there, else None. Never a failure: what the boot measured stands."""
    t0 = time.monotonic()
    while container_exists(container) and time.monotonic() - t0 < GONE_LIMIT_S:
        time.sleep(0.5)
    waited = time.monotonic() - t0
    if container_exists(container):
        _note_lingering(container)
        return (
            f"container {container.name} still existed {waited:.0f} s after stop and rm -f: "
            "its slot was freed; the next boot there waits for it to go first"
        )
    if waited > CONTAINER_GONE_S:
        return (
            f"container {container.name} outlived its stop and rm -f by {waited:.0f} s "
            "(its slot was held until it was gone)"
        )
    return None


def _registry() -> Path:
    """This node's notes (by host name: a workdir root shared by several nodes keeps each
    node's apart, and a node never drops another's note for not seeing its container)."""
    return node_root() / "lingering" / socket.gethostname()


def _note_lingering(ref: ContainerRef) -> None:
    with contextlib.suppress(OSError):
        _registry().mkdir(parents=True, exist_ok=True)
        (_registry() / ref.name).write_text(ref.runtime + "\n", encoding="utf-8")


def lingering_containers() -> list[ContainerRef]:
    """The containers noted on this node as outliving their boot's stop."""
    found = sorted(_registry().glob("*")) if _registry().is_dir() else []
    return [ContainerRef(p.read_text(encoding="utf-8").strip(), p.name) for p in found]


def forget_lingering(ref: ContainerRef) -> None:
    """The noted container is gone: drop its note."""
    (_registry() / ref.name).unlink(missing_ok=True)


def memory_held(ref: ContainerRef) -> str:
    """What the runtime says the container holds (`stats`), or "" where it does not say."""
    cmd = [ref.runtime, "stats", "--no-stream", "--format", "{{.MemUsage}}", ref.name]
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().splitlines()[0]
    return ""
