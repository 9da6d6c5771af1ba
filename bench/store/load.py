"""Loading a results directory back: manifest, every boot attempt, the probes of ok boots."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel

from bench import release_freed_memory
from bench.errors import SpecabError
from bench.records import (
    BOOT_SCHEMA,
    PARITY_COLUMNS,
    PROBE_SCHEMA,
    BootRecord,
    Manifest,
    ProbeRecord,
    Results,
    TraceResult,
)
from bench.store.parquet_rows import VERSION_COLUMNS, check_arm_versions, load_manifest, read_dir
from bench.store.validity import check_counts, check_probes

PROBE_REQUIRED = ("boot_id", "probe_set", "probe_id", "accepted_per_pos")


Columns = dict[Path, list[str]]  # each file read, and the columns it has


def _one_frame(
    parts: list[tuple[Path, pa.Table]],
    boot_ids: set[str] | None = None,
    *,
    arrow_lists: bool = False,
) -> tuple[pd.DataFrame | None, Columns]:
    """The tables as one pandas frame, converted once (None: no file), and each file's
    columns. `parts` is emptied: the tables' memory goes as the frame is built.
    `boot_ids`: only their rows, selected before the conversion (10^6 probe rows).
    `arrow_lists`: list columns stay Arrow lists (a probe frame's per-position counts)."""
    columns = {path: t.column_names for path, t in parts}
    if not parts:
        return None, columns
    tables = [prepared(t, arrow_lists) for _, t in parts]
    parts.clear()
    table = pa.concat_tables(tables, promote_options="permissive")
    del tables
    if boot_ids is not None and "boot_id" in table.column_names:
        keep = pc.is_in(table["boot_id"], value_set=pa.array(sorted(boot_ids), pa.string()))
        if not pc.all(keep).as_py():  # a copy only where some rows go
            table = table.filter(keep)
    index = [c for c in table.column_names if c.startswith("__index_level_")]
    table = table.drop_columns(index)
    # read through bench.records.count_lists
    mapper = _arrow_lists if arrow_lists else None
    frame = table.to_pandas(split_blocks=True, self_destruct=True, types_mapper=mapper)
    del table
    pa.default_memory_pool().release_unused()  # the decoded files' pages, before the checks
    return frame, columns


def prepared(t: pa.Table, arrow_lists: bool) -> pa.Table:
    """One file's table as the frame takes it: without its pandas metadata (it differs per
    file), and with `arrow_lists` its count lists narrowed. Idempotent and cheap on a table
    already prepared (a writer keeps its tables so: `AppendedResults`)."""
    if t.schema.metadata:
        t = t.replace_schema_metadata(None)
    return _narrowed(t) if arrow_lists else t


def _narrowed(t: pa.Table) -> pa.Table:
    """Per-position counts as int32 lists: the stored int64 at half the memory (10^6 probe
    rows: 52 MB), read back as the same numbers. A file with a count beyond int32 keeps its
    type (the files are concatenated at the wider one). The scalar counts stay int64: as
    int32 they cost 60 MB more at that scale (the checks and the cells widen them)."""
    schema = t.schema
    for i, f in enumerate(t.schema):
        if f.type == _WIDE:  # by equality: a list's item name (item, element) is not its type
            schema = schema.set(i, f.with_type(pa.list_(pa.int32())))
    try:
        return t if schema == t.schema else t.cast(schema)
    except pa.ArrowInvalid:  # a count beyond int32
        return t


_WIDE = pa.list_(pa.int64())


def _arrow_lists(t: pa.DataType) -> pd.ArrowDtype | None:
    return pd.ArrowDtype(t) if pa.types.is_list(t) else None


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


def _frame(
    whole: pd.DataFrame | None,
    schema: pa.Schema,
    record: type[BaseModel],
    columns: Sequence[str] | None = None,
) -> pd.DataFrame:
    """One frame (of `columns` only, where given). Additive columns a writer (an older
    specab, another tool) left out take the record's default (e.g. `speculative` True,
    `members` 1), else null."""
    if columns is not None:
        schema = pa.schema([f for f in schema if f.name in set(columns)])
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
    return v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v))


COUNTS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")


def _ok_counts(df: pd.DataFrame, path: Path) -> None:
    ok = df[df["status"] == "ok"] if "status" in df.columns else df
    check_counts(ok, path, COUNTS, "boots")


Parts = list[tuple[Path, pa.Table]]  # each file's path and its table, as read or written


def load_boots(root: str | Path) -> pd.DataFrame:
    """Every boot attempt of a results directory, checked as `load_results` checks them."""
    root = Path(root)
    return boots_from_parts(root, read_dir(root / "boots"))


def boots_from_parts(root: Path, parts: Parts) -> pd.DataFrame:
    """The boot rows of `parts` (emptied) as one checked frame."""
    whole, files = _one_frame(parts)
    _checked(files, whole, COUNTS, _ok_counts, root / "boots")
    boots = _frame(whole, BOOT_SCHEMA, BootRecord)
    cols = [c for c in ("arm", "status", "boot_id", *VERSION_COLUMNS) if c in boots.columns]
    check_arm_versions(boots[cols].to_dict("records"), root / "boots")
    return boots


def load_results(root: str | Path, probe_columns: Sequence[str] | None = None) -> Results:
    """Load manifest, every boot attempt and the probes of ok boots. Refuses (SpecabError)
    unreadable or impossible data and an arm whose ok boots ran different versions.
    `probe_columns`: read only these probe columns (what a reader uses: `analyze` on 10^6
    probe rows leaves the output hashes and server timings on disk); the checked ones are
    always read."""
    root = Path(root)
    if not root.is_dir():
        raise SpecabError(
            "results directory not found",
            file=root,
            fix="pass results/<experiment> as written by `specab run-ab` or `specab boot`",
        )
    manifest = load_manifest(root)
    parity = PARITY_COLUMNS if manifest.reference_arms() else ()  # served vs trained, by token
    wanted = (
        None
        if probe_columns is None
        else list(dict.fromkeys([*PROBE_REQUIRED, *COUNTS, *probe_columns, *parity]))
    )
    boots = read_dir(root / "boots")
    probes = read_dir(root / "probes", wanted, partial(prepared, arrow_lists=True))
    return results_from_parts(root, manifest, boots, probes, wanted)


def results_from_parts(
    root: Path,
    manifest: Manifest,
    boot_parts: Parts,
    probe_parts: Parts,
    wanted: Sequence[str] | None = None,
) -> Results:
    """`load_results` on tables already in memory (read from `root`, or just written there:
    `AppendedResults`), checked alike; the lists are emptied."""
    boots = boots_from_parts(root, boot_parts)
    ok_rows = boots[boots["status"] == "ok"]
    ok_ids = set(ok_rows["boot_id"])
    k_of = dict(zip(ok_rows["boot_id"], ok_rows["num_speculative_tokens"].fillna(0), strict=True))
    # orphans (probes of a boot without a row: a crash) are ignored
    ids = {str(b) for b in ok_ids}
    whole, files = _one_frame(probe_parts, ids, arrow_lists=True)

    def of_ok_boots(df: pd.DataFrame, path: Path) -> None:
        if "boot_id" in df.columns and not (mine := df["boot_id"].isin(ok_ids)).all():
            df = df[mine]
        check_probes(df, path, k_of)

    _checked(files, whole, PROBE_REQUIRED, of_ok_boots, root / "probes")
    probes = _frame(whole, PROBE_SCHEMA, ProbeRecord, wanted)
    if len(boots):
        boots = boots.sort_values(["order", "arm", "boot", "attempt"], kind="stable").reset_index(
            drop=True
        )
    pa.default_memory_pool().release_unused()  # the checks' temporaries (10^6 rows: 44 MB)
    release_freed_memory()
    return Results(root=root, manifest=manifest, boots=boots, probes=probes)


def load_traces(root: str | Path) -> list[TraceResult]:
    """The traces `specab trace` wrote under a results directory (`trace/<arm>/trace.json`),
    in arm order; one this specab cannot read is refused, naming it."""
    out = []
    for path in sorted(Path(root).glob("trace/*/trace.json")):
        try:
            out.append(TraceResult.model_validate_json(path.read_text(encoding="utf-8")))
        except ValueError as exc:
            raise SpecabError(
                f"not a trace this specab reads: {str(exc).splitlines()[0]}", file=path,
                fix="trace the arm again (specab trace) or remove that directory",
            ) from None  # fmt: skip
    return out
