"""What each side resolved for the fields that decide a drafter's geometry (rotary dim and
style, rope theta, aux layer ids, norms and their eps, the mask token, causality, the vocab
mapping): the engine's as the capture read it off the served modules (`engine.json`), the
reference's as its name map reads it off the reference module (`reference.json`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from bench.records import ConfigField


def flatten(resolved: Mapping[str, Any]) -> dict[str, Any]:
    """`engine.json`'s per-layer list as layers.I.FIELD keys; the rest as they are."""
    out = {k: v for k, v in resolved.items() if k != "layers"}
    for i, layer in enumerate(resolved.get("layers") or []):
        out.update({f"layers.{i}.{k}": v for k, v in layer.items()})
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)
    return bool(a == b)


def config_fields(engine: Mapping[str, Any], reference: Mapping[str, Any]) -> list[ConfigField]:
    """Every field either side resolved, the engine's order first; differs where both are
    known and unequal."""
    mine = flatten(engine)
    keys = [*mine, *(k for k in reference if k not in mine)]
    out = []
    for key in keys:
        e, r = mine.get(key), reference.get(key)
        out.append(
            ConfigField(field=key, engine=e, reference=r,
                        differs=e is not None and r is not None and not _same(e, r))
        )  # fmt: skip
    return out


def config_said(fields: list[ConfigField]) -> list[str]:
    """One sentence per field that differs, e.g. "served layers.0.rotary_dim 16 of 64;
    reference 64 of 64" (a rotary dim out of its layer's head dim)."""
    by = {f.field: f for f in fields}
    said = []
    for f in (f for f in fields if f.differs):
        head = (
            by.get(f.field.replace("rotary_dim", "head_dim")) if "rotary_dim" in f.field else None
        )
        mine, theirs = ("", "") if head is None else (f" of {head.engine}", f" of {head.reference}")
        said.append(f"served {f.field} {f.engine}{mine}; reference {f.reference}{theirs}")
    return said
