"""A per-boot watchdog: kills the boot's server groups when the process that owns them dies.

Why: `ray.cancel(force=True)`, a node's raylet dying, or a SIGKILLed driver (Ray then kills
the job's workers) end the Ray worker that runs a boot without any cleanup code running. The
server sits in its own session, so its API server and EngineCore children would survive as
orphans. The watchdog is a tiny separate process holding the read end of a pipe whose write
end only the worker has: EOF without a "done" byte means the worker died, and the watchdog
SIGTERMs, then SIGKILLs, every process group the boot recorded (`on_started` appends each
pgid to a file). No polling of Ray, no shared state beyond one file.

The watchdog is detached (started through a short-lived intermediate process, in its own
session) because a Ray worker SIGKILLs its direct children when it exits — that is also why
the API-server leader dies on force-cancel while EngineCore, a grandchild, survives.

Run as `python -m bench.run.reaper [--detach] FD PGID_FILE GRACE_S`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

DONE = b"D"


def read_pgids(pgid_file: Path) -> list[int]:
    try:
        text = pgid_file.read_text()
    except OSError:
        return []
    return [int(x) for x in text.split() if x.strip().isdigit()]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


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
    return subprocess.Popen(
        [sys.executable, "-m", "bench.run.reaper", *argv],
        pass_fds=(fd,),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # not in the worker's group: must outlive a group kill
    )


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--detach":
        _spawn(argv[1:], int(argv[1]))  # the watchdog proper, re-parented when we exit
        return 0
    fd, pgid_file, grace_s = int(argv[0]), Path(argv[1]), float(argv[2])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal Ctrl-C is the driver's business
    data = b""
    while True:
        try:
            chunk = os.read(fd, 64)
        except InterruptedError:
            continue
        if not chunk:
            break
        data += chunk
        if DONE in data:
            return 0  # the boot ended normally; its server is already stopped
    kill_groups(read_pgids(pgid_file), grace_s)
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
        try:
            _spawn(["--detach", str(r), str(self.pgid_file), str(self.grace_s)], r).wait()
        finally:
            os.close(r)
        self._w = w
        return self

    def record(self, pid: int, pgid: int) -> None:
        with self.pgid_file.open("a") as fh:
            fh.write(f"{pgid}\n")
            fh.flush()
            os.fsync(fh.fileno())

    def pgids(self) -> list[int]:
        return read_pgids(self.pgid_file)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._w is not None:
            with contextlib.suppress(OSError):
                os.write(self._w, DONE)
            os.close(self._w)
            self._w = None
        self.pgid_file.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
