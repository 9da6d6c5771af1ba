"""Probe sets (JSONL): one JSON object per line: `id`, exactly one of `prompt`
(completions API) or `messages` (chat API), optional `max_tokens` and `category`. Blank
lines and lines starting with `#` are skipped. Every problem is a SpecabError naming the
file, the line and the fix.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bench.errors import SpecabError
from bench.experiment.spec import Experiment, resolve_path


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    role: Literal["system", "user", "assistant"] = Field(description="Chat role.")
    content: str = Field(description="Message text.")


class ProbeLine(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(min_length=1, description="Unique id within the set.")
    prompt: str | None = Field(None, min_length=1, description="Text for /v1/completions.")
    messages: list[Message] | None = Field(
        None, min_length=1, description="Messages for /v1/chat/completions."
    )
    max_tokens: int | None = Field(None, ge=1, description="Overrides [probes].max_tokens.")
    category: str | None = Field(
        None,
        min_length=1,
        description="Group for secondary breakdowns (`specab analyze --by category`).",
    )


@dataclass(frozen=True)
class Probe:
    set_name: str
    id: str
    prompt: str | None
    messages: tuple[dict[str, str], ...] | None
    max_tokens: int | None
    line: int
    category: str | None = None


@dataclass(frozen=True)
class ProbeSet:
    name: str  # the file stem; probe rows carry it as `probe_set`
    path: Path
    sha256: str
    probes: tuple[Probe, ...]

    @property
    def count(self) -> int:
        return len(self.probes)


def _line_fix(kind: str) -> str:
    """The fix for a probe line's field, by pydantic's error type."""
    if kind == "missing":
        return "add it"
    if kind == "extra_forbidden":
        return "remove it (allowed: " + ", ".join(ProbeLine.model_fields) + ")"
    return "correct the value"


def _line_error(path: Path, lineno: int, problem: str, fix: str) -> SpecabError:
    return SpecabError(problem, file=f"{path}:{lineno}", fix=fix)


def load_probe_set(path: str | Path) -> ProbeSet:
    """Read and validate one JSONL probe set."""
    path = Path(path)
    if not path.is_file():
        raise SpecabError(
            "probe set not found",
            file=path,
            fix="check the path in [probes].sets (relative "
            "paths are relative to the experiment file)",
        )
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecabError("not UTF-8 text", file=path, fix="save the file as UTF-8") from None
    probes: list[Probe] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise _line_error(
                path,
                lineno,
                f"not valid JSON ({exc.msg}, column {exc.colno})",
                "write one JSON object per line",
            ) from None
        if not isinstance(obj, dict):
            raise _line_error(path, lineno, "not a JSON object", 'write {"id": ..., "prompt": ...}')
        try:
            line = ProbeLine.model_validate(obj)
        except ValidationError as exc:
            raise SpecabError.invalid(
                exc, file=f"{path}:{lineno}", fix=_line_fix, problem=lambda _, msg: msg
            ) from None
        if (line.prompt is None) == (line.messages is None):
            raise _line_error(
                path,
                lineno,
                f"probe {line.id!r} needs exactly one of prompt or messages",
                "give `prompt` (completions API) or `messages` (chat API), not both",
            )
        if line.id in seen:
            raise _line_error(
                path,
                lineno,
                f"duplicate probe id {line.id!r} (first on line {seen[line.id]})",
                "give every probe its own id",
            )
        seen[line.id] = lineno
        msgs = tuple(m.model_dump() for m in line.messages) if line.messages else None
        probes.append(
            Probe(path.stem, line.id, line.prompt, msgs, line.max_tokens, lineno, line.category)
        )
    if not probes:
        raise SpecabError("probe set is empty", file=path, fix="add at least one probe line")
    return ProbeSet(path.stem, path, hashlib.sha256(data).hexdigest(), tuple(probes))


def load_probe_sets(spec: Experiment, spec_file: str | Path) -> list[ProbeSet]:
    """All sets of [probes].sets, resolved against the experiment file; names must differ."""
    sets = [load_probe_set(resolve_path(spec_file, s)) for s in spec.probes.sets]
    names = [s.name for s in sets]
    for i, s in enumerate(sets):
        if names.count(s.name) > 1:
            raise SpecabError(
                f"two probe sets share the name {s.name!r} (sets are named by file stem)",
                file=spec_file,
                field=f"probes.sets[{i}]",
                fix="rename one of the files",
            )
    return sets
