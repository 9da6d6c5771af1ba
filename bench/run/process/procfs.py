"""What /proc says about a boot's processes (Linux): process groups, descendants, start
times (a pid is only "the same process" while its start time matches), and log tails."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

LOG_TAIL_LINES = 40


def log_tail(path: Path, lines: int = LOG_TAIL_LINES, *, start: int = 0) -> list[str]:
    """Last `lines` lines of a log file from byte offset `start` (missing file: none)."""
    try:
        with path.open("rb") as fh:
            fh.seek(start)
            data = fh.read()
    except OSError:
        return []
    return data.decode("utf-8", "replace").splitlines()[-lines:]


def proc_stat(pid: int) -> tuple[str, int, int, int] | None:
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
        st = proc_stat(pid)
        if st is not None and st[2] == pgid and st[0] != "Z":
            out.append(pid)
    return out


def descendants(root: int) -> dict[int, int]:
    """{pid: starttime} of every live descendant of `root`, including ones that left the group."""
    children: dict[int, list[tuple[int, int]]] = {}
    for pid in _all_pids():
        st = proc_stat(pid)
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


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def kill_known(known: dict[int, int]) -> None:
    """SIGKILL every remembered pid that is still the same process (start time matches)."""
    for pid, start in known.items():
        st = proc_stat(pid)
        if st is not None and st[3] == start:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
