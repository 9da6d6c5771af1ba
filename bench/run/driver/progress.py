"""Progress of a run-ab experiment: a rich Live table, or one line per boot (`--quiet`).

Both views read the same `ProgressState`; the driver only updates the state and calls
`refresh()`. The ETA is measured, not guessed: mean wall time of the attempts finished in
this run x boots still to go / slots.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from statistics import fmean
from typing import Protocol

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from bench.records import BootRecord


@dataclass
class Running:
    arm: str
    boot: int
    attempt: int
    node: str
    since: float


@dataclass
class ProgressState:
    arms: list[str]
    target: dict[str, int]  # ok boots wanted per arm (B)
    ok: dict[str, int]
    failed: dict[str, int] = field(default_factory=dict)  # failed attempts in this run
    slots: int = 1
    running: dict[str, Running] = field(default_factory=dict)  # by boot_id
    durations: list[float] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    # a culprit search asks for boots as it goes: no target to count down to, no ETA
    open_ended: bool = False

    def done(self, arm: str | None = None) -> str:
        """Ok boots (of one arm, or all) over the target, or alone for an open-ended run."""
        ok = self.ok.get(arm, 0) if arm else sum(self.ok.values())
        target = self.target.get(arm, 0) if arm else sum(self.target.values())
        return f"{ok}" if self.open_ended else f"{ok}/{target}"

    def remaining(self) -> int:
        return sum(max(0, self.target[a] - self.ok.get(a, 0)) for a in self.arms)

    def eta_s(self) -> float | None:
        if not self.durations or self.open_ended:
            return None
        left = self.remaining()
        waves = left / max(1, self.slots)
        return fmean(self.durations) * waves


def _fmt_s(s: float | None) -> str:
    if s is None:
        return "?"
    s = round(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class Progress(Protocol):
    state: ProgressState

    def __enter__(self) -> Progress: ...
    def __exit__(self, *exc: object) -> None: ...
    def started(self, boot_id: str, run: Running) -> None: ...
    def finished(self, record: BootRecord, wall_s: float) -> None: ...
    def note(self, text: str) -> None: ...
    def refresh(self) -> None: ...


class _Base:
    def __init__(self, state: ProgressState, console: Console) -> None:
        self.state = state
        self.console = console

    def started(self, boot_id: str, run: Running) -> None:
        self.state.running[boot_id] = run

    def finished(self, record: BootRecord, wall_s: float) -> None:
        self.state.running.pop(record.boot_id, None)
        arm = record.arm
        if record.status == "ok":
            self.state.ok[arm] = self.state.ok.get(arm, 0) + 1
        else:
            self.state.failed[arm] = self.state.failed.get(arm, 0) + 1
        self.state.durations.append(wall_s)

    def refresh(self) -> None:
        pass


class LineProgress(_Base):
    """One line per finished attempt, for batch jobs and logs (`--quiet`)."""

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def finished(self, record: BootRecord, wall_s: float) -> None:
        super().finished(record, wall_s)
        s = self.state
        lines = (record.error or "").splitlines()
        err = "" if record.status == "ok" else f" error={(lines[0] if lines else '')[:160]!r}"
        if record.no_drafts:  # measured, but no drafter: kept out of acceptance
            err = f" flagged={record.no_drafts[:160]!r}"
        self.console.print(
            f"boot {record.boot_id} {record.status} host={record.host} "
            f"{wall_s:.1f}s done={s.done()} "
            f"eta={_fmt_s(s.eta_s())}{err}",
            markup=False,
            highlight=False,
        )
        self.console.file.flush()  # batch logs are files: make every line visible at once

    def note(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)
        self.console.file.flush()


class LiveProgress(_Base):
    """A rich Live table: per-arm ok / failed / running, current boots, ETA."""

    def __init__(self, state: ProgressState, console: Console) -> None:
        super().__init__(state, console)
        self._live = Live(console=console, refresh_per_second=2, transient=False)
        self._notes: list[str] = []

    def __enter__(self) -> LiveProgress:
        self._live.__enter__()
        self.refresh()
        return self

    def __exit__(self, *exc: object) -> None:
        self.refresh()
        self._live.__exit__(None, None, None)

    def note(self, text: str) -> None:
        self._live.console.print(text, markup=False, highlight=False)

    def finished(self, record: BootRecord, wall_s: float) -> None:
        super().finished(record, wall_s)
        if record.no_drafts:  # counted ok (its speed counts), said at once above the table
            self.note(f"boot {record.boot_id} ok but flagged: {record.no_drafts}")

    def _render(self) -> Group:
        s = self.state
        table = Table(title="specab run-ab", title_justify="left")
        for col in ("arm", "ok", "failed", "running"):
            table.add_column(col, justify="left" if col == "arm" else "right")
        for arm in s.arms:
            run = sum(1 for r in s.running.values() if r.arm == arm)
            table.add_row(arm, s.done(arm), str(s.failed.get(arm, 0)), str(run))
        now = time.monotonic()
        current = ", ".join(
            f"{r.arm}#{r.boot}.{r.attempt}@{r.node} {now - r.since:.0f}s"
            for r in s.running.values()
        )
        footer = Text(
            f"elapsed {_fmt_s(now - s.started)}  eta {_fmt_s(s.eta_s())}  slots {s.slots}"
            + (f"\nrunning: {current}" if current else "")
        )
        return Group(table, footer)

    def refresh(self) -> None:
        self._live.update(self._render(), refresh=True)


def make_progress(state: ProgressState, console: Console, *, quiet: bool) -> Progress:
    if quiet or not console.is_terminal:
        return LineProgress(state, console)
    return LiveProgress(state, console)
