"""One error family for user mistakes; the CLI catches it once and prints one line (exit 2)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


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

    @classmethod
    def invalid(
        cls,
        exc: ValidationError,
        *,
        file: str | Path | None,
        fix: str | Callable[[str], str],
        problem: Callable[[str, str], str] | None = None,
        field: str | None = None,
    ) -> SpecabError:
        """The first problem pydantic found, as one line: its message (or `problem(path,
        message)`), the field path (`arms[0].definition`, or `field`) and the fix (or
        `fix(error type)`)."""
        first = exc.errors()[0]
        path = field_path(tuple(first["loc"]))
        msg = str(first["msg"])
        return cls(
            problem(path, msg) if problem else msg.lower(),
            file=file,
            field=field or path or None,
            fix=fix(str(first["type"])) if callable(fix) else fix,
        )


def field_path(loc: tuple[int | str, ...]) -> str:
    """A pydantic location as a field path: ("arms", 0, "definition") -> arms[0].definition."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class BootFailed(Exception):
    """A boot attempt failed for a runtime reason (crash, timeout, invalid counters).

    Not a user error: it is recorded as a failed attempt and retried by the orchestrator.
    """

    def __init__(self, reason: str, *, log_path: str | None = None) -> None:
        self.reason = reason
        self.log_path = log_path
        super().__init__(reason)
