"""A node's kept compile caches stay within their bound: the least recently used go first,
across every experiment on the node; a cache a boot holds (in this process, or in another)
never goes; a killed holder holds nothing; a link out of a cache is neither counted nor
followed; and a boot's node environment takes its hold and evicts after the boot."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.run import (
    NodeAsk,
    disk_bytes,
    evict_caches,
    hold_cache,
    hold_file,
    node_caches,
    node_environment,
)

KIB = 1024


def _cache(root: Path, experiment: str, key: str, size: int, used: float) -> Path:
    """A cache of `size` bytes on disk, last held at time `used`."""
    cache = root / experiment / "vllm-cache" / key
    cache.mkdir(parents=True)
    (cache / "graph.bin").write_bytes(b"\1" * size)
    hold = hold_file(cache)
    hold.touch()
    os.utime(hold, (used, used))
    return cache


def _names(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def test_the_least_recently_used_go_first_across_experiments(tmp_path: Path) -> None:
    size = disk_bytes(_cache(tmp_path, "sweep", "def-a", 64 * KIB, used=100))
    _cache(tmp_path, "bisect", "def-b", 64 * KIB, used=300)
    _cache(tmp_path, "sweep", "def-c", 64 * KIB, used=200)
    _cache(tmp_path, "bisect", "def-d", 64 * KIB, used=400)
    assert evict_caches(tmp_path, 4 * size) == []  # within the bound: nothing goes
    removed = evict_caches(tmp_path, 2 * size)
    assert _names(removed) == ["def-a", "def-c"]  # oldest first, whichever experiment
    assert _names(node_caches(tmp_path)) == ["def-b", "def-d"]
    assert not hold_file(removed[0]).exists()  # no hold file left behind
    assert sum(disk_bytes(c) for c in node_caches(tmp_path)) <= 2 * size


def test_a_held_cache_stays_even_when_it_is_the_oldest(tmp_path: Path) -> None:
    oldest = _cache(tmp_path, "e", "def-old", 64 * KIB, used=100)
    _cache(tmp_path, "e", "def-mid", 64 * KIB, used=200)
    _cache(tmp_path, "e", "def-new", 64 * KIB, used=300)
    hold = hold_cache(tmp_path, oldest)  # a running boot's
    try:
        removed = evict_caches(tmp_path, 0)
    finally:
        hold.release()
    assert _names(removed) == ["def-mid", "def-new"]
    assert oldest.is_dir() and (oldest / "graph.bin").is_file()
    assert _names(evict_caches(tmp_path, 0)) == ["def-old"]  # released: it may go now


def test_a_release_marks_the_last_use(tmp_path: Path) -> None:
    first = _cache(tmp_path, "e", "def-first", 64 * KIB, used=100)
    size = disk_bytes(_cache(tmp_path, "e", "def-second", 64 * KIB, used=200))
    hold_cache(tmp_path, first).release()  # booted again just now: now the most recent
    assert _names(evict_caches(tmp_path, size + 8 * KIB)) == ["def-second"]


def test_a_cache_held_by_another_process_stays_and_a_killed_holder_holds_nothing(
    tmp_path: Path,
) -> None:
    cache = _cache(tmp_path, "e", "def-x", 64 * KIB, used=100)
    code = (
        "import sys, time\nfrom pathlib import Path\n"
        "from bench.run import hold_cache\n"
        "hold_cache(Path(sys.argv[1]), Path(sys.argv[2]))\nprint('held', flush=True)\n"
        "time.sleep(120)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path), str(cache)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert evict_caches(tmp_path, 0) == [] and cache.is_dir()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert _names(evict_caches(tmp_path, 0)) == ["def-x"]


def test_a_link_out_of_a_cache_is_neither_counted_nor_followed(tmp_path: Path) -> None:
    shared = tmp_path / "users-vllm-cache" / "modelinfos"
    shared.mkdir(parents=True)
    (shared / "entry.json").write_bytes(b"\1" * (256 * KIB))
    cache = _cache(tmp_path / "work", "e", "def-x", 4 * KIB, used=100)
    (cache / "modelinfos").symlink_to(shared, target_is_directory=True)
    assert disk_bytes(cache) < 64 * KIB
    assert _names(evict_caches(tmp_path / "work", 0)) == ["def-x"]
    assert (shared / "entry.json").stat().st_size == 256 * KIB  # the user's own, untouched


def test_a_boot_holds_its_cache_and_evicts_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECAB_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))  # model infos' link
    monkeypatch.delenv("VLLM_CACHE_ROOT", raising=False)
    older = _cache(tmp_path / "work", "other", "def-older", 64 * KIB, used=time.time() - 60)
    bound = disk_bytes(older) + 8 * KIB
    ask = NodeAsk(
        experiment="e", boot_id="a__b000__a1", cache_key="def-mine", cache_max_bytes=bound
    )
    node = node_environment(ask, "node-1")
    assert node.compile_cache == "cold" and node.cache_dir is not None
    (node.cache_dir / "graph.bin").write_bytes(b"\1" * (64 * KIB))  # what the server compiled
    assert evict_caches(tmp_path / "work", 0) == [older]  # only the unheld one could go
    node.release()
    assert node_caches(tmp_path / "work") == [node.cache_dir]  # kept, within the bound
    again = node_environment(ask, "node-1")
    try:
        assert again.compile_cache == "warm"
    finally:
        again.release()
    fresh = node_environment(
        NodeAsk(experiment="e", boot_id="a__b001__a1", cache_key="def-mine", keep_cache=False),
        "node-1",
    )
    assert fresh.cache_dir is not None and fresh.cache_dir.name == "fresh-a__b001__a1"
    fresh.release()
    assert not fresh.cache_dir.exists() and not hold_file(fresh.cache_dir).exists()
