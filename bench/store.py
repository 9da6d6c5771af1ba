"""The results directory (schema_version 1): writing it atomically and loading it back.

Layout (see results/README.md, DESIGN.md "Results contract"):
    results/<experiment>/manifest.json
    results/<experiment>/boots/<arm>__b<boot>__a<attempt>.parquet   one row per boot attempt
    results/<experiment>/probes/<arm>__b<boot>__a<attempt>.parquet  one row per measured probe
    results/<experiment>/logs/<boot_id>.log
A boot's probe file is written before its boot row; the boot row is the commit marker, so a
crash between the two leaves an orphan probe file that loading ignores.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bench.errors import SpecabError
from bench.records import (
    BOOT_SCHEMA,
    PROBE_SCHEMA,
    SCHEMA_VERSION,
    BootRecord,
    ProbeRecord,
    boot_file_stem,
)

_META_KEY = b"specab.schema_version"


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
    """Probe rows given as a frame (simulation, bulk writers): exactly the contract columns."""
    if list(df.columns) != PROBE_SCHEMA.names:
        missing = [c for c in PROBE_SCHEMA.names if c not in df.columns]
        extra = [c for c in df.columns if c not in PROBE_SCHEMA.names]
        raise ValueError(f"probe frame columns differ from PROBE_SCHEMA: {missing=} {extra=}")
    return _with_version(pa.Table.from_pandas(df, schema=PROBE_SCHEMA, preserve_index=False))


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


@dataclass(frozen=True)
class Results:
    """A loaded results directory. `probes` holds only probes of boots with status ok."""

    root: Path
    manifest: dict[str, Any]
    boots: pd.DataFrame
    probes: pd.DataFrame

    @property
    def experiment(self) -> str:
        return str(self.manifest.get("experiment", self.root.name))

    def ok_boots(self) -> pd.DataFrame:
        return self.boots[self.boots["status"] == "ok"].reset_index(drop=True)

    def arms(self) -> list[str]:
        """Arms in manifest order (then any extra arm found on disk)."""
        listed = [a["name"] for a in self.manifest.get("arms", []) if "name" in a]
        seen = list(dict.fromkeys(self.boots["arm"].tolist())) if len(self.boots) else []
        return listed + [a for a in seen if a not in listed]


def _check_version(found: Any, file: Path) -> None:
    if found != SCHEMA_VERSION:
        raise SpecabError(
            f"schema_version {found!r} is not supported (this specab reads {SCHEMA_VERSION})",
            file=file,
            field="schema_version",
            fix="use the specab release that wrote it, or upgrade specab",
        )


def load_manifest(root: Path) -> dict[str, Any]:
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
    _check_version(manifest.get("schema_version"), path)
    return manifest


def _read_dir(sub: Path) -> list[tuple[Path, pd.DataFrame]]:
    """Every Parquet file of a directory. A file without specab's metadata key is accepted
    (other tools write this contract; the manifest's schema_version governs); a key that is
    present and different is refused."""
    out = []
    for f in sorted(sub.glob("*.parquet")) if sub.is_dir() else []:
        try:
            table = pq.read_table(f)
        except (pa.ArrowInvalid, OSError) as exc:
            raise SpecabError(
                f"unreadable Parquet file ({exc})", file=f, fix="delete it and rerun with --resume"
            ) from None
        version = (table.schema.metadata or {}).get(_META_KEY)
        if version is not None:
            _check_version(int(version) if version.isdigit() else version, f)
        out.append((f, table.to_pandas()))
    return out


def _frame(parts: list[tuple[Path, pd.DataFrame]], schema: pa.Schema) -> pd.DataFrame:
    """One frame; columns of the schema a writer left out (additive ones) become nulls."""
    frames = [d for _, d in parts]
    df = pd.concat(frames, ignore_index=True) if frames else schema.empty_table().to_pandas()
    return df.assign(**{n: None for n in schema.names if n not in df.columns})


_FIX = "rerun that boot (delete its files, then --resume) or fix the tool that wrote them"


def _bad(path: Path, row: pd.Series | None, field: str, what: str) -> SpecabError:
    where = "" if row is None else f"boot {row.get('boot_id')}"
    if row is not None and "probe_id" in row:
        where += f" probe {row.get('probe_set')}/{row.get('probe_id')}"
    return SpecabError(f"{where}: {what}".lstrip(": "), file=path, field=field, fix=_FIX)


def _counts(df: pd.DataFrame, path: Path, cols: Sequence[str], prefix: str) -> None:
    for col in cols:
        if col not in df.columns:
            raise _bad(path, None, f"{prefix}.{col}", "column missing")
        v = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype="float64")
        bad = ~np.isfinite(v) | (v < 0)
        if bad.any():
            i = int(np.argmax(bad))
            val = df[col].iloc[i]
            shown = "null" if pd.isna(val) else f"{val:g}" if isinstance(val, float) else str(val)
            raise _bad(path, df.iloc[i], f"{prefix}.{col}", f"{shown} is not a count")


def _check_probes(df: pd.DataFrame, path: Path, k_of: Mapping[str, int]) -> None:
    """Counts a real run can write: non-null, non-negative, K per-position counts that never
    grow with k, A_0 <= drafts and num_accepted_tokens = sum_k A_k (vLLM's counters)."""
    for col in ("boot_id", "probe_set", "probe_id", "accepted_per_pos"):
        if col not in df.columns:
            raise _bad(path, None, f"probes.{col}", "column missing")
    _counts(df, path, ("num_drafts", "num_accepted_tokens"), "probes")
    lists = df["accepted_per_pos"]
    n = lists.map(lambda x: -1 if x is None else len(x)).to_numpy()
    want = df["boot_id"].map(k_of).fillna(0).to_numpy(dtype=int)
    want = np.where(want > 0, want, n[0] if len(n) else 0)
    bad = (n != want) | (n < 1)
    if bad.any():
        i = int(np.argmax(bad))
        got = "missing" if n[i] < 0 else f"of length {n[i]}"
        raise _bad(path, df.iloc[i], "probes.accepted_per_pos", f"{got}, expected {want[i]}")
    a = np.stack([np.asarray(x, dtype="float64") for x in lists]) if len(df) else np.zeros((0, 1))
    d = df["num_drafts"].to_numpy(dtype="float64")
    checks = (
        (~np.isfinite(a) | (a < 0)).any(axis=1),
        a[:, 0] > d,
        (np.diff(a, axis=1) > 0).any(axis=1),
        a.sum(axis=1) != df["num_accepted_tokens"].to_numpy(dtype="float64"),
    )
    whats = ("holds a null or negative count", "A_0 exceeds num_drafts", "A_k exceeds A_(k-1)")
    for bad, what in zip(checks, (*whats, "sum differs from num_accepted_tokens"), strict=True):
        if bad.any():
            i = int(np.argmax(bad))
            shown = "[" + ", ".join(f"{x:g}" for x in a[i]) + "]"
            raise _bad(path, df.iloc[i], "probes.accepted_per_pos", f"{shown}: {what}")


def load_results(root: str | Path) -> Results:
    """Load manifest, every boot attempt and the probes of ok boots."""
    root = Path(root)
    if not root.is_dir():
        raise SpecabError(
            "results directory not found",
            file=root,
            fix="pass results/<experiment> as written by `specab run-ab` or `specab boot`",
        )
    manifest = load_manifest(root)
    boot_parts = _read_dir(root / "boots")
    for path, df in boot_parts:
        ok = df[df["status"] == "ok"] if "status" in df.columns else df
        _counts(ok, path, ("num_drafts", "num_draft_tokens", "num_accepted_tokens"), "boots")
    boots = _frame(boot_parts, BOOT_SCHEMA)
    ok_rows = boots[boots["status"] == "ok"]
    ok_ids = set(ok_rows["boot_id"])
    k_of = dict(zip(ok_rows["boot_id"], ok_rows["num_speculative_tokens"].fillna(0), strict=True))
    probe_parts = []
    for path, df in _read_dir(root / "probes"):
        df = df[df["boot_id"].isin(ok_ids)] if "boot_id" in df.columns else df
        _check_probes(df, path, k_of)  # orphans (no boot row: a crash) are ignored
        probe_parts.append((path, df))
    probes = _frame(probe_parts, PROBE_SCHEMA).reset_index(drop=True)
    if len(boots):
        boots = boots.sort_values(["order", "arm", "boot", "attempt"], kind="stable").reset_index(
            drop=True
        )
    return Results(root=root, manifest=manifest, boots=boots, probes=probes)
