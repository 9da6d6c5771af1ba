"""Lint findings and how they are written: one line each, overlays in TOML as a user types them."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any, Literal

Severity = Literal["warning", "note"]


@dataclass(frozen=True)
class Finding:
    """One known draft/target mismatch in one arm (severity "warning"), or something lint
    could not check there (severity "note", e.g. a hub model that is not cached here)."""

    arm: str
    field: str
    problem: str  # what differs, with the values
    fix: str  # the overlay or setting that would align it
    check: str  # rotary | layer_overflow | speculation_length | vocabulary | unchecked
    severity: Severity = "warning"

    def line(self) -> str:
        return f"{self.arm}: {self.severity}: {self.field}: {self.problem}. Fix: {self.fix}"

    def with_problem(self, problem: str) -> Finding:
        return replace(self, problem=problem)


def text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """Multimodal checkpoints (e.g. Qwen3.5) keep the language model's fields in text_config."""
    tc = cfg.get("text_config")
    return tc if isinstance(tc, dict) else cfg


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_value(v: Any) -> str:
    """A value as an inline TOML literal (what goes inside an experiment file)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if v == v and abs(v) != float("inf") else json.dumps(str(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, dict):
        items = ", ".join(
            f"{k if _BARE_KEY.match(k) else json.dumps(k)} = {toml_value(x)}"
            for k, x in v.items()
            if x is not None  # TOML has no null
        )
        return "{ " + items + " }" if items else "{}"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return json.dumps(str(v))


def overlay(which: str, cfg: dict[str, Any], fields: dict[str, Any]) -> str:
    """`draft_config = { ... }` setting `fields`, nested under text_config when the
    checkpoint keeps its language-model fields there."""
    body: dict[str, Any] = {"text_config": fields} if text_config(cfg) is not cfg else fields
    return f"{which}_config = {toml_value(body)}"


def rope_overlay(which: str, cfg: dict[str, Any], key: str, value: Any) -> str:
    """An overlay setting a rope field where vLLM reads it. At the top level specab writes an
    overlaid rope field to rope_parameters too (docs/arms.md "Config overlays"); inside
    text_config it does not, so the fix names rope_parameters itself."""
    tc = text_config(cfg)
    rp = tc.get("rope_parameters")
    fields: dict[str, Any] = {key: value}
    flat = isinstance(rp, dict) and not any(isinstance(v, dict) for v in rp.values())
    if tc is not cfg and flat:
        fields["rope_parameters"] = {key: value}
    return overlay(which, cfg, fields)


def id_ranges(ids: list[int]) -> str:
    """[43, 44, 45] -> "43-45"; [44, 45] -> "44, 45"; [1, 3, 4, 5] -> "1, 3-5"."""
    parts: list[str] = []
    start = prev = ids[0]
    for i in [*ids[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        if prev - start >= 2:
            parts.append(f"{start}-{prev}")
        else:
            parts.extend(str(x) for x in range(start, prev + 1))
        if i is not None:
            start = prev = i
    return ", ".join(parts)
