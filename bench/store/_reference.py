"""Trusted references for `specab gate`: one versioned JSON file per reference, holding a
run's per-boot values and what they were measured on (written atomically, checked on load).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bench.errors import SpecabError
from bench.store._write import atomic_write_json

REFERENCE_VERSION = 1
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def reference_path(store: Path, name: str) -> Path:
    if not _NAME.match(name):
        raise SpecabError(
            f"{name!r} is not a reference name", field="NAME", fix="use letters, digits, . _ -"
        )
    return store / f"{name}.json"


def save_reference(store: Path, name: str, body: dict[str, Any], *, replace: bool) -> Path:
    path = reference_path(store, name)
    if path.exists() and not replace:
        raise SpecabError("reference exists", file=path, fix="pick another NAME or pass --replace")
    store.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"reference_version": REFERENCE_VERSION, "name": name, **body})
    return path


def load_reference(store: Path, name: str) -> dict[str, Any]:
    path = reference_path(store, name)
    if not path.is_file():
        known = sorted(p.stem for p in store.glob("*.json")) if store.is_dir() else []
        raise SpecabError(
            "reference not found",
            file=path,
            fix=f"save one with `specab reference save DIR {name}`"
            + (f", or use one of: {', '.join(known)}" if known else ""),
        )
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SpecabError(f"not a reference file ({exc})", file=path, fix="save it again") from None
    if not isinstance(body, dict) or body.get("reference_version") != REFERENCE_VERSION:
        raise SpecabError(
            f"reference_version {body.get('reference_version') if isinstance(body, dict) else '?'}"
            f" is not {REFERENCE_VERSION}",
            file=path,
            field="reference_version",
            fix="save the reference again with this specab",
        )
    return body
