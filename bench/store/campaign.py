"""Where a campaign stands, from its results directory alone (`specab status`): it works from
a login node while a Slurm job on a compute node writes to shared storage.

Per arm: boots ok of the target, failed attempts, attempts in flight and the hosts that ran
them; who writes the directory now (the claim and its heartbeat), elapsed time and an ETA
from the measured boot durations, the next planned look and the last failure's root cause.
Counts only: verdicts come from `analyze` at looks and at the end.
"""

from __future__ import annotations

import math
import statistics
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from bench.records import InFlightBoot, WriterClaim
from bench.store.parquet_rows import VERSION_COLUMNS, check_arm_versions, load_manifest, read_dir
from bench.store.writer_claim import describe, read_claim, stale_reason

_COLUMNS = (
    "arm", "boot", "boot_id", "status", "error", "order", "host", "started_at", "finished_at",
    *VERSION_COLUMNS,
)  # fmt: skip


_TIMES = ("started_at", "finished_at")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ArmProgress(_Model):
    """One arm of the campaign."""

    arm: str = Field(description="Arm name.")
    target: int | None = Field(description="Boots per arm the experiment asks for.")
    ok: int = Field(description="Ok boots recorded (distinct boot indices).")
    failed: int = Field(description="Failed attempts recorded.")
    in_flight: int = Field(description="Attempts running now (from the writer's claim).")
    hosts: list[str] = Field(description="Hosts of its recorded and running attempts.")


class Writer(_Model):
    """Who writes the directory, from `claim.json`."""

    holder: str = Field(description="Command, host, PID, since, last heartbeat.")
    host: str = Field(description="Holder's host.")
    pid: int = Field(description="Holder's PID on its host.")
    heartbeat_age_s: float = Field(description="Seconds since the holder's last heartbeat.")
    gone: str | None = Field(description="Why the holder looks gone, else None.")


class CampaignStatus(_Model):
    """`specab status DIR --json`."""

    experiment: str = Field(description="Experiment name.")
    results_dir: str = Field(description="The directory read.")
    writer: Writer | None = Field(description="The driver writing it now, else None.")
    arms: list[ArmProgress] = Field(description="Per arm, in the experiment's order.")
    in_flight: list[InFlightBoot] = Field(description="Attempts running now.")
    elapsed_s: float | None = Field(
        description="Running: since the running driver started (its claim); over: from the "
        "first boot's start to the last boot's end."
    )
    boot_s: float | None = Field(description="Median wall time of an ok boot attempt.")
    eta_s: float | None = Field(
        description="What the boots in flight have left, plus the boots not yet launched x "
        "boot_s / boots at a time (as many as run now, or as the recorded boots overlapped); "
        "never 0 while boots run."
    )
    state: Literal["running", "finished", "stopped"] = Field(
        "running",
        description="running: a live driver writes it; finished: every arm has its boots; "
        "stopped: no live driver and boots are missing.",
    )
    missing: int = Field(0, description="Boots still missing to reach every arm's target.")
    next_look: int | None = Field(description="Next planned look (ok boots per arm).")
    last_failure: str | None = Field(description="The latest failed attempt and its cause.")
    note: str = Field(description="What these figures are (and are not).")


def _writer(claim: WriterClaim | None) -> Writer | None:
    if claim is None:
        return None
    age = (datetime.now(UTC) - datetime.fromisoformat(claim.heartbeat_at)).total_seconds()
    return Writer(
        holder=describe(claim),
        host=claim.host,
        pid=claim.pid,
        heartbeat_age_s=max(age, 0.0),
        gone=stale_reason(claim),
    )


Row = dict[str, Any]  # one boot attempt's row: the columns `specab status` reads


def _arm(arm: str, target: int | None, rows: list[Row], running: list[InFlightBoot]) -> ArmProgress:
    mine = [r for r in rows if r["arm"] == arm]
    hosts = {str(r["host"]) for r in mine if r["host"] is not None}
    return ArmProgress(
        arm=arm,
        target=target,
        ok=len({r["boot"] for r in mine if r["status"] == "ok"}),
        failed=sum(r["status"] != "ok" for r in mine),
        in_flight=sum(b.arm == arm for b in running),
        hosts=sorted((hosts | {b.host for b in running if b.arm == arm}) - {""}),
    )


def _last_failure(rows: list[Row]) -> str | None:
    failed = [r for r in rows if r["status"] != "ok"]
    if not failed:
        return None
    last = max(enumerate(failed), key=lambda ir: (ir[1]["order"], ir[0]))[1]  # stable: last
    return f"{last['boot_id']} on {last['host'] or '?'}: {last['error']}"


def _span(rows: list[Row]) -> float | None:
    """First start to last end of these attempts, in seconds (None without both)."""
    starts = [r["started_at"] for r in rows if r["started_at"] is not None]
    ends = [r["finished_at"] for r in rows if r["finished_at"] is not None]
    if not starts or not ends:
        return None
    return (max(ends) - min(starts)) / 1e6


def _at_a_time(ok: list[Row], walls: list[float]) -> int:
    """Boots the run has been running at once: their summed wall time over its span."""
    if len(walls) < 2:
        return 1
    span = _span(ok) or 0.0
    return max(round(sum(walls) / span), 1) if span > 0 else 1


def _elapsed(rows: list[Row], claim: WriterClaim | None) -> float | None:
    """While a driver runs: since it started (its claim holds when); once over: the
    campaign's span, first boot start to last boot end (it no longer grows)."""
    if claim is not None:
        since = datetime.now(UTC) - datetime.fromisoformat(claim.started_at)
        return max(since.total_seconds(), 0.0)
    span = _span(rows)
    return None if span is None else max(span, 0.0)


def _boot_rows(root: Path) -> list[Row]:
    """The boot rows, only the columns status reads (absent ones None), as plain rows."""
    tables = [t.replace_schema_metadata(None) for _, t in read_dir(root / "boots", _COLUMNS)]
    if not tables:
        return []
    table = pa.concat_tables(tables, promote_options="permissive")
    for name in _TIMES:  # as microseconds: a timestamp's Python form would import pandas
        if name in table.column_names:
            i = table.column_names.index(name)
            col = table[name]
            if pa.types.is_timestamp(col.type) and col.type.unit == "us":
                us = pa.chunked_array([c.view(pa.int64()) for c in col.chunks], pa.int64())
            else:  # another unit or type: Arrow converts it (importing its compute module)
                us = col.cast(pa.timestamp("us", "UTC")).cast(pa.int64())
            table = table.set_column(i, name, us)
    rows: list[Row] = table.to_pylist()
    for r in rows:
        for c in _COLUMNS:
            r.setdefault(c, None)
    return rows


def _in_flight_left(running: list[InFlightBoot], boot_s: float) -> float:
    """What the boot in flight with the most left has left, by the
    median boot (at least a second: a boot past the median is still running)."""
    now = datetime.now(UTC)
    ages = [(now - datetime.fromisoformat(b.started_at)).total_seconds() for b in running]
    return max((max(boot_s - age, 1.0) for age in ages), default=0.0)


def campaign_status(root: Path) -> CampaignStatus:
    """Read `root` (refusing damage in one line, as every reader does) into a status."""
    root = Path(root)
    manifest = load_manifest(root)
    rows = _boot_rows(root)  # no probe, no count is read
    check_arm_versions(rows, root / "boots")
    claim = read_claim(root)
    writer = _writer(claim)
    running = list(claim.in_flight) if claim is not None and writer and not writer.gone else []
    exp = manifest.experiment_section()
    target = getattr(exp, "boots_per_arm", None)
    arms = [_arm(a, target, rows, running) for a in manifest.arm_names()]
    ok = [r for r in rows if r["status"] == "ok"]
    walls = [
        (r["finished_at"] - r["started_at"]) / 1e6
        for r in ok
        if r["finished_at"] is not None and r["started_at"] is not None
    ]
    boot_s = float(statistics.median(walls)) if walls else None
    live = writer is not None and not writer.gone
    missing = sum(max((a.target or 0) - a.ok, 0) for a in arms)
    remaining = sum(max((a.target or 0) - a.ok - a.in_flight, 0) for a in arms)
    eta = None
    if boot_s is not None and live:
        at_once = max(len(running), _at_a_time(ok, walls), 1)
        eta = _in_flight_left(running, boot_s) + math.ceil(remaining / at_once) * boot_s
        eta = max(eta, 1.0) if running else eta
    done = min((a.ok for a in arms), default=0)
    looks = manifest.looks or exp.looks or []
    return CampaignStatus(
        experiment=manifest.experiment,
        results_dir=str(root),
        writer=writer,
        arms=arms,
        in_flight=running,
        elapsed_s=_elapsed(rows, claim if live else None),
        boot_s=boot_s,
        eta_s=eta,
        state="running" if live else "stopped" if missing else "finished",
        missing=missing,
        next_look=next((k for k in looks if k > done), None),
        last_failure=_last_failure(rows),
        note="counts only: verdicts come from `specab analyze`"
        + (" at the looks and at the end" if looks else " at the end"),
    )
