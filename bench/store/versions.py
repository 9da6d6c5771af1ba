"""Every version of a stored document this specab reads, and how each becomes today's: a
results directory (`schema_version` in manifest.json and in each Parquet file's metadata)
and a gate reference (`reference_version`). A reference is meant to outlive releases, so a
later schema adds an upgrade here (an older document's dict -> the next version's) instead
of refusing what an older specab wrote; only a version newer than this specab is refused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.errors import SpecabError
from bench.records import REFERENCE_VERSION, SCHEMA_VERSION

Upgrade = Callable[[dict[str, Any]], dict[str, Any]]


def _same(doc: dict[str, Any]) -> dict[str, Any]:
    return doc


# version -> the upgrade that turns a document of that version into the next one (the
# current version's entry is the identity). Schema 1 is the first and current version.
RESULTS_READERS: dict[int, Upgrade] = {1: _same}
REFERENCE_READERS: dict[int, Upgrade] = {1: _same}


def readable(found: Any, readers: dict[int, Upgrade], current: int, file: Path, key: str) -> int:
    """The version `found`, if this specab reads it; else SpecabError naming the file."""
    if isinstance(found, int) and not isinstance(found, bool) and found in readers:
        return found
    newer = isinstance(found, int) and found > current
    raise SpecabError(
        f"{key} {found!r} is not one this specab reads (it reads "
        f"{', '.join(map(str, sorted(readers)))})",
        file=file,
        field=key,
        fix="upgrade specab (a newer release wrote it)"
        if newer
        else "use the specab release that wrote it",
    )


def upgraded(
    doc: dict[str, Any], readers: dict[int, Upgrade], current: int, file: Path, key: str
) -> dict[str, Any]:
    """`doc` carried from its version to `current` through each upgrade in turn."""
    version = readable(doc.get(key), readers, current, file, key)
    while version < current:
        doc = readers[version](doc)
        version += 1
        doc[key] = version
    return doc


def results_version(found: Any, file: Path) -> int:
    return readable(found, RESULTS_READERS, SCHEMA_VERSION, file, "schema_version")


def upgraded_manifest(doc: dict[str, Any], file: Path) -> dict[str, Any]:
    return upgraded(doc, RESULTS_READERS, SCHEMA_VERSION, file, "schema_version")


def upgraded_reference(doc: dict[str, Any], file: Path) -> dict[str, Any]:
    return upgraded(doc, REFERENCE_READERS, REFERENCE_VERSION, file, "reference_version")
