"""Loading a results directory back: manifest, every boot attempt, the probes of ok boots."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ValidationError

from bench.errors import SpecabError
from bench.records import (
    BOOT_SCHEMA,
    PROBE_SCHEMA,
    BootRecord,
    Manifest,
    ProbeRecord,
)
from bench.store.validity import check_arm_versions, check_counts, check_probes
from bench.store.versions import results_version, upgraded_manifest

META_KEY = b"specab.schema_version"
PROBE_REQUIRED = ("boot_id", "probe_set", "probe_id", "accepted_per_pos")


@dataclass(frozen=True)
class Results:
    """A loaded results directory. `probes` holds only probes of boots with status ok."""

    root: Path
    manifest: Manifest
    boots: pd.DataFrame
    probes: pd.DataFrame

    @property
    def experiment(self) -> str:
        return self.manifest.experiment

    def ok_boots(self) -> pd.DataFrame:
        return self.boots[self.boots["status"] == "ok"].reset_index(drop=True)

    def arms(self) -> list[str]:
        """Arms in manifest order (then any extra arm found on disk)."""
        listed = self.manifest.arm_names()
        seen = list(dict.fromkeys(self.boots["arm"].tolist())) if len(self.boots) else []
        return listed + [a for a in seen if a not in listed]


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


def _read_dir(sub: Path, columns: Sequence[str] | None = None) -> list[tuple[Path, pa.Table]]:
    """Every Parquet file of a directory as an Arrow table (only `columns`, where given and
    present). A file without specab's metadata key is accepted (other tools write this
    contract; the manifest's schema_version governs); a key that is present and different
    is refused. One file at a time, no thread pool: a campaign's files are small and many,
    and opening them is what costs (1,000 boot files: 0.8 s against 1.7 s threaded)."""
    out = []
    for f in sorted(sub.glob("*.parquet")) if sub.is_dir() else []:
        try:
            pf = pq.ParquetFile(f)
            have = pf.schema_arrow.names
            cols = None if columns is None else [c for c in columns if c in have]
            table = pf.read(columns=cols, use_threads=False)
        except (pa.ArrowInvalid, OSError) as exc:
            raise SpecabError(
                f"unreadable Parquet file ({exc})", file=f, fix="delete it and rerun with --resume"
            ) from None
        version = (pf.schema_arrow.metadata or {}).get(META_KEY)
        if version is not None:
            results_version(int(version) if version.isdigit() else version, f)
        out.append((f, table))
    return out


Columns = dict[Path, list[str]]  # each file read, and the columns it has


def _one_frame(
    parts: list[tuple[Path, pa.Table]], boot_ids: set[str] | None = None
) -> tuple[pd.DataFrame | None, Columns]:
    """The tables as one pandas frame, converted once (None: no file), and each file's
    columns. `parts` is emptied: the tables' memory goes as the frame is built.
    `boot_ids`: only their rows, selected before the conversion (10^6 probe rows)."""
    columns = {path: t.column_names for path, t in parts}
    if not parts:
        return None, columns
    # Without each file's pandas metadata (it differs per file); an index another tool
    # stored as a column is not data.
    tables = [t.replace_schema_metadata(None) for _, t in parts]
    parts.clear()
    table = pa.concat_tables(tables, promote_options="permissive")
    del tables
    if boot_ids is not None and "boot_id" in table.column_names:
        keep = pc.is_in(table["boot_id"], value_set=pa.array(sorted(boot_ids), pa.string()))
        if not pc.all(keep).as_py():  # a copy only where some rows go
            table = table.filter(keep)
    index = [c for c in table.column_names if c.startswith("__index_level_")]
    table = table.drop_columns(index)
    return table.to_pandas(split_blocks=True, self_destruct=True), columns


def _checked(
    files: Columns,
    whole: pd.DataFrame | None,
    required: Sequence[str],
    check: Callable[[pd.DataFrame, Path], None],
    where: Path,
) -> None:
    """`check` on the whole frame at once; where it fails, or a file lacks a required
    column, file by file (read again), so the error names the file."""
    try:
        if whole is not None and all(c in have for have in files.values() for c in required):
            check(whole, where)
            return
    except SpecabError:
        pass
    for path in files:
        check(pq.read_table(path).to_pandas(), path)
    if whole is not None:
        check(whole, where)  # a failure no single file shows (none known): still refused


def _frame(whole: pd.DataFrame | None, schema: pa.Schema, record: type[BaseModel]) -> pd.DataFrame:
    """One frame. Additive columns a writer (an older specab, another tool) left out take the
    record's default (e.g. `speculative` True, `members` 1), else null."""
    df = schema.empty_table().to_pandas() if whole is None else whole
    if not isinstance(df.index, pd.RangeIndex) or df.index.start != 0 or df.index.step != 1:
        df = df.reset_index(drop=True)
    if absent := [n for n in schema.names if n not in df.columns]:
        df = df.assign(**dict.fromkeys(absent))
    for name, field in record.model_fields.items():
        default = field.default
        if default is None or name not in df.columns or not df[name].isna().any():
            continue
        fill = list(default) if isinstance(default, tuple) else default
        df[name] = [fill if _missing(v) else v for v in df[name]]
    return df


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v))


COUNTS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")
# What `specab status` reads of each boot row (and what the integrity check compares).
STATUS_COLUMNS = (
    "arm", "boot", "attempt", "boot_id", "status", "error", "order", "host", "started_at",
    "finished_at", "definition_sha256", "probe_sets_sha256",
)  # fmt: skip


def _ok_counts(df: pd.DataFrame, path: Path) -> None:
    ok = df[df["status"] == "ok"] if "status" in df.columns else df
    check_counts(ok, path, COUNTS, "boots")


def load_boots(root: str | Path, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Every boot attempt of a results directory, checked as `load_results` checks them,
    without reading a probe. `columns`: only those (`STATUS_COLUMNS` for `specab status`;
    the counts are then not read, nor checked)."""
    root = Path(root)
    whole, files = _one_frame(_read_dir(root / "boots", columns))
    if columns is None:
        _checked(files, whole, COUNTS, _ok_counts, root / "boots")
    boots = _frame(whole, BOOT_SCHEMA, BootRecord)
    if columns is not None:
        boots = boots[[c for c in boots.columns if c in columns]]
    check_arm_versions(boots, root / "boots")
    return boots


def load_results(root: str | Path) -> Results:
    """Load manifest, every boot attempt and the probes of ok boots. Refuses (SpecabError)
    unreadable or impossible data and an arm whose ok boots ran different versions."""
    root = Path(root)
    if not root.is_dir():
        raise SpecabError(
            "results directory not found",
            file=root,
            fix="pass results/<experiment> as written by `specab run-ab` or `specab boot`",
        )
    manifest = load_manifest(root)
    boots = load_boots(root)
    ok_rows = boots[boots["status"] == "ok"]
    ok_ids = set(ok_rows["boot_id"])
    k_of = dict(zip(ok_rows["boot_id"], ok_rows["num_speculative_tokens"].fillna(0), strict=True))
    # orphans (probes of a boot without a row: a crash) are ignored
    whole, files = _one_frame(_read_dir(root / "probes"), {str(b) for b in ok_ids})

    def of_ok_boots(df: pd.DataFrame, path: Path) -> None:
        if "boot_id" in df.columns and not (mine := df["boot_id"].isin(ok_ids)).all():
            df = df[mine]
        check_probes(df, path, k_of)

    _checked(files, whole, PROBE_REQUIRED, of_ok_boots, root / "probes")
    probes = _frame(whole, PROBE_SCHEMA, ProbeRecord)
    if len(boots):
        boots = boots.sort_values(["order", "arm", "boot", "attempt"], kind="stable").reset_index(
            drop=True
        )
    return Results(root=root, manifest=manifest, boots=boots, probes=probes)
