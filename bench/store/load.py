"""Loading a results directory back: manifest, every boot attempt, the probes of ok boots."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ValidationError

from bench.errors import SpecabError
from bench.records import (
    BOOT_SCHEMA,
    PROBE_SCHEMA,
    SCHEMA_VERSION,
    BootRecord,
    Manifest,
    ProbeRecord,
)
from bench.store.validity import check_arm_versions, check_counts, check_probes

META_KEY = b"specab.schema_version"


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


def _check_version(found: Any, file: Path) -> None:
    if found != SCHEMA_VERSION:
        raise SpecabError(
            f"schema_version {found!r} is not supported (this specab reads {SCHEMA_VERSION})",
            file=file,
            field="schema_version",
            fix="use the specab release that wrote it, or upgrade specab",
        )


def _where(loc: tuple[int | str, ...]) -> str:
    """arms.0.definition -> arms[0].definition"""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


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
    _check_version(manifest.get("schema_version"), path)
    try:
        return Manifest.model_validate(manifest)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise SpecabError(
            first["msg"].lower(),
            file=path,
            field=_where(first["loc"]),
            fix="restore the file from the run that wrote it, or start a new results directory",
        ) from None


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
        version = (table.schema.metadata or {}).get(META_KEY)
        if version is not None:
            _check_version(int(version) if version.isdigit() else version, f)
        out.append((f, table.to_pandas()))
    return out


def _frame(
    parts: list[tuple[Path, pd.DataFrame]], schema: pa.Schema, record: type[BaseModel]
) -> pd.DataFrame:
    """One frame. Additive columns a writer (an older specab, another tool) left out take the
    record's default (e.g. `speculative` True, `members` 1), else null."""
    frames = [d for _, d in parts]
    df = pd.concat(frames, ignore_index=True) if frames else schema.empty_table().to_pandas()
    df = df.assign(**{n: None for n in schema.names if n not in df.columns})
    for name, field in record.model_fields.items():
        default = field.default
        if default is None or name not in df.columns or not df[name].isna().any():
            continue
        fill = list(default) if isinstance(default, tuple) else default
        df[name] = [fill if _missing(v) else v for v in df[name]]
    return df


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v))


def load_boots(root: str | Path) -> pd.DataFrame:
    """Every boot attempt of a results directory, checked as `load_results` checks them,
    without reading a probe (`specab status` reads only these)."""
    root = Path(root)
    boot_parts = _read_dir(root / "boots")
    for path, df in boot_parts:
        ok = df[df["status"] == "ok"] if "status" in df.columns else df
        check_counts(ok, path, ("num_drafts", "num_draft_tokens", "num_accepted_tokens"), "boots")
    boots = _frame(boot_parts, BOOT_SCHEMA, BootRecord)
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
    probe_parts = []
    for path, df in _read_dir(root / "probes"):
        df = df[df["boot_id"].isin(ok_ids)] if "boot_id" in df.columns else df
        check_probes(df, path, k_of)  # orphans (no boot row: a crash) are ignored
        probe_parts.append((path, df))
    probes = _frame(probe_parts, PROBE_SCHEMA, ProbeRecord).reset_index(drop=True)
    if len(boots):
        boots = boots.sort_values(["order", "arm", "boot", "attempt"], kind="stable").reset_index(
            drop=True
        )
    return Results(root=root, manifest=manifest, boots=boots, probes=probes)
