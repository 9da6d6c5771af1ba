"""A two-"node" Ray cluster on loopback (`ray start --head` + a second `ray start --address`
with its own custom resource): run-ab places boots on both nodes, balances arms across them
and reports per-node counts. Also checks the Slurm script's syntax.

The cluster uses its own temp dir and free ports, and is torn down by killing exactly the
processes whose command line names that temp dir (never `ray stop`, which would stop every
Ray instance on the machine, including other people's).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bench.cli import run
from bench.store import load_results

REPO = Path(__file__).resolve().parents[2]
RAY = Path(os.environ.get("VIRTUAL_ENV", REPO / ".venv")) / "bin" / "ray"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pids_naming(marker: str) -> list[int]:
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmd and int(p) != os.getpid():
            out.append(int(p))
    return out


def _with_descendants(pids: list[int]) -> list[int]:
    """Ray's agents and workers rewrite their titles, so find them as descendants."""
    children: dict[int, list[int]] = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                ppid = int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(p))
    found, stack = set(pids), list(pids)
    while stack:
        for c in children.get(stack.pop(), []):
            if c not in found:
                found.add(c)
                stack.append(c)
    return sorted(found)


def _stop_cluster(marker: str) -> None:
    pids = _with_descendants(_pids_naming(marker))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{p}").exists() for p in pids) and time.monotonic() < deadline:
            time.sleep(0.2)


def _ray_start(args: list[str], env: dict[str, str]) -> None:
    proc = subprocess.run(
        [str(RAY), "start", *args], env=env, capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture
def two_node_cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    temp = tempfile.mkdtemp(prefix="specab-ray-", dir="/tmp")  # short: Ray socket paths
    # One auth mode for head, worker and driver. Ray >= 2.5x turns token auth on for local
    # clusters (token in ~/.ray/auth_token); make sure the token exists and everyone uses it.
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    if not (Path.home() / ".ray" / "auth_token").is_file():
        subprocess.run([str(RAY), "get-auth-token", "--generate"], env=env, check=True)
    port = _free_port()
    common = ["--num-cpus=1", "--node-ip-address=127.0.0.1", "--disable-usage-stats"]
    try:
        _ray_start(
            [
                "--head",
                f"--port={port}",
                f"--temp-dir={temp}",
                "--include-dashboard=false",
                f"--ray-client-server-port={_free_port()}",
                f"--dashboard-agent-listen-port={_free_port()}",
                f"--dashboard-agent-grpc-port={_free_port()}",
                '--resources={"specab_slot": 1}',
                *common,
            ],
            env,
        )
        _ray_start(
            [
                f"--address=127.0.0.1:{port}",
                f"--temp-dir={temp}",
                f"--dashboard-agent-listen-port={_free_port()}",
                f"--dashboard-agent-grpc-port={_free_port()}",
                '--resources={"specab_slot": 1, "node2": 1}',
                *common,
            ],
            env,
        )
        yield f"127.0.0.1:{port}"
    finally:
        _stop_cluster(temp)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_boots_run_on_both_nodes_balanced(
    tmp_path: Path,
    fake_experiment: Callable[..., Path],
    two_node_cluster: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = fake_experiment(
        tmp_path,
        {"base": {"SPECAB_FAKE_PROBE_S": "0.3"}, "fix": {"SPECAB_FAKE_PROBE_S": "0.3"}},
        boots_per_arm=2,
        resources={"cpu": 1, "custom": {"specab_slot": 1}},
    )
    root = tmp_path / "results"
    argv = ["run-ab", str(spec), "--results-dir", str(root), "--quiet", "--no-report"]
    rc = run([*argv, "--address", two_node_cluster])
    out = capsys.readouterr().out
    assert rc == 0, out
    ok = load_results(root).ok_boots()
    assert len(ok) == 4
    hosts = sorted(set(ok["host"]))
    assert len(hosts) == 2, hosts  # both nodes ran boots, with distinct labels
    for arm in ("base", "fix"):
        assert sorted(ok.loc[ok["arm"] == arm, "host"]) == hosts  # each arm once per node
    assert "ok boots per node" in out
    assert "slots 2" in out  # one boot per node at a time (specab_slot: 1 each)


def test_slurm_script_syntax() -> None:
    script = REPO / "cluster" / "specab.sbatch"
    assert script.is_file()
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    text = script.read_text()
    assert "ray start --head" in text and "specab run-ab" in text and "--address" in text
