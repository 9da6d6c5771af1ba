"""Count checks at load: what a real run can write (vLLM's counter invariants), so bad data
from a hand edit or another tool gets one line naming file, boot, probe and field."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from bench.errors import SpecabError

_FIX = "rerun that boot (delete its files, then --resume) or fix the tool that wrote them"


def _bad(path: Path, row: pd.Series | None, field: str, what: str) -> SpecabError:
    where = "" if row is None else f"boot {row.get('boot_id')}"
    if row is not None and "probe_id" in row:
        where += f" probe {row.get('probe_set')}/{row.get('probe_id')}"
    return SpecabError(f"{where}: {what}".lstrip(": "), file=path, field=field, fix=_FIX)


def check_counts(df: pd.DataFrame, path: Path, cols: Sequence[str], prefix: str) -> None:
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


def check_probes(df: pd.DataFrame, path: Path, k_of: Mapping[str, int]) -> None:
    """Counts a real run can write: non-null, non-negative, K per-position counts that never
    grow with k, A_0 <= drafts and num_accepted_tokens = sum_k A_k (vLLM's counters)."""
    for col in ("boot_id", "probe_set", "probe_id", "accepted_per_pos"):
        if col not in df.columns:
            raise _bad(path, None, f"probes.{col}", "column missing")
    check_counts(df, path, ("num_drafts", "num_accepted_tokens"), "probes")
    lists = df["accepted_per_pos"]
    n = lists.map(lambda x: -1 if x is None else len(x)).to_numpy()
    k = df["boot_id"].map(k_of).fillna(0).to_numpy(dtype=int)
    want = np.where(k > 0, k, n[0] if len(n) else 0)
    # K = 0 (a no-speculation boot): empty lists and no drafts (interim; see issue 14)
    plain = (k == 0) & (n == 0)
    bad = (n != want) | ((n < 1) & ~plain)
    if bad.any():
        i = int(np.argmax(bad))
        got = "missing" if n[i] < 0 else f"of length {n[i]}"
        raise _bad(path, df.iloc[i], "probes.accepted_per_pos", f"{got}, expected {want[i]}")
    if plain.all():
        return
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
