"""Waiting in tests: poll a condition until it holds or a deadline passes (never a fixed
sleep standing in for "long enough"), and whether a process still runs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (an exited child nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def wait_until(
    cond: Callable[[], object],
    timeout_s: float,
    what: str | Callable[[], str] = "the condition",
    *,
    poll_s: float = 0.2,
) -> float:
    """Seconds until `cond()` held; AssertionError naming `what` (a callable: evaluated
    only then, e.g. a log's tail) once `timeout_s` passed."""
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout_s:
            raise AssertionError(
                f"timed out after {timeout_s:g} s waiting for: {what() if callable(what) else what}"
            )
        time.sleep(poll_s)
    return time.monotonic() - t0


def still_alive(pids: Iterable[int], timeout_s: float) -> list[int]:
    """The `pids` still alive once they all died or `timeout_s` passed (empty: all gone)."""
    pids = list(pids)
    deadline = time.monotonic() + timeout_s
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left
