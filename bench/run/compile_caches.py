"""The compile caches on one node, bounded: every kept cache (one per arm definition and
experiment, `node.compile_cache_path`) is held by the boots that use it, and after each boot
the least recently used caches past the node's bound are removed, never one a boot holds.

A sweep's cells and a culprit search's points are each a definition, so without a bound every
one of them would leave a cache on every node it booted on, for good. The bound covers every
experiment under the node's workdir root (`node.node_root`), since they share its disk.

How a boot holds a cache: a shared `flock` on the cache's sibling `<cache>.hold` file, taken
for the boot's life (the file's mtime is the cache's last use). Eviction takes an exclusive
`flock` without waiting and skips a cache whose lock it cannot get. Taking a hold and evicting
both run under one node-wide lock, so no boot can find a cache between its eviction's check
and its removal. The kernel drops a dead process's locks, so a killed boot holds nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

DEFAULT_CACHE_GB = 20.0  # per node, every experiment's kept compile caches together
HOLD_SUFFIX = ".hold"
CACHES_DIR = "vllm-cache"  # under each experiment's workdir
_NODE_LOCK = ".compile-caches.lock"


def gib_to_bytes(gb: float) -> int:
    return int(gb * 2**30)


@contextlib.contextmanager
def _node_lock(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / _NODE_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor drops the lock


def hold_file(cache: Path) -> Path:
    return cache.with_name(cache.name + HOLD_SUFFIX)


@dataclass
class CacheHold:
    """One boot's hold on its compile cache: while it is open no eviction removes the cache."""

    root: Path  # the node's workdir root, whose lock evictions take
    cache: Path
    fd: int | None

    def release(self, *, remove: bool = False) -> None:
        """The boot is over: its last use is now, and a cache made for it alone (`remove`)
        goes, unless another boot holds it too."""
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.utime(self.fd)
        fd, self.fd = self.fd, None
        os.close(fd)
        if remove:
            with _node_lock(self.root):
                _remove_unheld(self.cache)


def hold_cache(root: Path, cache: Path) -> CacheHold:
    """Create `cache` if need be and hold it for one boot (see the module docstring)."""
    with _node_lock(root):
        cache.mkdir(parents=True, exist_ok=True)
        fd = os.open(hold_file(cache), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            # no exclusive holder can exist: evictions hold the node lock while they run
            fcntl.flock(fd, fcntl.LOCK_SH)
            os.utime(fd)
        except OSError:
            os.close(fd)
            raise
    return CacheHold(root, cache, fd)


def node_caches(root: Path) -> list[Path]:
    """Every compile cache under the node's workdir root, of every experiment."""
    return sorted(p for p in root.glob(f"*/{CACHES_DIR}/*") if p.is_dir() and not p.is_symlink())


def disk_bytes(path: Path) -> int:
    """What `path` takes on disk (allocated blocks, as `du`), links not followed: a cache's
    `modelinfos` link points at the user's own vLLM cache, which is not the cache's."""
    total = 0
    for top, dirs, files in os.walk(path, followlinks=False):
        for name in (*dirs, *files):
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(top, name)).st_blocks * 512
    return total


def last_used(cache: Path) -> float:
    """When a boot last held the cache (a cache older than holds: when it last changed)."""
    for p in (hold_file(cache), cache):
        with contextlib.suppress(OSError):
            return p.stat().st_mtime
    return 0.0


def _remove_unheld(cache: Path) -> bool:
    """Remove `cache` and its hold file unless a boot holds it; whether it is gone."""
    hold = hold_file(cache)
    try:
        fd = os.open(hold, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a running boot holds it
        # a container's server may have written files this user cannot remove: what stays
        # stays counted, and the next eviction tries again
        shutil.rmtree(cache, ignore_errors=True)
        if cache.exists():
            return False
        hold.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)


def evict_caches(root: Path, max_bytes: int) -> list[Path]:
    """Remove the least recently used caches under `root` until what stays takes at most
    `max_bytes`, skipping every cache a boot holds; the caches removed, oldest first. When
    the held ones alone take more, they all stay and nothing else does."""
    with _node_lock(root):
        caches = [(last_used(c), c, disk_bytes(c)) for c in node_caches(root)]
        total = sum(size for _, _, size in caches)
        removed: list[Path] = []
        for _, cache, size in sorted(caches):
            if total <= max_bytes:
                break
            if _remove_unheld(cache):
                total -= size
                removed.append(cache)
        return removed
