"""The vLLM server lifecycle of one boot (DESIGN.md "One boot").

Free loopback port, own session (process group), output to a log file (never a pipe),
`/health` polling that also notices early exit, stop = SIGTERM to the group, grace, SIGKILL,
then a /proc scan proving that no process of the group survived.
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
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Protocol

import httpx

from bench.errors import BootFailed

LOG_TAIL_LINES = 40
_PORT_IN_USE = ("address already in use", "errno 98")
_MAX_PORT_RETRIES = 3


class Plan(Protocol):
    """What ServerProcess needs of a `bench.experiment.LaunchPlan` (tests pass their own)."""

    @property
    def argv(self) -> list[str]: ...

    @property
    def env(self) -> dict[str, str]: ...


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS considers free right now (bind :0, read, close). Racy: callers retry."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def log_tail(path: Path, lines: int = LOG_TAIL_LINES, *, start: int = 0) -> list[str]:
    """Last `lines` lines of a log file from byte offset `start` (missing file: none)."""
    try:
        with path.open("rb") as fh:
            fh.seek(start)
            data = fh.read()
    except OSError:
        return []
    return data.decode("utf-8", "replace").splitlines()[-lines:]


def summarize_tail(tail: Sequence[str]) -> str:
    """The most telling single log line: the last one naming an error, else the last line."""
    for line in reversed(tail):
        low = line.lower()
        if "error" in low or "exception" in low:
            return line.strip()
    return tail[-1].strip() if tail else "(empty log)"


def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, pgid, starttime) of a live pid from /proc, or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # comm may contain spaces and ')'
    return fields[0], int(fields[1]), int(fields[2]), int(fields[19])


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def group_members(pgid: int) -> list[int]:
    """Pids of non-zombie processes whose process group is `pgid` (zombies hold no resources)."""
    out = []
    for pid in _all_pids():
        st = _stat(pid)
        if st is not None and st[2] == pgid and st[0] != "Z":
            out.append(pid)
    return out


def descendants(root: int) -> dict[int, int]:
    """{pid: starttime} of every live descendant of `root`, including ones that left the group."""
    children: dict[int, list[tuple[int, int]]] = {}
    for pid in _all_pids():
        st = _stat(pid)
        if st is not None and st[0] != "Z":
            children.setdefault(st[1], []).append((pid, st[3]))
    found: dict[int, int] = {}
    stack = [root]
    while stack:
        for pid, start in children.get(stack.pop(), []):
            if pid not in found:
                found[pid] = start
                stack.append(pid)
    return found


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class ServerProcess:
    """One vLLM API server. Use as a context manager so that no error path leaks it.

    `extra_args` are appended after the plan's argv (per-boot flags such as --seed);
    `cwd` defaults to a fresh empty temp dir (`python -m` puts cwd on sys.path).
    """

    def __init__(
        self,
        plan: Plan,
        log_path: Path,
        *,
        host: str = "127.0.0.1",
        ready_timeout_s: float,
        stop_grace_s: float = 10.0,
        extra_args: Sequence[str] = (),
        cwd: Path | None = None,
        on_started: Callable[[int, int], None] | None = None,
        poll_interval_s: float = 0.5,
    ) -> None:
        self.plan = plan
        self.log_path = Path(log_path)
        self.host = host
        self.ready_timeout_s = ready_timeout_s
        self.stop_grace_s = stop_grace_s
        self.extra_args = list(extra_args)
        self._cwd = cwd
        self._own_cwd: Path | None = None
        self._on_started = on_started
        self._poll = poll_interval_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._log_start = 0
        self._known: dict[int, int] = {}  # descendants seen while running: {pid: starttime}
        self.port = 0
        self.pgid = 0

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        return self._proc.pid if self._proc is not None else 0

    def start(self) -> None:
        """Launch on a fresh free port (argv + --host/--port + extra args)."""
        if self._cwd is None and self._own_cwd is None:
            self._own_cwd = Path(tempfile.mkdtemp(prefix="specab-server-cwd-"))
        cwd = self._cwd or self._own_cwd
        assert cwd is not None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self._log is None:
            self._log = self.log_path.open("ab")
        self._log_start = self._log.tell()
        self.port = free_port(self.host)
        argv = [*self.plan.argv, "--host", self.host, "--port", str(self.port), *self.extra_args]
        self._log.write(f"[specab] launching: {' '.join(argv)}\n".encode())
        self._log.flush()
        try:
            self._proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=dict(self.plan.env),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise BootFailed(
                f"cannot start server {argv[0]!r}: {exc}", log_path=str(self.log_path)
            ) from None
        self.pgid = self._proc.pid  # start_new_session: the leader's pid is the group id
        if self._on_started is not None:
            self._on_started(self._proc.pid, self.pgid)

    def wait_ready(self) -> None:
        """Poll /health until 200; BootFailed with the log tail on early exit or deadline."""
        assert self._proc is not None, "start() first"
        deadline = time.monotonic() + self.ready_timeout_s
        retries = 0
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while True:
                rc = self._proc.poll()
                if rc is not None:
                    tail = log_tail(self.log_path, start=self._log_start)
                    if retries < _MAX_PORT_RETRIES and any(
                        m in line.lower() for line in tail for m in _PORT_IN_USE
                    ):
                        retries += 1  # lost the free-port race to another process
                        self._reap()
                        self.start()
                        continue
                    raise self._failed(f"server exited with code {rc} during startup", tail)
                try:
                    if client.get(f"{self.base_url}/health").status_code == 200:
                        self._remember_descendants()
                        return
                except httpx.TransportError:
                    pass  # not listening yet, or accepted but still loading
                if time.monotonic() > deadline:
                    raise self._failed(
                        f"server not healthy after {self.ready_timeout_s:.0f} s "
                        "(raise server.ready_timeout_s if the model is just slow)",
                        log_tail(self.log_path, start=self._log_start),
                    )
                time.sleep(self._poll)

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _failed(self, summary: str, tail: list[str]) -> BootFailed:
        body = "\n".join(tail) if tail else "(empty log)"
        return BootFailed(
            f"{summary}: {summarize_tail(tail)}\n--- last {len(tail)} lines of "
            f"{self.log_path} ---\n{body}",
            log_path=str(self.log_path),
        )

    def _remember_descendants(self) -> None:
        if self._proc is not None:
            self._known.update(descendants(self._proc.pid))

    def _reap(self) -> None:
        """Kill what is left of the current launch (after an early exit) and wait the leader."""
        if self._proc is None:
            return
        self._remember_descendants()
        _signal_group(self.pgid, signal.SIGKILL)
        self._kill_known()
        self._proc.wait()

    def _kill_known(self) -> None:
        for pid, start in self._known.items():
            st = _stat(pid)
            if st is not None and st[3] == start:  # same process, not a reused pid
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def _survivors(self) -> list[int]:
        alive = set(group_members(self.pgid))
        for pid, start in self._known.items():
            st = _stat(pid)
            if st is not None and st[3] == start and st[0] != "Z":
                alive.add(pid)
        return sorted(alive)

    def stop(self) -> None:
        """SIGTERM the group, wait the grace, SIGKILL the group; verify nothing survived.

        Idempotent. Raises BootFailed only if processes survive SIGKILL (should never happen).
        """
        proc, self._proc = self._proc, None
        try:
            if proc is not None:
                self._known.update(descendants(proc.pid))
                _signal_group(self.pgid, signal.SIGTERM)
                deadline = time.monotonic() + self.stop_grace_s
                while time.monotonic() < deadline:
                    proc.poll()
                    if proc.returncode is not None and not self._survivors():
                        break
                    time.sleep(0.1)
                _signal_group(self.pgid, signal.SIGKILL)
                self._kill_known()
                proc.wait()
                deadline = time.monotonic() + 5.0  # SIGKILL is async; give the kernel a moment
                while (left := self._survivors()) and time.monotonic() < deadline:
                    time.sleep(0.05)
                if left:
                    raise BootFailed(
                        f"processes {left} of server group {self.pgid} survived SIGKILL",
                        log_path=str(self.log_path),
                    )
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None
            if self._own_cwd is not None:
                shutil.rmtree(self._own_cwd, ignore_errors=True)
                self._own_cwd = None

    def __enter__(self) -> ServerProcess:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
