"""What every process of a boot shares: start/stop as a context manager, the plan a member
runs (argv, environment) and the watch it reports to (the node's `reaper.BootGuard`)."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Protocol, Self

from bench.experiment import ContainerRef


class Lifecycle:
    """A context manager that starts on enter (stopping whatever started when that fails, so
    no error path leaks a process) and stops on exit."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
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


class Plan(Protocol):
    """What a member process needs: its argv and whole environment (tests pass their own)."""

    @property
    def argv(self) -> list[str]: ...

    @property
    def env(self) -> dict[str, str]: ...


class Watch(Protocol):
    """What the node's watchdog (`reaper.BootGuard`) must know to clean up after us."""

    def record(self, pid: int, pgid: int) -> None: ...

    def remember(self, pids: dict[int, int]) -> None: ...

    def container(self, ref: ContainerRef) -> None: ...

    def directory(self, path: Path) -> None: ...
