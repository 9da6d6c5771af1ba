"""The container kill path without a container runtime: tests/fakes/container_cli.py behaves
like docker/podman where it matters (the container's processes belong to the runtime, so
killing the CLI client leaves them running). specab stops containers by name, verifies
they are gone, and its per-boot watchdog removes them when the boot's owner dies. Real
podman: tests/integration/test_container.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from polling import alive, wait_until

from bench.experiment import ContainerRef
from bench.run.process import (
    BootGuard,
    MemberProcess,
    TreeSettings,
    clean_up,
    container_exists,
    read_recorded,
)

CLI = Path(__file__).resolve().parents[1] / "fakes" / "container_cli.py"


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An executable docker-compatible CLI (the fake), state under tmp_path."""
    state = tmp_path / "containers"
    monkeypatch.setenv("FAKE_CONTAINER_STATE", str(state))
    exe = tmp_path / "fake-docker"
    exe.write_text(f'#!/bin/sh\nexec {sys.executable} {CLI} "$@"\n')
    exe.chmod(0o755)
    return str(exe)


def _container_pid(tmp_path: Path, name: str) -> int:
    f = tmp_path / "containers" / f"{name}.json"
    wait_until(f.is_file, 15, "the container to start")
    return int(json.loads(f.read_text())["pid"])


class Cmd:
    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.env = dict(os.environ)


def _sleeper(runtime: str, name: str, *, ignore_term: bool = False) -> list[str]:
    code = "import signal, time\n"
    if ignore_term:
        code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    code += "time.sleep(600)"
    return [runtime, "run", "--rm", "--name", name, "img", sys.executable, "-c", code]


@pytest.mark.parametrize("ignore_term", [False, True], ids=["exits-on-term", "ignores-term"])
def test_stop_by_name_removes_a_container_whose_client_was_killed(
    tmp_path: Path, runtime: str, ignore_term: bool
) -> None:
    ref = ContainerRef(runtime, "specab-t-m0")
    proc = MemberProcess(
        Cmd([]), tmp_path / "m.log", TreeSettings(stop_grace_s=1.0, container=ref, cwd=tmp_path)
    )
    proc.launch(_sleeper(runtime, ref.name, ignore_term=ignore_term))
    inside = _container_pid(tmp_path, ref.name)
    assert container_exists(ref)
    # the runtime owns the container: killing our client group leaves it running
    os.killpg(proc.pgid, signal.SIGKILL)
    time.sleep(0.5)
    assert alive(inside) and container_exists(ref)
    t0 = time.monotonic()
    proc.stop()
    assert not alive(inside) and not container_exists(ref)
    assert time.monotonic() - t0 < 10


OWNER = """
import sys, time
from pathlib import Path
from bench.experiment import ContainerRef
from bench.run.process import MemberProcess, TreeSettings
from bench.run.process import BootGuard

class Cmd:
    argv = []
    env = {"PATH": "/usr/bin:/bin", "FAKE_CONTAINER_STATE": sys.argv[3]}

guard = BootGuard(Path(sys.argv[1]), grace_s=1.0).__enter__()
ref = ContainerRef(sys.argv[2], "specab-owner-m0")
proc = MemberProcess(Cmd(), Path(sys.argv[4]), TreeSettings(watch=guard, container=ref))
proc.launch([sys.argv[2], "run", "--rm", "--name", ref.name, "img", sys.executable, "-c",
             "import time; time.sleep(600)"])
print("started", flush=True)
time.sleep(600)
"""


def test_watchdog_removes_the_container_when_the_owner_dies(tmp_path: Path, runtime: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path / "guard"), runtime,
         str(tmp_path / "containers"), str(tmp_path / "m.log")],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "started"
        inside = _container_pid(tmp_path, "specab-owner-m0")
        rec = read_recorded(tmp_path / "guard")
        assert rec.containers == [(runtime, "specab-owner-m0")] and len(rec.pgids) == 1
        (cwd,) = (Path(d) for d in rec.directories)  # the member's own empty cwd
        assert cwd.name.startswith("specab-server-cwd-") and cwd.is_dir()
        owner.kill()  # a force-cancelled Ray worker
        owner.wait()
        wait_until(lambda: not alive(inside), 15, "the container to die with its boot's owner")
        ref = ContainerRef(runtime, "specab-owner-m0")
        wait_until(lambda: not container_exists(ref), 15, "the container to be removed")
        wait_until(lambda: not cwd.exists(), 15, "the member's cwd to go with its boot's owner")
    finally:
        owner.kill()
        owner.wait()


def test_clean_up_kills_remembered_descendants_only_while_they_are_the_same(
    tmp_path: Path,
) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        start = int(Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        guard = tmp_path / "g"
        with BootGuard(guard) as g:
            g.remember({child.pid: start + 1})  # a reused pid: must be left alone
            clean_up(read_recorded(guard), 0.1)
            assert alive(child.pid)
            g.remember({child.pid: start})
            rec = read_recorded(guard)
            assert rec.pids == {child.pid: start}
            clean_up(rec, 0.1)
        wait_until(lambda: child.poll() is not None, 15, "the child to end")
    finally:
        child.kill()
        child.wait()


def test_guard_file_format_is_backward_compatible(tmp_path: Path) -> None:
    f = tmp_path / "g"
    f.write_text("123\np 45 678\nc podman specab-x\n456\nd /tmp/a dir\n")
    rec = read_recorded(f)
    assert rec.pgids == [123, 456] and rec.pids == {45: 678}
    assert rec.containers == [("podman", "specab-x")]
    assert rec.directories == ["/tmp/a dir"]


def test_a_guard_cut_short_while_starting_its_watchdog_leaves_no_file_and_no_fd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ray cancel can interrupt `BootGuard.__enter__` while it starts the watchdog: the
    guard file (empty guard files were found left behind) and the pipe go with it."""
    import importlib

    reaper = importlib.import_module("bench.run.process.reaper")

    def interrupted(argv: list[str], fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(reaper, "_spawn", interrupted)
    fds = set(os.listdir("/proc/self/fd"))
    with pytest.raises(KeyboardInterrupt):
        BootGuard(tmp_path / "g").__enter__()
    assert not (tmp_path / "g").exists()
    assert set(os.listdir("/proc/self/fd")) == fds
