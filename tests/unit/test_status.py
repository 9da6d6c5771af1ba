"""`specab status DIR`: where a campaign stands, from the results directory alone. On a
committed finished run (a failed attempt included), then with a live writer's claim holding
boots in flight, then with a claim whose driver is gone. A real driver's status while it
runs is checked in tests/integration/test_orchestrate_faults.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.cli import run
from bench.records import CLAIM_FILE, InFlightBoot
from bench.report.console import status_line
from bench.store import acquire_claim, campaign_status, load_results

SIM_AB = Path(__file__).resolve().parents[1] / "fixtures" / "goldens" / "results" / "sim-ab"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    shutil.copytree(SIM_AB, tmp_path / "sim-ab")
    return tmp_path / "sim-ab"


def _running(arm: str, boot: int, host: str) -> InFlightBoot:
    now = datetime.now(UTC).isoformat(timespec="seconds")
    return InFlightBoot(
        boot_id=f"{arm}__b{boot:03d}__a2", arm=arm, boot=boot, attempt=2, host=host, started_at=now
    )


def test_a_finished_run_has_no_writer_and_names_its_last_failure(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    boots = load_results(run_dir).boots
    s = campaign_status(run_dir)
    assert s.writer is None and s.in_flight == [] and s.eta_s is None
    for a in s.arms:
        mine = boots[boots["arm"] == a.arm]
        assert a.target == 6 and a.ok == (mine["status"] == "ok").sum()
        assert a.failed == (mine["status"] != "ok").sum()
    failed = boots[boots["status"] != "ok"]
    assert len(failed) >= 1 and s.last_failure is not None
    assert failed.sort_values("order")["boot_id"].iloc[-1] in s.last_failure
    assert s.boot_s is not None and s.boot_s > 0
    span = (boots["finished_at"].max() - boots["started_at"].min()).total_seconds()
    assert s.state == "finished" and s.missing == 0
    assert s.elapsed_s == pytest.approx(span)  # the campaign's span, not "since then"
    assert run(["status", str(run_dir), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["arms"][0]["ok"] == s.arms[0].ok and body["writer"] is None
    assert "verdicts come from" in body["note"]
    assert "look" not in body["note"] and "look" not in capsys.readouterr().out  # none planned
    assert run(["status", str(run_dir)]) == 0
    assert "look" not in capsys.readouterr().out


def test_a_live_writer_with_boots_in_flight(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    held = acquire_claim(run_dir, "run-ab --resume")
    try:
        held.note_in_flight([_running("base", 5, "node-7"), _running("fix", 5, "node-8")])
        s = campaign_status(run_dir)
        assert s.writer is not None and s.writer.gone is None and s.writer.pid == held.claim.pid
        assert [a.in_flight for a in s.arms if a.arm in ("base", "fix")] == [1, 1]
        assert "node-7" in next(a for a in s.arms if a.arm == "base").hosts
        assert s.eta_s is not None  # boots left, a measured boot time, a driver
        assert s.eta_s >= 1.0  # every boot is ok or in flight: what those two have left
        assert s.state == "running" and s.elapsed_s is not None and s.elapsed_s < 60
        assert run(["status", str(run_dir)]) == 0
        view = capsys.readouterr().out
        assert "run-ab --resume" in view and "running: base__b005__a2 on node-7" in view
        assert "to go at this pace" in view
        line = status_line(campaign_status(run_dir))  # what --watch writes into a pipe
        assert "+1 in flight" in line and "+1," not in line
    finally:
        held.release()
    assert not (run_dir / CLAIM_FILE).exists()


def test_a_claim_whose_driver_is_gone_shows_no_boots_in_flight(run_dir: Path) -> None:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    held = acquire_claim(run_dir, "run-ab")
    held.note_in_flight([_running("base", 5, "node-7")])
    held._stop.set()  # the driver "dies": its claim stays behind with another PID
    body = json.loads((run_dir / CLAIM_FILE).read_text())
    (run_dir / CLAIM_FILE).write_text(json.dumps({**body, "pid": p.pid}))
    s = campaign_status(run_dir)
    assert s.writer is not None and s.writer.gone and "gone" in s.writer.gone
    assert s.in_flight == [] and s.eta_s is None


def test_watch_ends_by_itself_once_the_run_is_done(tmp_path: Path) -> None:
    done = tmp_path / "done"
    shutil.copytree(SIM_AB, done)
    assert all(a.ok >= (a.target or 0) for a in campaign_status(done).arms)  # complete
    out = subprocess.run(
        [sys.executable, "-m", "bench.cli", "status", str(done), "--watch", "--interval", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    (line,) = out.stdout.splitlines()  # into a pipe: one line per refresh, the last one
    assert line.startswith("finished: base 6/6 ok") and "took " in line


def test_a_stopped_run_says_how_many_boots_it_misses(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok = load_results(run_dir).ok_boots()
    gone = ok[ok["arm"] == "fix"].sort_values("boot")["boot_id"].tolist()[-2:]
    for boot_id in gone:  # as if the run had stopped before those two boots
        (run_dir / "boots" / f"{boot_id}.parquet").unlink()
        for p in (run_dir / "probes").glob(f"{boot_id}*.parquet"):
            p.unlink()
    s = campaign_status(run_dir)
    assert s.state == "stopped" and s.missing == 2 and s.eta_s is None
    assert run(["status", str(run_dir)]) == 0
    assert "stopped with 2 boot(s) missing" in capsys.readouterr().out


STATUS_IMPORTS = """
import sys
from bench.cli import run
code = run(["status", sys.argv[1]])
heavy = sorted(m for m in ("matplotlib", "scipy", "bench.stats", "mlflow", "bench.report.figures")
               if m in sys.modules)
print("HEAVY", ",".join(heavy), flush=True)
raise SystemExit(code)
"""


def test_status_reads_no_probe_and_imports_no_statistics_or_plotting(run_dir: Path) -> None:
    """`status` on a login node, refreshed every few seconds over NFS, reads the boot rows
    and the claim only: a probe file it cannot read changes nothing, and neither the
    statistics, scipy, matplotlib nor MLflow is imported (they cost seconds per refresh)."""
    probe = sorted((run_dir / "probes").glob("*.parquet"))[0]
    probe.write_bytes(b"not parquet")  # analyze refuses this; status never opens it
    out = subprocess.run(
        [sys.executable, "-c", STATUS_IMPORTS, str(run_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "HEAVY \n" in out.stdout, out.stdout[-500:]
    assert "fix" in out.stdout  # the table itself rendered (its arm rows)
