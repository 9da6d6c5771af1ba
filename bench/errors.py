"""One error family for user mistakes; the CLI catches it once and prints one line (exit 2)."""

from __future__ import annotations

from pathlib import Path


class SpecabError(Exception):
    """A user error: bad input file, field or option. Printed as one line, exit code 2.

    The message names the file, the field path and the fix, e.g.
    ``arms/x.toml: experiment.boots_per_arm: must be >= 1. Fix: set boots_per_arm = 2 or more``.
    """

    def __init__(
        self,
        problem: str,
        *,
        file: str | Path | None = None,
        field: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.problem = problem
        self.file = str(file) if file is not None else None
        self.field = field
        self.fix = fix
        super().__init__(self.one_line())

    def one_line(self) -> str:
        parts = []
        if self.file:
            parts.append(self.file)
        if self.field:
            parts.append(self.field)
        parts.append(self.problem.rstrip("."))
        text = ": ".join(parts)
        if self.fix:
            text += f". Fix: {self.fix}"
        return " ".join(text.split())  # one line, always


class BootFailed(Exception):
    """A boot attempt failed for a runtime reason (crash, timeout, invalid counters).

    Not a user error: it is recorded as a failed attempt and retried by the orchestrator.
    """

    def __init__(self, reason: str, *, log_path: str | None = None) -> None:
        self.reason = reason
        self.log_path = log_path
        super().__init__(reason)
