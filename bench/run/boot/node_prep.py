"""Node preparation before a boot's server starts on it (`[server] pre_boot`,
`min_free_memory_gb`): unified-memory hygiene for GB10-class nodes; and whether a container
arm's image can be read on this node at all (`image_unread`).

On a node whose CPU and GPU share memory, the memory a previous server held comes back
slowly (page cache of a ~149 GB checkpoint, a dying process), and vLLM's start-up check
compares the free memory it measures with gpu_memory_utilization x total: a boot started
too early fails "Free memory on device ... less than desired GPU memory utilization".
Dropping the page cache before the boot is the known cure; waiting until MemAvailable is
back above a threshold turns a flaky start into a clear, attributable error.

Each pre_boot command runs with `sh -c` on the host (not in the server's container), with
this process's environment; its output goes to the member's log. A command that fails or
times out fails the attempt with its output.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from bench.errors import BootFailed
from bench.experiment import PROBE_TIMEOUT_S, ContainerSpec, ResolvedArm, differs, image_id
from bench.run.process import (
    container_exists,
    forget_lingering,
    lingering_containers,
    memory_held,
)

MEMINFO = Path("/proc/meminfo")


def mem_available_gib(meminfo: Path = MEMINFO) -> float:
    """MemAvailable of this node in GiB (the kernel's estimate of what can be allocated
    without swapping, page cache included)."""
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20  # kB
    raise OSError(f"{meminfo} has no MemAvailable line")


def _log(log: Path, text: str) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as fh:
        fh.write(text if text.endswith("\n") else text + "\n")


def run_pre_boot(commands: Sequence[str], log: Path, *, timeout_s: float) -> None:
    """Run each command in order; BootFailed naming the first that fails, with its output."""
    for cmd in commands:
        _log(log, f"[specab] pre_boot: {cmd}")
        try:
            out = subprocess.run(
                ["sh", "-c", cmd],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            raise BootFailed(
                f"pre_boot command {cmd!r} did not finish within {timeout_s:.0f} s "
                "(server.memory_wait_s)",
                log_path=str(log),
            ) from None
        text = (out.stdout + out.stderr).strip()
        if text:
            _log(log, text)
        if out.returncode != 0:
            last = text.splitlines()[-1] if text else "(no output)"
            raise BootFailed(
                f"pre_boot command {cmd!r} failed with code {out.returncode}: {last}",
                log_path=str(log),
            )


def wait_for_memory(
    min_gib: float,
    log: Path,
    *,
    timeout_s: float,
    poll_s: float = 2.0,
    meminfo: Path = MEMINFO,
) -> float:
    """Wait until MemAvailable >= `min_gib`; return it, or BootFailed after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    have = mem_available_gib(meminfo)
    if have < min_gib:
        _log(log, f"[specab] waiting for MemAvailable >= {min_gib:g} GiB (now {have:.1f} GiB)")
    while have < min_gib:
        if time.monotonic() > deadline:
            raise BootFailed(
                f"node memory: MemAvailable {have:.1f} GiB < min_free_memory_gb {min_gib:g} "
                f"after waiting {timeout_s:.0f} s (memory of a previous server not released? "
                "drop the page cache in server.pre_boot, or lower min_free_memory_gb)",
                log_path=str(log),
            )
        time.sleep(poll_s)
        have = mem_available_gib(meminfo)
    return have


def wait_for_lingering(log: Path, *, timeout_s: float, poll_s: float = 2.0) -> None:
    """Wait for every container noted on this node as outliving its boot to go (its note is
    then dropped); BootFailed naming the first one still there after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    for ref in lingering_containers():
        t0 = time.monotonic()
        if container_exists(ref):
            _log(log, f"[specab] container {ref.name} of an earlier boot still exists: waiting")
            while time.monotonic() < deadline and container_exists(ref):
                time.sleep(poll_s)
            if container_exists(ref):
                held = memory_held(ref)
                raise BootFailed(
                    f"container {ref.name} of an earlier boot still exists on this node"
                    f"{f', holding {held}' if held else ''} after waiting "
                    f"{time.monotonic() - t0:.0f} s: a server started beside it would measure "
                    f"on the memory it holds; remove it (`{ref.runtime} rm -f {ref.name}` "
                    "there), and resume",
                    log_path=str(log),
                )
        waited = time.monotonic() - t0
        _log(log, f"[specab] container {ref.name} of an earlier boot is gone ({waited:.0f} s)")
        forget_lingering(ref)


def prepare_node(
    pre_boot: Sequence[str], min_free_memory_gb: float | None, log: Path, *, wait_s: float
) -> None:
    """A container an earlier boot left on this node gone, pre_boot commands, then the
    memory wait: what runs on a node before its member."""
    wait_for_lingering(log, timeout_s=wait_s)
    if pre_boot:
        run_pre_boot(pre_boot, log, timeout_s=wait_s)
    if min_free_memory_gb:
        have = wait_for_memory(min_free_memory_gb, log, timeout_s=wait_s)
        _log(log, f"[specab] MemAvailable {have:.1f} GiB >= {min_free_memory_gb:g} GiB")


IMAGE_UNREAD = "cannot read vLLM in image"  # how that failure's error starts


def image_unread(arm: ResolvedArm, host: str) -> str | None:
    """Why a container arm's image cannot be read on this node (its vLLM version, which the
    arm's definition hash and measurement rest on), else None: a boot that would have to
    guess them fails instead, naming the image and the node."""
    if arm.container is None or arm.vllm_version() is not None:
        return None
    return unread_line(arm.container, host)


def image_at_head(arm: ResolvedArm, host: str, expected: str) -> tuple[str | None, str | None]:
    """(why this node cannot serve a container arm's image, its content id here): unread,
    or other content than `expected` (the driver's, where the definition was read)."""
    unread = image_unread(arm, host)
    if arm.container is None or unread is not None:
        return unread, None
    here = image_id(arm.container)
    if here and expected and here != expected:
        return differs(arm.container, host, here, expected), here
    return None, here


def image_problem(c: ContainerSpec | None, node: str, head_id: str) -> str | None:
    """A gang member's node must hold the arm's image, the head's content under its tag: it
    runs with no implicit pull, and a stale tag would serve another vLLM than the head's."""
    if c is None:
        return None
    mine = image_id(c)
    if mine is None:
        return unread_line(c, node)
    return differs(c, node, mine, head_id) if head_id and mine != head_id else None


def unread_line(c: ContainerSpec, host: str) -> str:
    """One line: this node does not hold the arm's image (runs never pull it)."""
    return (
        f"{IMAGE_UNREAD} {c.image} with {c.runtime} on node {host} (not pulled "
        f"there, or the runtime did not answer within {PROBE_TIMEOUT_S:g} s): "
        f"`{c.runtime} pull {c.image}` on every node first"
    )
