"""Writing a results directory: atomic files, one per boot attempt, the boot row last."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
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
    InFlightBoot,
    Manifest,
    ProbeRecord,
    Results,
    boot_file_stem,
)
from bench.store.appended_results import AppendedResults
from bench.store.atomic_files import atomic_write_bytes, atomic_write_json
from bench.store.parquet_rows import META_KEY as _META_KEY
from bench.store.parquet_rows import load_manifest
from bench.store.writer_claim import CLAIM_FILES, HeldClaim, acquire_claim


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


def _resumed(old: Manifest, new: Manifest, changed: Mapping[str, Any]) -> Manifest:
    """The manifest after a resume that changed what a resume may change: the new spec, arm
    definitions and settings, and the change appended to `resumes` (additive; created_at
    and the specab version that started the directory stay)."""
    body = old.to_json()
    now = new.to_json()
    for key in ("spec", "spec_sha256", "arms", "probe_sets", "baseline", "alpha", "margins"):
        if key in now:
            body[key] = now[key]
    entry = {
        "at": datetime.now(UTC).isoformat(),
        "specab_version": new.specab_version,
        "changed": {k: list(v) if isinstance(v, tuple) else v for k, v in changed.items()},
    }
    body["resumes"] = [*old.resumes, entry]
    return Manifest.model_validate(body)


class ResultsWriter:
    """Writes one experiment's results directory; one file per boot attempt, atomically."""

    def __init__(self, root: Path, claim: HeldClaim | None = None) -> None:
        self.root = Path(root)
        self.claim = claim  # this writer's hold on the directory (`writer_claim`)
        self._held: AppendedResults | None = None
        # the first `results()` (any thread) reads the files while no attempt is written
        self._opening = threading.Lock()

    def results(self) -> Results:
        """Everything in the directory, as `load_results` loads it, from memory: a directory
        this writer created is never read back; one it continues (`--resume`) is read once,
        on the first call; every attempt written since is appended."""
        with self._opening:
            if self._held is None:
                self._held = AppendedResults(self.root)
            held = self._held
        return held.results()

    def note_in_flight(self, boots: list[InFlightBoot]) -> None:
        """The attempts launched and not yet written, into the claim (`specab status`)."""
        if self.claim is not None:
            self.claim.note_in_flight(boots)

    def close(self) -> None:
        """Give up the directory's claim (the end of the run, however it ended)."""
        if self.claim is not None:
            self.claim.release()
            self.claim = None

    @staticmethod
    def check_root(root: Path) -> bool:
        """True when `root` is a results directory (has manifest.json), False when it is new
        or empty; a file, or a non-empty directory without a manifest, is refused."""
        root = Path(root)
        if root.exists() and not root.is_dir():
            raise SpecabError(
                "not a directory",
                file=root,
                field="--results-dir",
                fix="pass a results directory (new, empty, or written by specab)",
            )
        if (root / "manifest.json").exists():
            return True
        if root.is_dir() and any(p.name not in CLAIM_FILES for p in root.iterdir()):
            raise SpecabError(
                "not a specab results directory (no manifest.json) and not empty",
                file=root,
                field="--results-dir",
                fix="choose a new or empty directory",
            )
        return False

    @classmethod
    def create(
        cls,
        root: Path,
        manifest: Manifest,
        *,
        resume: bool = False,
        compare: Callable[[Manifest], Mapping[str, Any]] | None = None,
        claim: str | None = None,
    ) -> ResultsWriter:
        """Create the directory and its manifest, or continue one (`resume`).

        With `claim` (the command, e.g. `run-ab --resume`) the writer first claims the
        directory for this process (`writer_claim`: a second driver is refused in one line)
        and records boots only while it holds it; `close()` releases it.

        On resume the old manifest is checked: by `compare(old)` when given (it raises
        SpecabError to refuse and returns the allowed spec changes, which are then recorded:
        the manifest takes the new spec and lists the change under `resumes`), else the spec
        hashes must be equal."""
        root = Path(root)
        existed = cls.check_root(root)
        held = acquire_claim(root, claim) if claim else None
        try:
            cls._create(root, manifest, resume=resume, compare=compare)
        except BaseException:
            if held is not None:
                held.release()
            raise
        writer = cls(root, held)
        if not existed:  # nothing to read back: every attempt goes to memory as written
            writer._held = AppendedResults(root)
        return writer

    @classmethod
    def _create(
        cls,
        root: Path,
        manifest: Manifest,
        *,
        resume: bool,
        compare: Callable[[Manifest], Mapping[str, Any]] | None,
    ) -> None:
        existing = root / "manifest.json"
        if cls.check_root(root):
            if not resume:
                raise SpecabError(
                    "results directory already exists",
                    file=root,
                    fix="pass --resume to continue it, or --results-dir NEW_DIR for a new one",
                )
            old = load_manifest(root)
            if compare is not None:
                changed = compare(old)
                if changed:
                    atomic_write_json(existing, _resumed(old, manifest, changed).to_json())
            elif old.spec_sha256 != manifest.spec_sha256:
                raise SpecabError(
                    "experiment file changed since this directory was started (spec hash differs)",
                    file=existing,
                    field="spec_sha256",
                    fix="restore the original experiment file, or write to a new results directory",
                )
        else:
            if manifest.schema_version != SCHEMA_VERSION:
                raise ValueError(f"a new manifest has schema_version {SCHEMA_VERSION}")
            root.mkdir(parents=True, exist_ok=True)
            atomic_write_json(existing, manifest.to_json())
        for sub in ("boots", "probes", "logs"):
            (root / sub).mkdir(exist_ok=True)

    def log_path(self, boot_id: str) -> Path:
        return self.root / "logs" / f"{boot_id}.log"

    def write_boot(
        self, record: BootRecord, probes: Sequence[ProbeRecord] | pd.DataFrame = ()
    ) -> None:
        """Persist one boot attempt: probes first, then the boot row (the commit marker);
        under a claim, only while this writer still holds it."""
        if self.claim is not None:
            self.claim.verify()
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
        if record.status != "ok" and table.num_rows:
            raise ValueError("a failed attempt has no probe rows")
        if record.status == "ok" and table.num_rows == 0:
            raise ValueError("an ok boot needs its probe rows")
        with self._opening:
            if record.status == "ok":
                write_parquet_atomic(table, self.root / "probes" / f"{stem}.parquet")
            boot_table = _records_table([record], BOOT_SCHEMA)
            write_parquet_atomic(boot_table, self.root / "boots" / f"{stem}.parquet")
            if self._held is not None:
                self._held.append(stem, boot_table, table if record.status == "ok" else None)
