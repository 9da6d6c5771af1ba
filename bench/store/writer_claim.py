"""One writer per results directory: the claim a driver holds for its lifetime.

The primitive is an exclusive create of `claim.json`: a finished temporary file hard-linked to
that name (`link` fails when it exists), atomic locally, on NFS and on Lustre, and never
half-written for a reader. `flock`/`fcntl` locks were not chosen: on NFS they depend
on the lock daemon and on Lustre on the `flock` mount option, and a partitioned client's
lock can vanish without its holder knowing. The holder rewrites its heartbeat every
`HEARTBEAT_S`; a claim is stale when its driver is gone from this host (dead PID, or the PID
reused by another process) or, from another host, when its heartbeat is older than
`stale_after_s()` (clocks of one cluster agree: munge refuses skewed nodes). A stale claim
is taken over under a short exclusive `claim.json.takeover` file, which the heartbeat also
takes, so a returning old holder cannot overwrite its successor. A boot row is written only
while `claim.json` holds the writer's own token (`HeldClaim.verify`), so a holder that was
taken over stops instead of recording a boot twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from bench.errors import SpecabError
from bench.records import CLAIM_FILE, InFlightBoot, WriterClaim
from bench.store.atomic_files import atomic_write_bytes, create_exclusive

HEARTBEAT_S = 30.0
STALE_ENV = "SPECAB_CLAIM_STALE_S"
DEFAULT_STALE_S = 600.0
TAKEOVER_LOCK_STALE_S = 60.0  # a takeover or heartbeat holds its lock for milliseconds
CLAIM_FILES = (CLAIM_FILE, f"{CLAIM_FILE}.takeover")


def stale_after_s() -> float:
    """Heartbeat age after which another host's claim is stale (`SPECAB_CLAIM_STALE_S`)."""
    return float(os.environ.get(STALE_ENV) or DEFAULT_STALE_S)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _age_s(stamp: str) -> float:
    return (datetime.now(UTC) - datetime.fromisoformat(stamp)).total_seconds()


def pid_started(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot, or None (no /proc, or no such PID)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def read_claim(root: Path) -> WriterClaim | None:
    """The claim on `root`, or None; a damaged claim file is refused in one line."""
    path = Path(root) / CLAIM_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return WriterClaim.model_validate(json.loads(text))
    except (ValueError, ValidationError) as exc:
        raise SpecabError(
            f"damaged writer claim ({str(exc).splitlines()[0]})",
            file=path,
            fix="if no driver is writing this directory, delete the file",
        ) from exc


def slurm_run() -> tuple[str | None, int]:
    """This process's Slurm job and how often Slurm requeued it (none outside Slurm)."""
    job = os.environ.get("SLURM_JOB_ID") or None
    restart = os.environ.get("SLURM_RESTART_COUNT", "0")
    return job, int(restart) if restart.isdigit() else 0


def stale_reason(claim: WriterClaim) -> str | None:
    """Why `claim`'s holder is gone, or None while it may still be writing. A claim of an
    earlier run of this very Slurm job (same job id, lower restart count) is gone at once:
    Slurm requeued the job, perhaps onto other nodes, so that run has ended."""
    job, restart = slurm_run()
    if claim.slurm_job is not None and claim.slurm_job == job and claim.slurm_restart < restart:
        return (
            f"Slurm job {job} was requeued (its run {claim.slurm_restart} held it; this is "
            f"run {restart})"
        )
    if claim.host == socket.gethostname():
        started = pid_started(claim.pid)
        if started is None:
            return f"its driver (pid {claim.pid}) is gone"
        if claim.pid_started is not None and started != claim.pid_started:
            return f"pid {claim.pid} now belongs to another process"
        return None
    age = _age_s(claim.heartbeat_at)
    return f"no heartbeat for {age:.0f} s" if age > stale_after_s() else None


def describe(claim: WriterClaim) -> str:
    age = max(_age_s(claim.heartbeat_at), 0.0)
    return (
        f"`{claim.command}` on host {claim.host} (pid {claim.pid}) since {claim.started_at}, "
        f"last heartbeat {age:.0f} s ago"
    )


def _replace(path: Path, claim: WriterClaim) -> None:
    atomic_write_bytes(path, claim.model_dump_json(indent=1).encode())


def _create(path: Path, claim: WriterClaim) -> None:
    """The claim, whole, or FileExistsError: no reader ever sees a half-written claim."""
    create_exclusive(path, claim.model_dump_json(indent=1).encode())


def guard_stale_s() -> float:
    """Age after which a left `claim.json.takeover` file is stale: a live holder keeps it
    for milliseconds, so one that outlives the claim's own staleness was left by a driver
    frozen or killed while holding it."""
    return min(TAKEOVER_LOCK_STALE_S, stale_after_s())


class _Guard:
    """The short exclusive `claim.json.takeover` file (heartbeat and takeover take it). It
    holds its taker's token, so a holder frozen while holding it and woken after a
    successor took it over leaves the successor's guard alone."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / f"{CLAIM_FILE}.takeover"
        self.token = uuid.uuid4().hex
        self.held = False

    def __enter__(self) -> bool:
        try:
            create_exclusive(self.path, self.token.encode())
            self.held = True
        except FileExistsError:
            try:  # left by a process that died or froze holding it
                if time.time() - self.path.stat().st_mtime > guard_stale_s():
                    self.path.unlink(missing_ok=True)
            except FileNotFoundError:
                pass
            self.held = False
        return self.held

    def __exit__(self, *exc: object) -> None:
        if not self.held:
            return
        with contextlib.suppress(OSError):
            if self.path.read_text(encoding="utf-8") == self.token:
                self.path.unlink(missing_ok=True)


class HeldClaim:
    """This driver's claim: heartbeats in a daemon thread until `release`."""

    def __init__(self, root: Path, claim: WriterClaim, *, created_root: bool) -> None:
        self.root, self.claim, self.created_root = Path(root), claim, created_root
        self.lost: str | None = None
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, name="specab-claim", daemon=True)
        self._beat.start()

    def verify(self) -> None:
        """Refuse to record unless `claim.json` still holds this driver's token."""
        current = read_claim(self.root)
        if current is None or current.token != self.claim.token:
            who = describe(current) if current else "nobody (the claim file is gone)"
            self.lost = who
            raise SpecabError(
                f"this driver's claim on the results directory was taken over by {who}; "
                "it stops without recording",
                file=self.root / CLAIM_FILE,
                fix="let the current holder finish; then `run-ab --resume` continues",
            )

    def note_in_flight(self, boots: list[InFlightBoot]) -> None:
        """Record the attempts in flight (for `status`), when they changed; skipped while a
        takeover decides (the next call writes them)."""
        if [b.boot_id for b in boots] == [b.boot_id for b in self.claim.in_flight]:
            return  # the same attempts (their start times are derived each call)
        with _Guard(self.root) as held:
            current = read_claim(self.root) if held else None
            if current is not None and current.token == self.claim.token:
                self.claim = self.claim.model_copy(update={"in_flight": boots})
                _replace(self.root / CLAIM_FILE, self.claim)

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            with _Guard(self.root) as held:
                if not held:
                    continue  # a takeover is deciding: the next beat tells who won
                current = read_claim(self.root)
                if current is None or current.token != self.claim.token:
                    self.lost = describe(current) if current else "claim file removed"
                    return
                self.claim = self.claim.model_copy(update={"heartbeat_at": _now()})
                _replace(self.root / CLAIM_FILE, self.claim)

    def release(self) -> None:
        """Stop the heartbeat and remove the claim if it is still this driver's; a directory
        this claim created and nothing else wrote is removed too (nothing half-written)."""
        self._stop.set()
        self._beat.join(timeout=5)
        try:
            current = read_claim(self.root)
        except SpecabError:
            return
        if current is not None and current.token == self.claim.token:
            (self.root / CLAIM_FILE).unlink(missing_ok=True)
        if self.created_root:
            _remove_if_empty(self.root)


def _remove_if_empty(root: Path) -> None:
    with contextlib.suppress(OSError):
        root.rmdir()  # fails unless empty


def acquire_claim(root: Path, command: str) -> HeldClaim:
    """Claim `root` for this process (creating the directory), or refuse in one line."""
    root = Path(root)
    created = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    now = _now()
    job, restart = slurm_run()
    mine = WriterClaim(
        token=uuid.uuid4().hex,
        host=socket.gethostname(),
        pid=os.getpid(),
        pid_started=pid_started(os.getpid()),
        command=command,
        started_at=now,
        heartbeat_at=now,
        slurm_job=job,
        slurm_restart=restart,
    )
    path = root / CLAIM_FILE
    # long enough for a guard left by a frozen holder to go stale, then a few tries more
    deadline = time.monotonic() + guard_stale_s() + 5.0
    while time.monotonic() < deadline:
        try:
            _create(path, mine)
            return HeldClaim(root, mine, created_root=created)
        except FileExistsError:
            pass
        current = read_claim(root)
        if current is None:
            continue  # released meanwhile
        why = stale_reason(current)
        if why is None:
            if created:
                _remove_if_empty(root)
            raise SpecabError(
                f"results directory is being written by {describe(current)}",
                file=root,
                field="--results-dir",
                fix="wait for that run to end (or stop it); a claim whose driver is gone is "
                f"taken over at once on its host, from another after {stale_after_s():.0f} s "
                "without heartbeat",
            )
        mine = mine.model_copy(
            update={
                "took_over": f"{current.host} pid {current.pid} since {current.started_at} ({why})"
            }
        )
        with _Guard(root) as held:
            again = read_claim(root) if held else None
            if again is not None and again.token == current.token:
                _replace(path, mine)
                return HeldClaim(root, mine, created_root=created)
        time.sleep(0.2)
    raise SpecabError(
        "could not claim the results directory: other drivers keep claiming it",
        file=root / CLAIM_FILE,
        fix="run one driver per results directory",
    )
