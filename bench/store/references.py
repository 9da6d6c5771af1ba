"""Trusted references for `specab gate`: one versioned JSON file per reference (a
`bench.records.Reference`), written atomically with when, where and by which specab it was
saved, and validated on load."""

from __future__ import annotations

import json
import platform
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from bench import __version__
from bench.errors import SpecabError
from bench.records import REFERENCE_VERSION, Machine, Reference, ReferenceArm
from bench.store.atomic_files import atomic_write_json
from bench.store.versions import upgraded_reference

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def reference_path(store: Path, name: str) -> Path:
    if not _NAME.match(name):
        raise SpecabError(
            f"{name!r} is not a reference name", field="NAME", fix="use letters, digits, . _ -"
        )
    return store / f"{name}.json"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def save_reference(
    store: Path,
    name: str,
    arms: Mapping[str, ReferenceArm],
    *,
    experiment: str,
    source: Path,
    replace: bool,
) -> tuple[Reference, Path]:
    """Store `arms` as reference NAME (refused when it exists, unless `replace`)."""
    path = reference_path(store, name)
    if path.exists() and not replace:
        raise SpecabError("reference exists", file=path, fix="pick another NAME or pass --replace")
    reference = Reference(
        reference_version=REFERENCE_VERSION,
        name=name,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        specab_version=__version__,
        experiment=experiment,
        source=str(source),
        machine=Machine(cpu=_cpu_model(), platform=platform.platform()),
        arms=dict(arms),
    )
    store.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, reference.model_dump(mode="json"))
    return reference, path


def load_reference(store: Path, name: str) -> Reference:
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
    if not isinstance(body, dict):
        raise SpecabError(
            "not a reference file (not a JSON object)", file=path, fix="save it again"
        )
    body = upgraded_reference(body, path)
    try:
        return Reference.model_validate(body)
    except ValidationError as exc:
        fix = "save the reference again (`specab reference save DIR NAME --replace`)"
        raise SpecabError.invalid(exc, file=path, fix=fix) from None
