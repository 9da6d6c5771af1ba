"""A failed boot's reason in one line, naming the root cause from the server's log: the HTTP
envelope of a failed request says nothing of it."""

from __future__ import annotations

import re
from pathlib import Path

from bench.records import FailedPhase
from bench.run.boot.probe_loop import NO_DRAFTS
from bench.run.boot.requests import API_KEY_REFUSED
from bench.run.process import CAUSE_LINES, log_tail, root_cause


def one_line(text: str, limit: int = 500) -> str:
    """First line of a multi-line reason (the log tail stays in the log file)."""
    first = text.strip().splitlines()[0] if text.strip() else "unknown error"
    return " ".join(first.split())[:limit]


def with_root_cause(reason: str, phase: FailedPhase | None, log_file: Path) -> str:
    """A request that failed names the server's own exception from its log first: the HTTP
    500 envelope ("EngineCore encountered an issue. See stack trace ...") says nothing. A
    boot that drafted nothing quotes what the server said of speculation."""
    if reason.startswith(NO_DRAFTS):
        said = speculation_said(log_file)
        return f"{reason} (server log: {said})" if said else reason
    if phase not in ("first_request", "probes") or reason.startswith(API_KEY_REFUSED):
        return reason  # start-up failures carry it already; the rest are specab's checks
    cause = root_cause(log_tail(log_file, CAUSE_LINES))
    if cause is None or cause in reason:
        return reason
    where = "the first request" if phase == "first_request" else "a probe"
    return f"server error at {where}: {cause} ({one_line(reason, 300)})"


_SPEC_CONFIG = re.compile(r"speculative_config=(None|\w+\([^)]*\))")
_SPEC_WORDS = re.compile(r"(WARNING|ERROR).*(speculat|draft|proposer)", re.IGNORECASE)


def speculation_said(log_file: Path) -> str | None:
    """The engine's speculative config and its warnings about speculation, in one line (the
    last three distinct), from the server's log; specab's own lines left out."""
    said: list[str] = []
    for line in log_tail(log_file, 2000):
        if line.startswith("[specab]"):
            continue
        if m := _SPEC_CONFIG.search(line):
            said.append(f"engine speculative_config={m.group(1)[:200]}")
        elif _SPEC_WORDS.search(line):
            said.append(line.split("] ", 1)[-1].strip()[:200])
    return "; ".join(list(dict.fromkeys(said))[-3:]) or None
