"""Probe sets (JSONL) and the sequential runner over the OpenAI completions / chat APIs.

One JSON object per line: `id`, exactly one of `prompt` (completions API) or `messages`
(chat API), optional `max_tokens`. Blank lines and lines starting with `#` are skipped.
Every problem is a SpecabError naming the file, the line and the fix.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bench.errors import BootFailed, SpecabError
from bench.spec import Experiment, ProbesSection, resolve_path


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


@dataclass(frozen=True)
class Probe:
    set_name: str
    id: str
    prompt: str | None
    messages: tuple[dict[str, str], ...] | None
    max_tokens: int | None
    line: int


@dataclass(frozen=True)
class ProbeSet:
    name: str  # the file stem; probe rows carry it as `probe_set`
    path: Path
    sha256: str
    probes: tuple[Probe, ...]

    @property
    def count(self) -> int:
        return len(self.probes)


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
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "(line)"
            fix = {
                "missing": "add it",
                "extra_forbidden": "remove it (allowed: id, prompt, messages, max_tokens)",
            }.get(err["type"], "correct the value")
            raise SpecabError(err["msg"], file=f"{path}:{lineno}", field=field, fix=fix) from None
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
        probes.append(Probe(path.stem, line.id, line.prompt, msgs, line.max_tokens, lineno))
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


@dataclass(frozen=True)
class Sampling:
    """Per-request body fields shared by every probe of a boot."""

    max_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    ignore_eos: bool = False
    timeout_s: float = 300.0

    @classmethod
    def from_spec(cls, p: ProbesSection) -> Sampling:
        return cls(
            max_tokens=p.max_tokens,
            temperature=p.temperature,
            top_p=p.top_p,
            seed=p.seed,
            ignore_eos=p.ignore_eos,
            timeout_s=p.request_timeout_s,
        )


@dataclass(frozen=True)
class ProbeResponse:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    spec_decoding: dict[str, Any] | None  # the response's metrics.speculative_decoding

    @property
    def output_sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def request_body(probe: Probe, model: str, sampling: Sampling) -> tuple[str, dict[str, Any]]:
    """(endpoint path, JSON body) for one probe."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": probe.max_tokens or sampling.max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "n": 1,  # per-request spec-decode metrics exist only for single-sequence requests
        "stream": False,
    }
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    if sampling.ignore_eos:
        body["ignore_eos"] = True
    if probe.messages is not None:
        body["messages"] = list(probe.messages)
        return "/v1/chat/completions", body
    body["prompt"] = probe.prompt
    return "/v1/completions", body


def run_probe(client: httpx.Client, probe: Probe, model: str, sampling: Sampling) -> ProbeResponse:
    """One request; BootFailed for anything but a well-formed 200 response."""
    path, body = request_body(probe, model, sampling)
    t0 = time.perf_counter()
    try:
        resp = client.post(path, json=body, timeout=sampling.timeout_s)
    except httpx.HTTPError as exc:
        raise BootFailed(f"probe {probe.set_name}/{probe.id}: request failed: {exc!r}") from None
    latency = time.perf_counter() - t0
    if resp.status_code != 200:
        raise BootFailed(
            f"probe {probe.set_name}/{probe.id}: HTTP {resp.status_code}: "
            + " ".join(resp.text[:300].split())
        )
    try:
        obj = resp.json()
        choice = obj["choices"][0]
        text = choice["message"]["content"] if probe.messages is not None else choice["text"]
        usage = obj["usage"]
        metrics = obj.get("metrics") or {}
        return ProbeResponse(
            text=text or "",
            prompt_tokens=int(usage["prompt_tokens"]),
            completion_tokens=int(usage["completion_tokens"]),
            latency_s=latency,
            spec_decoding=metrics.get("speculative_decoding"),
        )
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise BootFailed(
            f"probe {probe.set_name}/{probe.id}: malformed response ({exc!r})"
        ) from None
