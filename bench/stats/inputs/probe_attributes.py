"""Cell arrays beyond the acceptance counts, for `dataset.arm_data`: speed (completion tokens
and latency per cell), the per-request accepted-length histograms, probe categories, and
which arms ran without speculative decoding (a speed-only arm)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from bench.errors import SpecabError
from bench.records import list_lengths, list_matrix

F = NDArray[np.float64]
Rows = TypeVar("Rows", pd.DataFrame, pd.Series)

# The probe columns the statistics read: a loader may leave the rest on disk (the output
# hashes, prompt tokens and server timings: 10^6 rows of them cost `analyze` ~130 MB).
PROBE_COLUMNS = (
    "arm", "boot", "boot_id", "probe_set", "probe_id", "category", "pass_index",
    "num_drafts", "num_draft_tokens", "num_accepted_tokens", "accepted_per_pos",
    "acceptance_histogram", "drafted_per_pos", "completion_tokens", "latency_s", "prompt_tokens",
)  # fmt: skip


def speculative_arms(ok: pd.DataFrame, arms: Sequence[str], source: str | None) -> dict[str, bool]:
    """Arm -> its ok boots ran speculative decoding (the boots' `speculative` column; files
    without it are speculative). One arm mixing both cannot be analyzed: its boots measured
    different things."""
    out = dict.fromkeys(arms, True)
    if not len(ok) or "speculative" not in ok.columns:
        return out
    flags = ok["speculative"].map(lambda x: True if x is None or x is pd.NA else bool(x))
    for arm, col in flags.groupby(ok["arm"].to_numpy()):
        found = set(col.tolist())
        if len(found) > 1:
            raise SpecabError(
                f"arm {arm!r} has ok boots with and without speculative decoding",
                file=source,
                field="boots.speculative",
                fix="give the two setups their own arms (a no-speculation arm sets "
                "speculative_config = false) and rerun the boots of one of them",
            )
        out[str(arm)] = found.pop()
    return out


def undrafted_boots(pr: pd.DataFrame, speculative: Mapping[str, bool]) -> dict[str, list[str]]:
    """Per speculative arm, its boots whose probe rows drafted nothing (speculation never ran
    there: no acceptance to measure). Summed by boot code: 10^6 rows never become Python
    strings (grouping by the string columns held 170 MB more at that scale)."""
    if not len(pr):
        return {}
    drafts = pd.to_numeric(pr["num_drafts"], errors="coerce").fillna(0).to_numpy(np.float64)
    codes, boots = pd.factorize(pr["boot_id"])
    totals = np.bincount(codes, weights=drafts, minlength=len(boots))
    first = np.unique(codes, return_index=True)[1]  # each boot's first row: its arm
    arm_of = [str(a) for a in pr["arm"].iloc[first]]
    out: dict[str, list[str]] = {}
    for code in np.flatnonzero(totals <= 0):
        if speculative.get(arm_of[code], False):
            out.setdefault(arm_of[code], []).append(str(boots[code]))
    return {arm: sorted(out[arm]) for arm in sorted(out)}


def cell_sums(
    pr: pd.DataFrame, sel: NDArray[np.bool_], bi: NDArray[np.integer], pi: NDArray[np.integer],
    shape: tuple[int, int], col: str,
) -> F:  # fmt: skip
    """Sum of one numeric column per (boot, prompt) cell of an arm."""
    values = pd.to_numeric(rows_where(pr[col], sel), errors="coerce").to_numpy(np.float64)
    return add_cells(shape, bi, pi, values)


def add_cells(
    shape: tuple[int, int], bi: NDArray[np.integer], pi: NDArray[np.integer], values: F
) -> F:
    """Per (boot, prompt) cell the sum of `values` rows (a matrix: per column too), in row
    order as `np.add.at` sums them, by one `bincount` per column (10x faster)."""
    cell = np.asarray(bi, dtype=np.int64) * shape[1] + np.asarray(pi, dtype=np.int64)
    size = shape[0] * shape[1]
    if values.ndim == 1:
        flat = np.bincount(cell, weights=values, minlength=size).astype(np.float64, copy=False)
        return flat.reshape(shape)
    width = values.shape[1]
    if width == 0:
        return np.zeros((*shape, 0))
    cols = [np.bincount(cell, weights=values[:, j], minlength=size) for j in range(width)]
    out: F = np.stack(cols, axis=-1).astype(np.float64, copy=False)
    return out.reshape(*shape, width)


def histograms(
    pr: pd.DataFrame, sel: NDArray[np.bool_], bi: NDArray[np.integer], pi: NDArray[np.integer],
    shape: tuple[int, int], k: int,
) -> NDArray[np.float32] | None:  # fmt: skip
    """Per-request accepted-length histograms (K + 1 bins: verify steps accepting 0..K) as
    cells (B, P, K + 1); None unless every probe row of the arm has one of that length."""
    if k < 1 or "acceptance_histogram" not in pr.columns or not sel.any():
        return None
    rows = rows_where(pr["acceptance_histogram"], sel)
    if np.any(list_lengths(rows) != k + 1):
        return None
    return _counts(add_cells(shape, bi, pi, list_matrix(rows, k + 1).astype(np.float64)))


def _counts(cells: F) -> NDArray[np.float32]:
    """Whole counts, exact in float32 (below 2**24 per cell), at half the memory: summed in
    float64 by whoever reads them (`ArmData.hist`, `.drafted`)."""
    return cells.astype(np.float32)


def drafted_cells(
    pr: pd.DataFrame, sel: NDArray[np.bool_], bi: NDArray[np.integer], pi: NDArray[np.integer],
    shape: tuple[int, int], k: int,
) -> NDArray[np.float32] | None:  # fmt: skip
    """Steps that drafted >= k + 1 tokens as cells (B, P, K), from the per_step_drafted
    counts; None unless every probe row of the arm has them with K entries."""
    if k < 1 or "drafted_per_pos" not in pr.columns or not sel.any():
        return None
    rows = rows_where(pr["drafted_per_pos"], sel)
    if np.any(list_lengths(rows) != k):
        return None
    return _counts(add_cells(shape, bi, pi, list_matrix(rows, k).astype(np.float64)))


def rows_where(rows: Rows, sel: pd.Series | NDArray[np.bool_]) -> Rows:
    """`rows[sel]` (a frame's or a column's), as a slice where the selected rows lie together:
    every row (the usual case), or one arm's (the loader reads files in name order). A slice
    copies nothing: 10^6 probe rows are ~200 MB, and filtering an arm's list rows out of
    them 20 times cost 0.45 CPU-s."""
    idx = np.flatnonzero(np.asarray(sel, dtype=bool))
    if len(idx) and idx[-1] - idx[0] + 1 == len(idx):
        return rows if len(idx) == len(rows) else rows.iloc[idx[0] : idx[-1] + 1]
    return rows[np.asarray(sel, dtype=bool)]


def categories(pr: pd.DataFrame, p_codes: NDArray[np.integer], n_p: int) -> list[str | None]:
    """Each compared prompt's category (its first non-null value across rows), or None."""
    if "category" not in pr.columns or not len(pr):
        return [None] * n_p
    first = pr["category"].groupby(p_codes).first()  # as stored: no object per row
    return [None if pd.isna(v) else str(v) for v in first.reindex(range(n_p)).to_numpy()]


def prompt_lengths(pr: pd.DataFrame, p_codes: NDArray[np.integer], n_p: int) -> list[float]:
    """Each compared prompt's length in tokens as the server counted it (its median over
    rows: one prompt, one length), NaN where no row recorded it."""
    if "prompt_tokens" not in pr.columns or not len(pr):
        return [float("nan")] * n_p
    tokens = pd.to_numeric(pr["prompt_tokens"], errors="coerce")
    med = tokens.groupby(p_codes).median().reindex(range(n_p))
    return [float(v) for v in med.to_numpy(dtype=np.float64)]


def concurrency(rows: pd.DataFrame) -> int:
    """Probes in flight in this arm's boots (the largest recorded; 1 when not recorded)."""
    if not len(rows) or "concurrency" not in rows.columns:
        return 1
    vals = pd.to_numeric(rows["concurrency"], errors="coerce").dropna()
    return int(vals.max()) if len(vals) else 1


def boot_slots(rows: pd.DataFrame) -> list[str]:
    """Each boot's slot on its node, as text ("": not recorded, files before the column)."""
    if not len(rows) or "slot" not in rows.columns:
        return [""] * len(rows)
    return ["" if pd.isna(v) else str(int(v)) for v in rows["slot"]]


def served(rows: pd.DataFrame) -> bool:
    """Whether these boots ran a server (a reference arm's drove its forward offline)."""
    return not (len(rows) and "reference_forward" in rows.columns
                and rows["reference_forward"].notna().any())  # fmt: skip
