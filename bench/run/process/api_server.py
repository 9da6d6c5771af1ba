"""The vLLM API server of one boot: a `MemberProcess` with a port.

Free loopback port, `/health` polling that also notices early exit (and, for a gang boot,
any other member's exit through `check`), a retry when another process won the free-port
race; the process lifecycle (own session, log file, SIGTERM -> grace -> SIGKILL, /proc
check, container stop by name) is `member_process.MemberProcess`.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx

from bench.run.process.lifecycle import Plan
from bench.run.process.member_process import MemberProcess, TreeSettings
from bench.run.process.procfs import descendants, group_members, log_tail
from bench.run.process.root_cause import summarize_tail

__all__ = [
    "MAX_PORT_RETRIES",
    "Plan",
    "ServerProcess",
    "descendants",
    "free_port",
    "group_members",
    "log_tail",
    "summarize_tail",
]

_PORT_IN_USE = ("address already in use", "errno 98")
NOT_HEALTHY = "server not healthy after"  # the readiness timeout's words (the run loop reads them)
MAX_PORT_RETRIES = 3


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS considers free right now (bind :0, read, close). Racy: callers retry."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ServerProcess(MemberProcess):
    """One vLLM API server. Use as a context manager so that no error path leaks it.

    `extra_args` are appended after the plan's argv (per-boot flags such as --seed);
    `cwd` defaults to a fresh empty temp dir (`python -m` puts cwd on sys.path).
    """

    def __init__(
        self,
        plan: Plan,
        log_path: Path,
        *,
        ready_timeout_s: float,
        host: str = "127.0.0.1",
        extra_args: Sequence[str] = (),
        poll_interval_s: float = 0.5,
        how: TreeSettings = TreeSettings(),
    ) -> None:
        super().__init__(plan, log_path, how)
        self.host = host
        self.ready_timeout_s = ready_timeout_s
        self.extra_args = list(extra_args)
        self._poll = poll_interval_s
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        """Launch on a fresh free port (argv + --host/--port + extra args)."""
        self.port = free_port(self.host)
        argv = [*self.plan.argv, "--host", self.host, "--port", str(self.port), *self.extra_args]
        self.launch(argv)

    def port_taken(self) -> bool:
        """The server exited because a port it binds was taken (another process won the
        free-port race: its API port, or a gang head's rendezvous port)."""
        return any(m in line.lower() for line in self.tail() for m in _PORT_IN_USE)

    def wait_ready(
        self, check: Callable[[], None] | None = None, *, port_retries: int = MAX_PORT_RETRIES
    ) -> None:
        """Poll /health until 200; BootFailed with the log tail on early exit or deadline.
        `check` runs every poll and may raise BootFailed itself (a gang member exited).
        `port_retries`: relaunches on a new API port after a port collision (a gang: 0, the
        gang restarts whole on new ports instead)."""
        assert self._proc is not None, "start() first"
        deadline = time.monotonic() + self.ready_timeout_s
        retries = 0
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while True:
                rc = self.poll()
                if rc is not None:
                    tail = self.tail()
                    if retries < port_retries and self.port_taken():
                        retries += 1  # lost the free-port race to another process
                        self.reap()
                        self.start()
                        continue
                    raise self.failed(f"server exited with code {rc} during startup", tail)
                if check is not None:
                    check()
                try:
                    if client.get(f"{self.base_url}/health").status_code == 200:
                        self.remember_descendants()
                        return
                except httpx.TransportError:
                    pass  # not listening yet, or accepted but still loading
                if time.monotonic() > deadline:
                    raise self.failed(
                        f"{NOT_HEALTHY} {self.ready_timeout_s:.0f} s "
                        "(raise server.ready_timeout_s if the model is just slow)"
                    )
                time.sleep(self._poll)
