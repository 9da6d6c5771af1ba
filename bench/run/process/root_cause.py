"""The root cause of a failed server, read from its log.

A vLLM server that fails answers with an envelope ("EngineCore encountered an issue. See
stack trace (above) for the root cause.", "Engine core initialization failed. See root cause
above."): the cause is the exception line of the engine's traceback in the log. This finds
that line so that a failed boot's one-line error names it, at start-up and at a probe alike.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# An exception line as Python prints it, possibly behind vLLM's log prefix
# ("(EngineCore pid=1) ERROR 12-01 10:00:00 [core.py:1] RuntimeError: ..."): a dotted class
# name ending in Error/Exception/..., at the line's start or after whitespace or "]",
# followed by ": message" or nothing. Source lines of a traceback ("raise X(...)") do not match.
_EXCEPTION = re.compile(
    r"(?:^|[\s\]])((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure))"
    r"(?::\s?(.*?))?\s*$"
)
# Wrappers that point elsewhere for the cause, and exits that are consequences.
_WRAPPER_NAMES = frozenset(
    {"EngineDeadError", "EngineGenerateError", "CancelledError", "KeyboardInterrupt", "SystemExit"}
)
_PYDANTIC = re.compile(r"\d+ validation errors? for \w+\s*$")
_PYDANTIC_TYPE = re.compile(r"\s*\[type=.*$")  # pydantic's error code and input echo
_WRAPPER_TEXT = re.compile(r"root cause|stack trace|see (?:the )?(?:log|above)", re.IGNORECASE)


def exception_line(line: str) -> str | None:
    """`Name: message` when the line is a Python exception line, else None."""
    m = _EXCEPTION.search(line)
    if m is None:
        return None
    name, message = m.group(1), (m.group(2) or "").strip()
    return f"{name}: {message}" if message else name


def _is_wrapper(cause: str) -> bool:
    name = cause.split(":", 1)[0].rsplit(".", 1)[-1]
    return name in _WRAPPER_NAMES or bool(_WRAPPER_TEXT.search(cause))


def _cause_at(lines: Sequence[str]) -> int | None:
    """Index of the root-cause line: the last exception line that is not a wrapper, else
    the last wrapper; None when the log names no exception."""
    fallback = None
    for i in range(len(lines) - 1, -1, -1):
        cause = exception_line(lines[i])
        if cause is None:
            continue
        if not _is_wrapper(cause):
            return i
        fallback = i if fallback is None else fallback
    return fallback


def root_cause(lines: Sequence[str]) -> str | None:
    """The last exception line that is not a wrapper pointing elsewhere (the engine's own
    error, not the API server's envelope around it); None when the log names none. A
    pydantic error keeps its first field and message, which Python prints on the next lines
    ("1 validation error for SpeculativeConfig" alone names no field)."""
    at = _cause_at(lines)
    if at is None:
        return None
    cause = exception_line(lines[at])
    if cause is not None and _PYDANTIC.search(cause):
        detail = [_PYDANTIC_TYPE.sub("", x).strip() for x in lines[at + 1 : at + 3]]
        cause = ": ".join([cause, *(d for d in detail if d)])
    return cause


def cause_context(lines: Sequence[str], n: int) -> list[str]:
    """The `n` log lines that end at the root cause (its traceback), else the last `n`."""
    at = _cause_at(lines)
    end = len(lines) if at is None else at + 1
    return list(lines[max(0, end - n) : end])


def summarize_tail(tail: Sequence[str]) -> str:
    """The most telling single log line: the root-cause exception, else the last line naming
    an error, else the last line."""
    cause = root_cause(tail)
    if cause is not None:
        return cause
    for line in reversed(tail):
        low = line.lower()
        if "error" in low or "exception" in low:
            return line.strip()
    return tail[-1].strip() if tail else "(empty log)"
