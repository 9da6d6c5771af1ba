"""Server lifecycle on real processes; tests/fakes/lifecycle_server.py injects the faults."""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bench.errors import BootFailed
from bench.run.process import (
    ServerProcess,
    TreeSettings,
    descendants,
    free_port,
    group_members,
    summarize_tail,
)

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "lifecycle_server.py"


@dataclass
class Plan:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


def fake_plan(mode: str, **env: str) -> Plan:
    return Plan([sys.executable, str(FAKE)], {**os.environ, "FAKE_MODE": mode, **env})


def server(tmp_path: Path, plan: Plan, **kw: float) -> ServerProcess:
    opts = {"ready_timeout_s": 20.0, "poll_interval_s": 0.1, **kw}
    how = TreeSettings(stop_grace_s=1.0)
    return ServerProcess(plan, tmp_path / "logs" / "server.log", how=how, **opts)  # type: ignore[arg-type]


def test_stop_kills_the_whole_group_even_a_child_ignoring_sigterm(tmp_path: Path) -> None:
    srv = server(tmp_path, fake_plan("ok"))
    with srv:
        srv.wait_ready()
        time.sleep(0.5)  # let the child spawn its SIGTERM-ignoring grandchild
        members = group_members(srv.pgid)
        assert len(members) >= 3, members  # leader, child, grandchild
        assert srv.base_url == f"http://127.0.0.1:{srv.port}"
        t0 = time.monotonic()
    assert group_members(srv.pgid) == []
    assert time.monotonic() - t0 < 1.0 + 6.0  # grace, then SIGKILL; not a long hang
    assert "launching:" in (tmp_path / "logs" / "server.log").read_text()


def test_stop_reaches_a_child_that_left_the_group(tmp_path: Path) -> None:
    srv = server(tmp_path, fake_plan("setsid"))
    with srv:
        srv.wait_ready()
        kids = descendants(srv.pid)
        escaped = [p for p in kids if p not in group_members(srv.pgid)]
        assert escaped, "the fake should have a child in its own session"
    assert all(not Path(f"/proc/{p}").exists() or _zombie(p) for p in escaped)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_early_exit_fails_fast_with_the_log_tail(tmp_path: Path) -> None:
    srv = server(tmp_path, fake_plan("die"), ready_timeout_s=120.0)
    t0 = time.monotonic()
    with srv, pytest.raises(BootFailed) as info:
        srv.wait_ready()
    assert time.monotonic() - t0 < 10  # noticed by poll(), not at the 120 s deadline
    reason = info.value.reason
    assert reason.splitlines()[0].startswith("server exited with code 3 during startup")
    assert "ValueError: model dir does not exist" in reason.splitlines()[0]
    assert "Traceback (most recent call last):" in reason  # the tail itself follows
    assert info.value.log_path == str(tmp_path / "logs" / "server.log")
    assert group_members(srv.pgid) == []


def test_deadline_without_health(tmp_path: Path) -> None:
    srv = server(tmp_path, fake_plan("hang"), ready_timeout_s=1.5)
    t0 = time.monotonic()
    with srv, pytest.raises(BootFailed, match="not healthy after 2 s"):
        srv.wait_ready()
    assert 1.5 <= time.monotonic() - t0 < 8
    assert group_members(srv.pgid) == []


def test_port_in_use_is_retried_on_a_new_port(tmp_path: Path) -> None:
    plan = fake_plan("port-race", FAKE_MARKER=str(tmp_path / "marker"))
    srv = server(tmp_path, plan)
    with srv:
        srv.wait_ready()
    log = (tmp_path / "logs" / "server.log").read_text()
    assert log.count("launching:") == 2
    assert "Address already in use" in log


def test_chatty_server_does_not_block(tmp_path: Path) -> None:
    """1 MiB of output before /health: a never-read pipe would deadlock here."""
    srv = server(tmp_path, fake_plan("chatty"))
    with srv:
        srv.wait_ready()
    assert (tmp_path / "logs" / "server.log").stat().st_size > 1_000_000


def test_error_inside_the_context_still_stops_the_server(tmp_path: Path) -> None:
    srv = server(tmp_path, fake_plan("ok"))
    with pytest.raises(RuntimeError), srv:
        srv.wait_ready()
        pgid = srv.pgid
        raise RuntimeError("probe code blew up")
    assert group_members(pgid) == []
    srv.stop()  # idempotent


def test_missing_interpreter_is_a_boot_failure(tmp_path: Path) -> None:
    srv = server(tmp_path, Plan([str(tmp_path / "no-such-python"), "-m", "x"]))
    with pytest.raises(BootFailed, match="cannot start server"), srv:
        pass


def test_free_port_is_bindable() -> None:
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # raises if the port were taken
        assert s.getsockname()[1] == port > 0


def test_summarize_tail_prefers_the_error_line() -> None:
    tail = ["INFO loading", "ValueError: bad config", "INFO shutting down"]
    assert summarize_tail(tail) == "ValueError: bad config"
    assert summarize_tail(["only"]) == "only"
    assert summarize_tail([]) == "(empty log)"
