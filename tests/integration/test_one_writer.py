"""One writer per results directory, with real drivers on two hosts of the namespace test bed
(cluster/testbed.py: each its own hostname, process table and /tmp; the results directory on
storage both see). Host 1's `run-ab` claims the directory; host 2's `run-ab --resume` is
refused in one line naming host 1's driver. Then host 1's driver is frozen (SIGSTOP: a
partition or a hung node whose requeued job starts elsewhere): host 2, with a short
staleness, takes the claim over once host 1's heartbeat is old, and finishes. Host 1 comes
back (SIGCONT) and stops without recording anything. No (arm, boot) is recorded twice, and
nothing is left on either host. Fake servers (tests/fakes); two drivers on one host are in
test_orchestrate_faults.py."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from polling import wait_until
from testbed_helpers import Bed, namespace_hosts

from bench.records import CLAIM_FILE
from bench.store import load_results, read_claim

pytestmark = [pytest.mark.testbed, pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(600)]

BOOTS = 3


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Bed, Path]]:
    shared = Path(tempfile.mkdtemp(prefix="specab-writer-", dir="/var/tmp"))
    try:
        with namespace_hosts(2, tmp_path_factory.mktemp("writer-bed") / "bed.json") as b:
            yield b, shared
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_a_second_host_is_refused_then_takes_over_a_frozen_holder(
    bed: tuple[Bed, Path], fake_experiment: Callable[..., Path]
) -> None:
    hosts, shared = bed
    slow = {"SPECAB_FAKE_PROBE_S": "0.5"}
    spec = fake_experiment(shared, {"base": slow, "fix": slow}, boots_per_arm=BOOTS)
    root = shared / "results"
    run_ab = [sys.executable, "-m", "bench.cli", "run-ab", str(spec), "--results-dir", str(root)]
    run_ab += ["--quiet", "--no-report", "--slots", "1"]
    first = hosts.popen("h1", run_ab, cwd=shared, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_until(
            lambda: (root / CLAIM_FILE).exists() and (root / "manifest.json").exists(), 120, "claim"
        )
        holder = read_claim(root)
        assert holder is not None and holder.host != "" and holder.command == "run-ab"

        refused = hosts.run("h2", [*run_ab, "--resume"], cwd=shared, timeout=120)
        lines = (refused.stdout + refused.stderr).strip().splitlines()
        assert refused.returncode == 2, lines
        assert f"host {holder.host} (pid {holder.pid})" in lines[-1] and "since" in lines[-1]
        assert read_claim(root).token == holder.token  # the refusal touched nothing

        wait_until(lambda: len(list((root / "boots").glob("*.parquet"))) >= 1, 120, "a first boot")
        # host 1's driver hangs (signalled in its host's PID namespace, where the claim's PID
        # is its own); its boots may go on
        stop = hosts.run("h1", ["kill", "-STOP", str(holder.pid)], timeout=30)
        assert stop.returncode == 0, stop.stderr
        time.sleep(3)
        took = hosts.run(
            "h2", [*run_ab, "--resume"], cwd=shared, timeout=300, env={"SPECAB_CLAIM_STALE_S": "2"}
        )
        assert took.returncode == 0, took.stdout + took.stderr
        done = load_results(root)
        assert len(done.ok_boots()) == 2 * BOOTS
    finally:
        hosts.run("h1", ["kill", "-CONT", str(holder.pid)], timeout=30)
        # nsenter stops itself when its child stops (job control): wake it too
        first.send_signal(signal.SIGCONT)
    out, _ = first.communicate(timeout=180)
    # host 1 came back: it records nothing more and stops, naming why
    assert first.returncode == 2, out
    assert "taken over" in out.strip().splitlines()[-1], out
    res = load_results(root)
    assert not res.ok_boots().duplicated(["arm", "boot"]).any()
    assert not res.boots.duplicated(["arm", "boot", "attempt"]).any()
    assert len(res.boots) == len(done.boots)  # nothing recorded after the takeover
    assert not (root / CLAIM_FILE).exists()
    for h in hosts.hosts:
        assert hosts.processes(h, "bench.cli", "api_server") == [], h
