"""A results directory's files as they lie, read without pandas: the validated manifest, a
folder's Parquet files as Arrow tables, and the check that an arm's ok boots ran one version
(on plain rows). `load` builds its frames on these; `specab status` (`campaign`) reads only
these, so a refresh imports neither pandas nor the statistics."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from bench.errors import SpecabError
from bench.records import Manifest
from bench.store.versions import results_version, upgraded_manifest

META_KEY = b"specab.schema_version"
_VERSIONS = {"definition_sha256": "definitions", "probe_sets_sha256": "probe sets"}
VERSION_COLUMNS = tuple(_VERSIONS)


def load_manifest(root: Path) -> Manifest:
    """manifest.json, validated: the one place a manifest is read from disk."""
    path = Path(root) / "manifest.json"
    if not path.is_file():
        raise SpecabError(
            "no manifest.json here",
            file=root,
            fix="pass a results directory written by specab (results/<experiment>)",
        )
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise SpecabError(
            f"not valid JSON ({exc.msg}, line {exc.lineno})",
            file=path,
            fix="restore the file from the run that wrote it",
        ) from None
    if not isinstance(manifest, dict):
        raise SpecabError("not a JSON object", file=path, fix="restore the file")
    manifest = upgraded_manifest(manifest, path)
    try:
        return Manifest.model_validate(manifest)
    except ValidationError as exc:
        fix = "restore the file from the run that wrote it, or start a new results directory"
        raise SpecabError.invalid(exc, file=path, fix=fix) from None


def read_dir(
    sub: Path,
    columns: Sequence[str] | None = None,
    each: Callable[[pa.Table], pa.Table] | None = None,
) -> list[tuple[Path, pa.Table]]:
    """Every Parquet file of a directory as an Arrow table (only `columns`, where given and
    present; `each`: applied to each table as it is read, so that only its result is held).
    A file without specab's metadata key is accepted (other tools write this contract; the
    manifest's schema_version governs); a key that is present and different is refused.
    One file at a time, no thread pool: a campaign's files are small and many, and opening
    them is what costs (1,000 boot files: 0.8 s against 1.7 s threaded). Each is read whole
    into memory first: opening it through Arrow's file system costs more than reading it
    (1,000 boot files: 0.33 CPU-s, through the file system 0.50)."""
    out = []
    for f in sorted(sub.glob("*.parquet")) if sub.is_dir() else []:
        try:
            pf = pq.ParquetFile(pa.BufferReader(f.read_bytes()))
            schema = pf.schema_arrow
            cols = None if columns is None else [c for c in columns if c in schema.names]
            table = pf.read(columns=cols, use_threads=False)
        except (pa.ArrowInvalid, OSError) as exc:
            raise SpecabError(
                f"unreadable Parquet file ({exc})", file=f, fix="delete it and rerun with --resume"
            ) from None
        version = (schema.metadata or {}).get(META_KEY)
        if version is not None:
            results_version(int(version) if version.isdigit() else version, f)
        out.append((f, table if each is None else each(table)))
    return out


def check_arm_versions(rows: Sequence[Mapping[Any, Any]], path: Path) -> None:
    """The ok boots of one arm ran one definition on one set of probe sets: a directory
    that mixes versions (merged by hand, or written by two runs of a changed arm) is
    refused. Unknown hashes (files from before the columns, other tools) are not compared.
    `rows`: boot rows (arm, status, boot_id and the hash columns, where present)."""
    ok = [r for r in rows if r.get("status", "ok") == "ok"]
    for col, what in _VERSIONS.items():
        by_arm: dict[str, dict[str, list[str]]] = {}
        for r in ok:
            if isinstance(v := r.get(col), str):
                by_arm.setdefault(r["arm"], {}).setdefault(v, []).append(str(r["boot_id"]))
        for arm, versions in by_arm.items():
            if len(versions) < 2:
                continue
            parts = [
                f"{v[:12]}… ({', '.join(ids[:3])}{', …' if len(ids) > 3 else ''})"
                for v, ids in list(versions.items())[:3]
            ]
            raise SpecabError(
                f"the ok boots of arm {arm!r} ran {len(versions)} different {what}: "
                + " vs ".join(parts),
                file=path,
                field=f"boots.{col}",
                fix="keep the boots of one version (delete the others' boots/ and probes/ "
                "files, then --resume) or move them to their own results directory",
            )
