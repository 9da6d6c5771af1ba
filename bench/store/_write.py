"""Writing a results directory: atomic files, one per boot attempt, the boot row last."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bench.errors import SpecabError
from bench.records import (
    BOOT_SCHEMA,
    PROBE_OPTIONAL,
    PROBE_SCHEMA,
    SCHEMA_VERSION,
    BootRecord,
    ProbeRecord,
    boot_file_stem,
)
from bench.store._load import META_KEY as _META_KEY
from bench.store._load import load_manifest


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write via a temp file in the same directory and rename, so readers never see half.

    The temp file is created with mode 0666 so the process umask applies as for any file
    (mkstemp's 0600 would make shared results unreadable to the team)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(
        path, (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode()
    )


def _with_version(table: pa.Table) -> pa.Table:
    meta = dict(table.schema.metadata or {})
    meta[_META_KEY] = str(SCHEMA_VERSION).encode()
    return table.replace_schema_metadata(meta)


def _records_table(
    records: Sequence[BootRecord] | Sequence[ProbeRecord], schema: pa.Schema
) -> pa.Table:
    rows = [r.model_dump() for r in records]
    return _with_version(pa.Table.from_pylist(rows, schema=schema))


def _frame_table(df: pd.DataFrame) -> pa.Table:
    """Probe rows given as a frame (simulation, bulk writers): the contract columns, in order;
    optional additive columns may be left out (stored as null)."""
    missing = [c for c in PROBE_SCHEMA.names if c not in df.columns]
    extra = [c for c in df.columns if c not in PROBE_SCHEMA.names]
    if extra or set(missing) - set(PROBE_OPTIONAL):
        raise ValueError(f"probe frame columns differ from PROBE_SCHEMA: {missing=} {extra=}")
    full = df.assign(**dict.fromkeys(missing, None))[PROBE_SCHEMA.names]
    return _with_version(pa.Table.from_pandas(full, schema=PROBE_SCHEMA, preserve_index=False))


def write_parquet_atomic(table: pa.Table, path: Path) -> None:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    atomic_write_bytes(path, sink.getvalue().to_pybytes())


class ResultsWriter:
    """Writes one experiment's results directory; one file per boot attempt, atomically."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @classmethod
    def create(
        cls, root: Path, manifest: Mapping[str, Any], *, resume: bool = False
    ) -> ResultsWriter:
        """Create the directory and manifest; on resume the spec hash must match."""
        root = Path(root)
        existing = root / "manifest.json"
        if existing.exists():
            if not resume:
                raise SpecabError(
                    "results directory already exists",
                    file=root,
                    fix="pass --resume to continue it, or --results-dir/--name for a new one",
                )
            old = load_manifest(root)
            if old.get("spec_sha256") != manifest.get("spec_sha256"):
                raise SpecabError(
                    "experiment file changed since this directory was started (spec hash differs)",
                    file=existing,
                    field="spec_sha256",
                    fix="restore the original experiment file, or write to a new results directory",
                )
        else:
            if resume and root.exists() and any(root.iterdir()):
                raise SpecabError(
                    "not a specab results directory (no manifest.json)",
                    file=root,
                    fix="choose an empty or new directory",
                )
            root.mkdir(parents=True, exist_ok=True)
            body = dict(manifest)
            body["schema_version"] = SCHEMA_VERSION
            atomic_write_json(existing, body)
        for sub in ("boots", "probes", "logs"):
            (root / sub).mkdir(exist_ok=True)
        return cls(root)

    def log_path(self, boot_id: str) -> Path:
        return self.root / "logs" / f"{boot_id}.log"

    def write_boot(
        self, record: BootRecord, probes: Sequence[ProbeRecord] | pd.DataFrame = ()
    ) -> None:
        """Persist one boot attempt: probes first, then the boot row (the commit marker)."""
        stem = boot_file_stem(record.arm, record.boot, record.attempt)
        if stem != record.boot_id:
            raise ValueError(f"boot_id {record.boot_id!r} is not the attempt's stem {stem!r}")
        if isinstance(probes, pd.DataFrame):
            table = _frame_table(probes)
            ids = set(probes["boot_id"])
        else:
            table = _records_table(probes, PROBE_SCHEMA)
            ids = {p.boot_id for p in probes}
        if ids - {record.boot_id}:
            raise ValueError(f"probe rows of {sorted(ids - {record.boot_id})} under {stem}")
        if record.status == "ok":
            if table.num_rows == 0:
                raise ValueError("an ok boot needs its probe rows")
            write_parquet_atomic(table, self.root / "probes" / f"{stem}.parquet")
        elif table.num_rows:
            raise ValueError("a failed attempt has no probe rows")
        boot_table = _records_table([record], BOOT_SCHEMA)
        write_parquet_atomic(boot_table, self.root / "boots" / f"{stem}.parquet")
