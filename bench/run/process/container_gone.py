"""Whether a member's container is gone after its stop: the runtime's own listing, and the
wait for it. A runtime can return from `rm -f` while the container still exists (a GB10's
hands ~100 GB of unified memory back first): the boot's slot is held until it is gone, and
a boot measured in full stays ok, with a warning."""

from __future__ import annotations

import subprocess
import time

from bench.experiment import ContainerRef

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
        return (
            f"container {container.name} still existed {waited:.0f} s after stop and rm -f: "
            "its slot was freed; the next boot there may find its memory still held"
        )
    if waited > CONTAINER_GONE_S:
        return (
            f"container {container.name} outlived its stop and rm -f by {waited:.0f} s "
            "(its slot was held until it was gone)"
        )
    return None
