"""Count checks at load: what a real run can write (vLLM's counter invariants), so bad data
from a hand edit or another tool gets one line naming file, boot, probe and field."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from bench.errors import SpecabError
from bench.records import list_lengths, list_matrix

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
    grow with k, A_0 <= drafts and num_accepted_tokens = sum_k A_k (vLLM's counters). A probe
    of a K = 0 boot (no speculation) has no per-position counts and no drafts at all."""
    for col in ("boot_id", "probe_set", "probe_id", "accepted_per_pos"):
        if col not in df.columns:
            raise _bad(path, None, f"probes.{col}", "column missing")
    check_counts(df, path, ("num_drafts", "num_accepted_tokens"), "probes")
    lists = df["accepted_per_pos"]
    n = list_lengths(lists)
    codes, boot_ids = pd.factorize(df["boot_id"])  # one lookup per boot, not per row
    per_boot = np.array([k_of.get(b, np.nan) for b in boot_ids], dtype="float64")
    k = np.where(codes >= 0, per_boot[codes] if len(per_boot) else np.nan, np.nan)  # NaN: unknown
    want = np.where(np.isnan(k), n[0] if len(n) else 0, k).astype(int)
    bad = (n != want) | (n < 0)
    if bad.any():
        i = int(np.argmax(bad))
        got = "missing" if n[i] < 0 else f"of length {n[i]}"
        raise _bad(path, df.iloc[i], "probes.accepted_per_pos", f"{got}, expected {want[i]}")
    plain = want == 0
    _check_no_drafts(df[plain], path)
    first = _first_bad_counts(lists, n, ~plain, df)
    if first is not None:
        i, what = first
        cell = lists.iloc[i]
        shown = "[" + ", ".join("null" if x is None else f"{float(x):g}" for x in cell) + "]"
        raise _bad(path, df.iloc[i], "probes.accepted_per_pos", f"{shown}: {what}")


_BLOCK = 1 << 16  # rows checked at once (10^6 probe rows at once held ~150 MB of temporaries)
_WHATS = (
    "holds a null or negative count",
    "A_0 exceeds num_drafts",
    "A_k exceeds A_(k-1)",
    "sum differs from num_accepted_tokens",
)


def _first_bad_counts(
    lists: pd.Series, n: np.ndarray, speculative: np.ndarray, df: pd.DataFrame
) -> tuple[int, str] | None:
    """The first row (by check, then by position) whose per-position counts break vLLM's
    rules, or None. Rows of one length are stacked at once (a row-by-row stack cost most of
    a campaign's load)."""
    d_all = df["num_drafts"].to_numpy()  # as stored: converted a block at a time below
    acc_all = df["num_accepted_tokens"].to_numpy()
    found: dict[int, int] = {}  # check index -> first row
    for width in np.unique(n[speculative]):
        same = np.flatnonzero(speculative & (n == width))
        for lo in range(0, len(same), _BLOCK):  # a block at a time: bounded temporaries
            rows = same[lo : lo + _BLOCK]
            a = list_matrix(lists.iloc[rows], int(width), np.float64)
            checks = (
                (~np.isfinite(a) | (a < 0)).any(axis=1),
                a[:, 0] > d_all[rows].astype(np.float64),
                (np.diff(a, axis=1) > 0).any(axis=1),
                a.sum(axis=1) != acc_all[rows].astype(np.float64),
            )
            for j, bad in enumerate(checks):
                if bad.any():
                    found[j] = min(found.get(j, len(n)), int(rows[np.argmax(bad)]))
    if not found:
        return None
    j = min(found)
    return found[j], _WHATS[j]


def _check_no_drafts(df: pd.DataFrame, path: Path) -> None:
    """Probes of no-speculation boots: every draft count is zero."""
    for col in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
        if col not in df.columns:
            continue
        v = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype="float64")
        bad = v != 0
        if bad.any():
            i = int(np.argmax(bad))
            raise _bad(path, df.iloc[i], f"probes.{col}", f"{v[i]:g} in a boot without speculation")
