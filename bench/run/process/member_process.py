"""One member process of a boot on this node: the lifecycle every server process shares.

Own session (process group), output to a log file (never a pipe), an empty cwd; stop =
SIGTERM to the group, grace, SIGKILL to the group and to every descendant seen while it ran
(some leave the group), then a /proc scan proving nothing survived. A member that runs in a
container is also stopped by its container's name (`<runtime> stop -t GRACE`, `rm -f`):
killing the container CLI's process does not stop the container, its runtime owns it; the
stop checks the container is gone. Stopping is split in two phases (`begin_stop`,
`finish_stop`) so a gang boot can SIGTERM all its members before waiting for any.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from bench.errors import BootFailed
from bench.experiment import REDACTED, ContainerRef, scrub, secret_values
from bench.run.process.container_gone import wait_container_gone
from bench.run.process.lifecycle import Lifecycle, Plan, Watch
from bench.run.process.procfs import (
    LOG_TAIL_LINES,
    descendants,
    group_members,
    kill_known,
    log_tail,
    proc_stat,
    signal_group,
)
from bench.run.process.root_cause import summarize_tail

CAUSE_LINES = 2000  # log lines searched for the root-cause exception
KILL_SETTLE_S = 5.0  # SIGKILL is async: what the kernel normally needs to end a group
# A GPU process outlives SIGKILL while its contexts are torn down: the stop waits that long
# (the boot's slot stays held, so no next boot shares the GPU with it) before failing.
LINGER_LIMIT_S = 300.0
# vLLM's ZeroMQ sockets (ipc://<dir>/<uuid4>, default the temp dir) outlive every stop
RPC_ENV = "VLLM_RPC_BASE_PATH"  # each boot left 2 in /tmp for good: 1,700 in a day here
_SUN_PATH_ROOM = 70  # a socket path is at most 107 bytes; the name after the dir takes 37


# (leader, end of the grace period, the container's `stop` command running in background)
_Stopping = tuple["subprocess.Popen[bytes]", float, "subprocess.Popen[bytes] | None"]


@dataclass(frozen=True)
class TreeSettings:
    """How one process tree is run and stopped, beside its command and log."""

    stop_grace_s: float = 10.0  # SIGTERM (or the container's stop) -> SIGKILL
    cwd: Path | None = None  # None: a fresh empty directory (`python -m` puts cwd on sys.path)
    on_started: Callable[[int, int], None] | None = None  # (pid, pgid) once launched
    watch: Watch | None = None  # the boot's reaper, told of the group and the container
    container: ContainerRef | None = None  # the tree runs in this container
    role: str = "server"  # how errors name it: "server", "gang member 1"
    remove_cwd: bool = False  # `cwd` is the tree's own: removed after the stop


class MemberProcess(Lifecycle):
    """One process tree of a boot (a server or a gang member). Use `stop()` on every path."""

    def __init__(self, plan: Plan, log_path: Path, how: TreeSettings = TreeSettings()) -> None:
        self.plan = plan
        self.role = how.role
        self.log_path = Path(log_path)
        self.stop_grace_s = how.stop_grace_s
        self.container = how.container
        self._cwd = how.cwd
        self._own_cwd: Path | None = how.cwd if how.remove_cwd else None  # removed after stop
        self._ipc_dir: Path | None = None  # vLLM's sockets (RPC_ENV), removed after the stop
        self._on_started = how.on_started
        self._watch = how.watch
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._log_start = 0
        self._known: dict[int, int] = {}  # descendants seen while running: {pid: starttime}
        self._stopping: _Stopping | None = None  # between begin_stop and finish_stop
        self._lock = threading.Lock()  # a gang's monitor thread may kill while we stop
        self.pgid = 0
        self.lingered: str | None = None  # processes outlived SIGKILL, then went: a warning

    @property
    def pid(self) -> int:
        return self._proc.pid if self._proc is not None else 0

    def launch(self, argv: list[str]) -> None:
        """Start `argv` in its own session, output appended to the log file."""
        if self._cwd is None and self._own_cwd is None:
            self._own_cwd = self._own_dir("specab-server-cwd-")
        cwd = self._cwd or self._own_cwd
        assert cwd is not None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self._log is None:
            self._log = self.log_path.open("ab")
        self._log_start = self._log.tell()
        self._log.write(f"[specab] launching: {' '.join(argv)}\n".encode())
        self._log.flush()
        if self.container is not None and self._watch is not None:
            self._watch.container(self.container)  # before it exists: no window without it
        try:
            self._proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise BootFailed(
                f"cannot start {self.role} {argv[0]!r}: {exc}", log_path=str(self.log_path)
            ) from None
        self.pgid = self._proc.pid  # start_new_session: the leader's pid is the group id
        if self._watch is not None:
            self._watch.record(self._proc.pid, self.pgid)
        if self._on_started is not None:
            self._on_started(self._proc.pid, self.pgid)

    def _own_dir(self, prefix: str) -> Path:
        """A temp dir of this member's, removed after the stop (by the watchdog if we die)."""
        path = Path(tempfile.mkdtemp(prefix=prefix))
        if self._watch is not None:
            self._watch.directory(path)
        return path

    def _env(self) -> dict[str, str]:
        """The plan's env, with a socket dir of this member's own (not in a container)."""
        env = dict(self.plan.env)
        if self.container is not None or RPC_ENV in env:
            return env
        if self._ipc_dir is None:
            self._ipc_dir = self._own_dir("specab-ipc-")
        short = len(str(self._ipc_dir)) <= _SUN_PATH_ROOM  # else vLLM's default, as before
        return {**env, RPC_ENV: str(self._ipc_dir)} if short else env

    def poll(self) -> int | None:
        """The leader's exit code, or None while it runs (or before it started)."""
        return self._proc.poll() if self._proc is not None else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def tail(self, lines: int = LOG_TAIL_LINES) -> list[str]:
        secrets = secret_values(self.plan.env)
        return [scrub(x, secrets) for x in log_tail(self.log_path, lines, start=self._log_start)]

    def _scrub_log(self) -> None:
        """The secrets the server was given, gone from the log specab keeps (a server may
        echo its environment or a request's header into it)."""
        secrets = [v.encode() for v in secret_values(self.plan.env)]
        try:
            text = self.log_path.read_bytes()
        except OSError:
            return
        if any(v in text for v in secrets):
            for v in secrets:
                text = text.replace(v, REDACTED.encode())
            with contextlib.suppress(OSError):
                self.log_path.write_bytes(text)

    def failed(self, summary: str, tail: list[str] | None = None) -> BootFailed:
        tail = self.tail() if tail is None else tail
        body = "\n".join(tail) if tail else "(empty log)"
        # The engine's traceback can sit far above the shown tail (shutdown noise follows it).
        cause = summarize_tail(self.tail(CAUSE_LINES) or tail)
        return BootFailed(
            f"{summary}: {cause}\n--- last {len(tail)} lines of {self.log_path} ---\n{body}",
            log_path=str(self.log_path),
        )

    def remember_descendants(self) -> None:
        if self._proc is not None:
            found = descendants(self._proc.pid)
            self._known.update(found)
            if self._watch is not None and found:
                self._watch.remember(found)

    def reap(self) -> None:
        """Kill what is left of the current launch (after an early exit) and wait the leader."""
        if self._proc is None:
            return
        self.remember_descendants()
        signal_group(self.pgid, signal.SIGKILL)
        kill_known(self._known)
        self._remove_container(0.0)
        self._proc.wait()

    def kill_now(self) -> None:
        """SIGKILL everything at once (from another thread: a gang member died)."""
        with self._lock:
            if self._proc is not None:
                self.remember_descendants()
                signal_group(self.pgid, signal.SIGKILL)
                kill_known(self._known)
        self._remove_container(0.0)

    def _remove_container(self, grace_s: float) -> None:
        if self.container is None:
            return
        for cmd in self.container.stop_commands(grace_s):
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                subprocess.run(cmd, capture_output=True, timeout=grace_s + 60)

    def survivors(self) -> list[int]:
        alive = set(group_members(self.pgid)) if self.pgid else set()
        for pid, start in self._known.items():
            st = proc_stat(pid)
            if st is not None and st[3] == start and st[0] != "Z":
                alive.add(pid)
        return sorted(alive)

    def begin_stop(self) -> None:
        """Phase 1: SIGTERM the group (a container: `<runtime> stop -t GRACE` in the
        background, which TERMs, waits and KILLs inside the container itself)."""
        with self._lock:
            proc, self._proc = self._proc, None
            if proc is None:
                return
            self._known.update(descendants(proc.pid))
            stopper = None
            if self.container is not None:
                stop_cmd = self.container.stop_commands(self.stop_grace_s)[0]
                with contextlib.suppress(OSError):
                    stopper = subprocess.Popen(
                        stop_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                    )
            signal_group(self.pgid, signal.SIGTERM)
            self._stopping = (proc, time.monotonic() + self.stop_grace_s, stopper)

    def finish_stop(self) -> None:
        """Phase 2: wait out the grace, SIGKILL group and known descendants, remove the
        container; raise BootFailed if anything survived (should never happen)."""
        with self._lock:
            stopping, self._stopping = self._stopping, None
        try:
            if stopping is not None:
                self._finish(*stopping)
        finally:
            self._close()

    def _finish(
        self,
        proc: subprocess.Popen[bytes],
        deadline: float,
        stopper: subprocess.Popen[bytes] | None,
    ) -> None:
        while time.monotonic() < deadline:
            proc.poll()
            if proc.returncode is not None and not self.survivors():
                break
            time.sleep(0.1)
        if stopper is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                stopper.wait(timeout=60)
        self._remove_container(0.0)
        signal_group(self.pgid, signal.SIGKILL)
        kill_known(self._known)
        proc.wait()
        self._wait_gone()
        if self.container is not None and (said := wait_container_gone(self.container)):
            self.lingered = f"{self.lingered}; {said}" if self.lingered else said

    def lingering(self) -> tuple[str, ...]:
        """After the stop: what outlived SIGKILL for a while (a warning, not a failure)."""
        return (self.lingered,) if self.lingered else ()

    def _wait_gone(self) -> None:
        """Wait until nothing of the group is left. Beyond KILL_SETTLE_S the stop goes on
        waiting (holding the boot's slot) and notes it in `lingered`; BootFailed only when
        something is still there after LINGER_LIMIT_S."""
        t0 = time.monotonic()
        first: list[int] = []
        while left := self.survivors():
            first = first or left
            waited = time.monotonic() - t0
            if waited > LINGER_LIMIT_S:
                raise BootFailed(
                    f"processes {left} of {self.role} group {self.pgid} survived SIGKILL "
                    f"for {waited:.0f} s",
                    log_path=str(self.log_path),
                )
            time.sleep(0.05 if waited < KILL_SETTLE_S else 0.5)
        waited = time.monotonic() - t0
        if waited > KILL_SETTLE_S:
            self.lingered = (
                f"processes {first} of the {self.role} outlived SIGKILL by {waited:.0f} s "
                "(its slot was held until they were gone)"
            )

    def _close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
            self._scrub_log()
        for own in (self._own_cwd, self._ipc_dir):
            if own is not None:
                shutil.rmtree(own, ignore_errors=True)
        self._own_cwd = self._ipc_dir = None

    def stop(self) -> None:
        """SIGTERM, grace, SIGKILL; verify nothing survived. Idempotent."""
        self.begin_stop()
        self.finish_stop()
