"""Node-local scratch: a log written away from the results dir holds this run's lines only;
a slot's CPU binding; what a node gives an attempt, made once from what it asks."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from bench.run import (
    CPU_BIND,
    MAX_LOG_BYTES,
    NodeAsk,
    cache_state,
    cpu_binding_for,
    fresh_node_log,
    node_environment,
    read_log_tail,
    share_model_infos,
)


def test_a_node_log_starts_empty_and_is_per_results_dir(tmp_path: Path) -> None:
    work = tmp_path / "specab-work" / "fake"
    first = fresh_node_log(work, "/runs/one/logs", "g__b000__a1.log")
    first.parent.mkdir(parents=True)
    first.write_text("[specab] launching: an earlier run\n")
    again = fresh_node_log(work, "/runs/one/logs", "g__b000__a1.log")
    assert again == first and not again.exists()  # the earlier run's lines are gone
    other = fresh_node_log(work, "/runs/two/logs", "g__b000__a1.log")
    assert other != first and other.name == first.name  # same boot id, another results dir


def test_the_shipped_tail_is_bounded(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    assert read_log_tail(log) is None
    log.write_bytes(b"a" * 10 + b"b" * MAX_LOG_BYTES)
    assert read_log_tail(log) == b"b" * MAX_LOG_BYTES


def test_every_arm_shares_the_model_infos_vllm_keeps_and_the_cache_stays_cold(
    tmp_path: Path,
) -> None:
    """vLLM's model-architecture cache (keyed by its own source) is linked into each arm's
    cache root once; the arm's compile cache still starts cold and stays per arm."""
    default = tmp_path / "home-cache"
    env = {"XDG_CACHE_HOME": str(default)}
    a, b = tmp_path / "vllm-cache" / "a", tmp_path / "vllm-cache" / "b"
    for arm in (a, b):
        assert cache_state(arm) == "cold"
        share_model_infos(arm, env)
        share_model_infos(arm, env)  # the next boot of the arm: already linked
        assert (arm / "modelinfos").resolve() == default / "vllm" / "modelinfos"
        assert cache_state(arm) == "cold"  # the link is not a compile cache
    (a / "modelinfos" / "x.json").write_text("{}")  # what vLLM writes through one arm
    assert (b / "modelinfos" / "x.json").is_file()  # the other arm reads it
    (a / "torch_compile_cache").mkdir()
    assert cache_state(a) == "warm" and cache_state(b) == "cold"
    own = tmp_path / "own-root"
    share_model_infos(a.parent / "c", {"VLLM_CACHE_ROOT": str(own)})  # the caller's root
    assert (a.parent / "c" / "modelinfos").resolve() == own / "modelinfos"
    # the arm's cache outlives the user's: a later run with another cache home (or after
    # the old one was removed) relinks instead of keeping a link vLLM cannot write through
    moved = tmp_path / "moved-cache"
    shutil.rmtree(default)
    share_model_infos(a, {"XDG_CACHE_HOME": str(moved)})
    assert (a / "modelinfos").resolve() == moved / "vllm" / "modelinfos"
    assert (a / "modelinfos").is_dir()
    shutil.rmtree(moved)  # the same home, cleaned: the directory comes back
    share_model_infos(a, {"XDG_CACHE_HOME": str(moved)})
    assert (a / "modelinfos").is_dir()


def test_a_slot_binds_its_cores_and_sizes_the_openmp_pools_to_them() -> None:
    cores = sorted(os.sched_getaffinity(0))
    assert cpu_binding_for(None, 1) == {}  # no slot: vLLM's own binding
    assert cpu_binding_for(0, 1) == {CPU_BIND: str(cores[0]), "OMP_NUM_THREADS": "1"}
    assert cpu_binding_for(len(cores), 1) == {}  # beyond this machine's cores: no binding
    if len(cores) >= 2:
        two = cpu_binding_for(0, 2)
        assert two == {CPU_BIND: f"{cores[0]},{cores[1]}", "OMP_NUM_THREADS": "2"}


def test_a_boot_sees_exactly_the_gpus_ray_gave_it_and_none_without(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server's CUDA_VISIBLE_DEVICES is set from Ray's assignment (what the `gpu` column
    records), and blank for a boot that asked for no GPU: never inherited from the worker."""
    import ray

    from bench.run import visible_gpus

    monkeypatch.setattr(ray, "get_gpu_ids", lambda: [2, 3])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")  # a worker Ray told not to set it
    assert visible_gpus(2) == "2,3"
    assert visible_gpus(0) == ""


def test_a_node_answers_an_attempts_ask_once_with_everything_its_server_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head's log goes into the results dir on the driver's node and is shipped from any
    other; a member's log is named for its rank; a kept cache is the definition's and warm
    the second time, a fresh one is removed with its boot; an image gets node JIT caches and
    keeps its own model infos; the slot's binding and no GPU reach the server's env."""
    monkeypatch.setenv("SPECAB_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "vllm"))
    for name in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE",
                 "CUDA_CACHE_PATH"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    logs = tmp_path / "results" / "logs"
    ask = NodeAsk(experiment="e", boot_id="a__b000__a1", driver_log_dir=str(logs),
                  driver_node_id="n1", cache_key="def-0123", cpu_slot=0, cpu=1)  # fmt: skip
    head = node_environment(ask, "n1")
    assert head.log_file == logs / "a__b000__a1.log" and head.shipped_log() is None
    assert head.compile_cache == "cold" and head.cache_dir is not None
    assert head.cache_dir.name == "def-0123" and (head.cache_dir / "modelinfos").is_symlink()
    env = dict(head.server_env)
    assert env["VLLM_CACHE_ROOT"] == str(head.cache_dir) and env["CUDA_VISIBLE_DEVICES"] == ""
    assert env[CPU_BIND] == str(min(os.sched_getaffinity(0))) and env["OMP_NUM_THREADS"] == "1"
    assert "TRITON_CACHE_DIR" not in env
    (head.cache_dir / "graph").mkdir()
    head.release()  # kept: the next boot of the definition finds it
    assert node_environment(ask, "n1").compile_cache == "warm"
    member = node_environment(replace(ask, rank=1, keep_cache=False, in_image=True), "n2")
    assert member.log_file.name == "a__b000__a1.m1.log" and logs not in member.log_file.parents
    member.log_file.parent.mkdir(parents=True, exist_ok=True)
    member.log_file.write_text("member line\n")
    assert member.shipped_log() == b"member line\n"
    assert member.cache_dir is not None and member.cache_dir.name == "fresh-a__b000__a1"
    assert not (member.cache_dir / "modelinfos").exists()  # the image keeps its own
    assert dict(member.server_env)["TRITON_CACHE_DIR"].startswith(str(tmp_path / "work"))
    assert member.guard_file("x").parent == tmp_path / "work" / "e" / "pgids"
    member.release()
    assert not member.cache_dir.exists()
