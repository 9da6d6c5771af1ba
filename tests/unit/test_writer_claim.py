"""One writer per results directory (bench.store.writer_claim): the claim is exclusive, a
second driver is refused naming the holder, a stale claim is taken over (a dead PID on this
host at once, another host's after its heartbeat stops), and a holder that was taken over
records nothing. Real files and real processes; two drivers on one directory for real are in
tests/integration/test_one_writer.py."""

from __future__ import annotations

import json
import multiprocessing
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench.errors import SpecabError
from bench.records import CLAIM_FILE, BootRecord, WriterClaim
from bench.simulate import simulated_manifest
from bench.store import ResultsWriter, acquire_claim, read_claim
from bench.store import writer_claim as wc


def _claim(root: Path, **update: object) -> WriterClaim:
    """Write a claim of someone else into `root`."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    body = {
        "token": "someone-else",
        "host": socket.gethostname(),
        "pid": 1,
        "pid_started": wc.pid_started(1),
        "command": "run-ab",
        "started_at": now,
        "heartbeat_at": now,
        **update,
    }
    root.mkdir(parents=True, exist_ok=True)
    (root / CLAIM_FILE).write_text(json.dumps(body))
    return WriterClaim.model_validate(body)


def _failed_row(arm: str) -> BootRecord:
    from test_store import _boot_row

    return _boot_row(arm, 0, status="failed").model_copy(
        update={
            "num_drafts": None,
            "num_draft_tokens": None,
            "num_accepted_tokens": None,
            "accepted_per_pos": None,
        }
    )


def _dead_pid() -> tuple[int, int | None]:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    started = wc.pid_started(p.pid)
    p.wait()
    return p.pid, started


def test_a_claim_names_its_holder_and_is_gone_after_release(tmp_path: Path) -> None:
    root = tmp_path / "new"
    held = acquire_claim(root, "run-ab")
    claim = read_claim(root)
    assert claim is not None and claim.token == held.claim.token
    assert (claim.host, claim.pid, claim.command) == (socket.gethostname(), _pid(), "run-ab")
    assert claim.pid_started == wc.pid_started(_pid())
    held.release()
    assert not root.exists()  # created by the claim, nothing else written: removed


def _pid() -> int:
    import os

    return os.getpid()


def test_a_live_holder_refuses_a_second_driver_in_one_line(tmp_path: Path) -> None:
    _claim(tmp_path, pid=_pid(), pid_started=wc.pid_started(_pid()), command="run-ab --resume")
    with pytest.raises(SpecabError) as err:
        acquire_claim(tmp_path, "run-ab")
    line = err.value.one_line()
    assert "\n" not in line and str(tmp_path) in line and "--results-dir" in line
    assert f"pid {_pid()}" in line and "run-ab --resume" in line and "since" in line
    assert read_claim(tmp_path).token == "someone-else"  # untouched


def test_a_dead_pid_on_this_host_is_taken_over_at_once(tmp_path: Path) -> None:
    pid, started = _dead_pid()
    _claim(tmp_path, pid=pid, pid_started=started)
    held = acquire_claim(tmp_path, "run-ab --resume")
    now = read_claim(tmp_path)
    assert now.token == held.claim.token and now.took_over
    assert f"pid {pid}" in now.took_over and "gone" in now.took_over
    held.release()


def test_a_reused_pid_is_not_the_holder(tmp_path: Path) -> None:
    # our own PID, but recorded with another start time: the holder's PID was reused
    _claim(tmp_path, pid=_pid(), pid_started=(wc.pid_started(_pid()) or 0) + 1)
    held = acquire_claim(tmp_path, "run-ab")
    assert "another process" in (read_claim(tmp_path).took_over or "")
    held.release()


def test_another_hosts_claim_is_stale_only_after_its_heartbeat_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(wc.STALE_ENV, "120")
    recent = (datetime.now(UTC) - timedelta(seconds=60)).isoformat(timespec="seconds")
    _claim(tmp_path, host="node-elsewhere", heartbeat_at=recent)
    with pytest.raises(SpecabError, match="host node-elsewhere"):
        acquire_claim(tmp_path, "run-ab")
    old = (datetime.now(UTC) - timedelta(seconds=300)).isoformat(timespec="seconds")
    _claim(tmp_path, host="node-elsewhere", heartbeat_at=old)
    held = acquire_claim(tmp_path, "run-ab")
    assert "node-elsewhere" in (read_claim(tmp_path).took_over or "")
    held.release()


def test_a_requeued_slurm_job_takes_over_its_earlier_runs_claim_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slurm requeued the job onto another node: the claim its first run left, with a fresh
    heartbeat from another host, is gone at once for the same job's next run, not after
    SPECAB_CLAIM_STALE_S; another job, or the same run, still waits."""
    monkeypatch.setenv(wc.STALE_ENV, "600")
    recent = datetime.now(UTC).isoformat(timespec="seconds")
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    _claim(tmp_path, host="node-a", heartbeat_at=recent, slurm_job="4242", slurm_restart=0)
    held = acquire_claim(tmp_path, "run-ab --resume")
    mine = read_claim(tmp_path)
    assert "node-a" in (mine.took_over or "")
    assert (mine.slurm_job, mine.slurm_restart) == ("4242", 1)
    held.release()
    for other in (
        {"slurm_job": "999", "slurm_restart": 0},
        {"slurm_job": "4242", "slurm_restart": 1},
    ):
        _claim(tmp_path, host="node-a", heartbeat_at=recent, **other)
        with pytest.raises(SpecabError, match="host node-a"):
            acquire_claim(tmp_path, "run-ab --resume")


def _take_over(root: Path, **update: object) -> None:
    """Write another's claim under the guard the heartbeat also takes (a raw write could land
    between a beat's check and its rewrite, which no real takeover does)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with wc._Guard(root) as held:
            if held:
                _claim(root, **update)
                return
        time.sleep(0.01)
    raise AssertionError("the takeover guard was never free")


def test_a_holder_taken_over_records_nothing_and_its_heartbeat_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wc, "HEARTBEAT_S", 0.1)
    manifest = simulated_manifest({"a": 0.0}, experiment="claim", boots=1, prompts=1)
    writer = ResultsWriter.create(tmp_path / "r", manifest, claim="run-ab")
    first = read_claim(writer.root)
    time.sleep(1.5)
    assert read_claim(writer.root).heartbeat_at > first.heartbeat_at  # it beats
    # another driver takes it over (as after a partition), under the takeover guard as the
    # product's takeover does: the old one must not record
    _take_over(writer.root, token="successor", host="node-elsewhere")
    rec = _failed_row("a")
    with pytest.raises(SpecabError, match="taken over by `run-ab` on host node-elsewhere"):
        writer.write_boot(rec)
    assert not list((writer.root / "boots").glob("*.parquet"))
    time.sleep(0.5)
    assert read_claim(writer.root).token == "successor"  # the old heartbeat did not overwrite
    writer.close()
    assert read_claim(writer.root).token == "successor"  # nor did its release remove it


def test_a_guard_left_by_a_frozen_holder_delays_a_takeover_only_until_it_is_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder froze (SIGSTOP, a hung node) while holding `claim.json.takeover` for a
    heartbeat: the successor waits for the guard to go stale instead of giving up, and the
    old holder's guard, woken later, does not remove the successor's."""
    monkeypatch.setenv(wc.STALE_ENV, "1")
    old = (datetime.now(UTC) - timedelta(seconds=30)).isoformat(timespec="seconds")
    _claim(tmp_path, host="node-elsewhere", heartbeat_at=old)
    frozen = wc._Guard(tmp_path)
    assert frozen.__enter__() is True  # and its holder stops here
    started = time.monotonic()
    held = acquire_claim(tmp_path, "run-ab --resume")
    assert 1.0 <= time.monotonic() - started < 8.0
    assert "node-elsewhere" in (read_claim(tmp_path).took_over or "")
    successor = wc._Guard(tmp_path)
    assert successor.__enter__() is True
    frozen.__exit__(None, None, None)  # the old holder wakes up
    assert successor.path.read_text() == successor.token
    successor.__exit__(None, None, None)
    assert not successor.path.exists()
    held.release()


def test_a_newer_releases_claim_is_read_not_refused(tmp_path: Path) -> None:
    _claim(tmp_path, pid=_pid(), pid_started=wc.pid_started(_pid()), added_later={"x": 1})
    with pytest.raises(SpecabError, match="being written by"):  # a live holder, understood
        acquire_claim(tmp_path, "run-ab")


def test_a_damaged_claim_is_one_line(tmp_path: Path) -> None:
    (tmp_path / CLAIM_FILE).write_text("{not json")
    with pytest.raises(SpecabError) as err:
        acquire_claim(tmp_path, "run-ab")
    assert CLAIM_FILE in err.value.one_line() and "delete the file" in err.value.one_line()


def test_a_directory_holding_only_a_claim_is_not_foreign(tmp_path: Path) -> None:
    _claim(tmp_path)
    assert ResultsWriter.check_root(tmp_path) is False


def _race(
    root: str, barrier: multiprocessing.synchronize.Barrier, out: multiprocessing.Queue
) -> None:  # type: ignore[type-arg]
    barrier.wait()
    try:
        held = acquire_claim(Path(root), "run-ab")
        out.put("won")
        time.sleep(1.0)
        held.release()
    except SpecabError:
        out.put("refused")


def test_of_drivers_racing_for_one_directory_exactly_one_wins(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    n = 6
    barrier, out = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(tmp_path / "r"), barrier, out)) for _ in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    results = sorted(out.get(timeout=5) for _ in range(n))
    assert results.count("won") == 1, results
