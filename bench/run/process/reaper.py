"""A per-boot watchdog: kills the boot's server groups when the process that owns them dies.

Why: `ray.cancel(force=True)`, a node's raylet dying, or a SIGKILLed driver (Ray then kills
the job's workers) end the Ray worker that runs a boot without any cleanup code running. The
server sits in its own session, so its API server and EngineCore children would survive as
orphans. The watchdog is a tiny separate process holding the read end of a pipe whose write
end only the worker has: EOF without a "done" byte means the worker died (or left the guard
by an exception, or with a recorded process still running), and the watchdog
SIGTERMs, then SIGKILLs, every process group the boot recorded (`on_started` appends each
pgid to a file), every descendant remembered while the server ran (same start time only: a
reused pid is left alone), and removes every container the boot started (`<runtime> stop
-t GRACE NAME`, then `rm -f`): a container's processes belong to its runtime, not to us.
No polling of Ray, no shared state beyond one file. A gang boot has one watchdog per member,
on the member's node, owned by the Ray worker that runs that member.

File lines: `PGID`, `p PID STARTTIME` (a remembered descendant), `c RUNTIME NAME`, `d PATH`
(a directory of the boot's to remove once its processes are dead: vLLM's sockets).

The watchdog is detached (started through a short-lived intermediate process, in its own
session) because a Ray worker SIGKILLs its direct children when it exits — that is also why
the API-server leader dies on force-cancel while EngineCore, a grandchild, survives.

The owner's death is also seen without the pipe: every second the watchdog checks that the
owner's pid still runs with the start time it had (arguments OWNER_PID OWNER_START). A copy of
the write end in another process (a fork that never exec'd) would otherwise hold the EOF off
for as long as that process lives.

Run as `python -I -S path/to/reaper.py [--detach] FD PGID_FILE GRACE_S OWNER_PID OWNER_START`
(stdlib only).
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

DONE = b"D"
_QUIET: dict[str, Any] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}


@dataclass
class Recorded:
    """What a boot's file says to clean up on this node."""

    pgids: list[int] = field(default_factory=list)
    pids: dict[int, int] = field(default_factory=dict)  # {pid: starttime}
    containers: list[tuple[str, str]] = field(default_factory=list)  # (runtime, name)
    directories: list[str] = field(default_factory=list)


def read_recorded(pgid_file: Path) -> Recorded:
    try:
        lines = pgid_file.read_text().splitlines()
    except OSError:
        return Recorded()
    out = Recorded()
    for line in lines:
        parts = line.split()
        if len(parts) == 1 and parts[0].isdigit():
            out.pgids.append(int(parts[0]))
        elif len(parts) == 3 and parts[0] == "p" and parts[1].isdigit() and parts[2].isdigit():
            out.pids[int(parts[1])] = int(parts[2])
        elif len(parts) == 3 and parts[0] == "c":
            out.containers.append((parts[1], parts[2]))
        elif line.startswith("d /"):
            out.directories.append(line[2:])
    return out


def read_pgids(pgid_file: Path) -> list[int]:
    return read_recorded(pgid_file).pgids


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state first), or None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()


def _start_time(pid: int) -> int | None:
    fields = _stat(pid)
    return None if fields is None else int(fields[19])


def _remove_containers(containers: list[tuple[str, str]], grace_s: float) -> None:
    """`stop -t GRACE` every container at once (TERM, grace, KILL inside), then `rm -f`."""
    grace = str(max(0, round(grace_s)))
    procs = []
    for runtime, name in containers:
        with contextlib.suppress(OSError):
            procs.append(subprocess.Popen([runtime, "stop", "-t", grace, name], **_QUIET))
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=grace_s + 60)
    for runtime, name in containers:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run([runtime, "rm", "-f", name], timeout=60, **_QUIET)


def clean_up(rec: Recorded, grace_s: float) -> None:
    """Containers and process groups of one boot: SIGTERM, grace, SIGKILL (remembered
    descendants too, while they are still the same processes)."""
    if rec.containers:
        _remove_containers(rec.containers, grace_s)
    kill_groups(rec.pgids, grace_s)
    for pid, start in rec.pids.items():
        if _start_time(pid) == start:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    for path in rec.directories:
        shutil.rmtree(path, ignore_errors=True)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def still_running(rec: Recorded) -> bool:
    """A recorded group has a process that is not a zombie, or a remembered descendant is
    still the same running process. The owner's side only: `procfs` is bench's, and the
    watchdog runs this file as a stdlib-only script."""
    from bench.run.process.procfs import group_members, proc_stat

    if any(_group_alive(p) and group_members(p) for p in rec.pgids):
        return True
    return any(
        (st := proc_stat(pid)) is not None and st[0] != "Z" and st[3] == start
        for pid, start in rec.pids.items()
    )


def kill_groups(pgids: list[int], grace_s: float) -> None:
    """SIGTERM each group, wait up to `grace_s`, then SIGKILL whatever is left."""
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_group_alive(p) for p in pgids):
        time.sleep(0.1)
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def _spawn(argv: list[str], fd: int) -> subprocess.Popen[bytes]:
    # This file run as a script, isolated and without site-packages: it needs only the
    # standard library, and `-m bench.run.process.reaper` would import the whole bench.run package
    # (httpx, pydantic, ...) twice per boot, ~2 s of CPU each on a 2-core node.
    return subprocess.Popen(
        [sys.executable, "-I", "-S", str(Path(__file__).resolve()), *argv],
        pass_fds=(fd,),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # not in the worker's group: must outlive a group kill
    )


def _owner_gone(pid: int, start: int) -> bool:
    """The owner no longer runs: its pid is gone, a zombie, or another process's now."""
    fields = _stat(pid)
    return fields is None or fields[0] in ("Z", "X") or int(fields[19]) != start


def _wait_for_owner(fd: int, owner: int, owner_start: int) -> bool:
    """Block until the boot ends (True: the "done" byte) or its owner dies (False: EOF, or
    the owner gone while something else still holds a copy of the write end)."""
    data = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 1.0)  # a signal retries it (PEP 475)
        if not ready:
            if _owner_gone(owner, owner_start):
                return False
            continue
        chunk = os.read(fd, 64)
        if not chunk:
            return False
        data += chunk
        if DONE in data:
            return True


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--detach":
        _spawn(argv[1:], int(argv[1]))  # the watchdog proper, re-parented when we exit
        return 0
    fd, pgid_file, grace_s = int(argv[0]), Path(argv[1]), float(argv[2])
    owner, owner_start = int(argv[3]), int(argv[4])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal Ctrl-C is the driver's business
    if _wait_for_owner(fd, owner, owner_start):
        return 0  # the boot ended normally; its server is already stopped
    clean_up(read_recorded(pgid_file), grace_s)
    pgid_file.unlink(missing_ok=True)
    return 0


class BootGuard:
    """Context manager owning one watchdog; `record(pid, pgid)` is the boot's `on_started`."""

    def __init__(self, pgid_file: Path, *, grace_s: float = 5.0) -> None:
        self.pgid_file = Path(pgid_file)
        self.grace_s = grace_s
        self._w: int | None = None

    def __enter__(self) -> BootGuard:
        self.pgid_file.parent.mkdir(parents=True, exist_ok=True)
        self.pgid_file.write_text("")
        r, w = os.pipe()  # non-inheritable: only the watchdog (pass_fds) gets the read end
        me = os.getpid()
        argv = [str(r), str(self.pgid_file), str(self.grace_s), str(me), str(_start_time(me))]
        try:
            _spawn(["--detach", *argv], r).wait()
        except BaseException:  # cut short (a Ray cancel): leave no file and no open write end
            os.close(w)  # a watchdog already started sees EOF, finds nothing and exits
            self.pgid_file.unlink(missing_ok=True)
            raise
        finally:
            os.close(r)
        self._w = w
        return self

    def _append(self, line: str) -> None:
        with self.pgid_file.open("a") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def record(self, pid: int, pgid: int) -> None:
        self._append(str(pgid))

    def remember(self, pids: dict[int, int]) -> None:
        """Descendants seen while the server ran ({pid: starttime}); some leave the group."""
        if pids:
            self._append("\n".join(f"p {pid} {start}" for pid, start in sorted(pids.items())))

    def container(self, ref: Any) -> None:
        """A container (`.runtime`, `.name`) to remove, written before it is started."""
        self._append(f"c {ref.runtime} {ref.name}")

    def directory(self, path: Path) -> None:
        """A directory (absolute) to remove after the boot's processes are killed."""
        self._append(f"d {Path(path).resolve()}")

    def pgids(self) -> list[int]:
        return read_pgids(self.pgid_file)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """The "done" byte only when the block ended normally and nothing it recorded still
        runs. Otherwise EOF alone: the watchdog cleans up, then removes the file. A stop cut
        short (Ray's SIGTERM raises SystemExit inside it, then SIGKILLs the leader) left a
        server's group unsignalled, and "done" let its children outlive the boot."""
        ended = exc_type is None and not still_running(read_recorded(self.pgid_file))
        if self._w is not None:
            if ended:
                with contextlib.suppress(OSError):
                    os.write(self._w, DONE)
            os.close(self._w)
            self._w = None
        if ended:
            self.pgid_file.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
