"""The per-position count columns of a loaded probe frame (`accepted_per_pos`,
`acceptance_histogram`, `drafted_per_pos`) read as matrices: the one place that knows how
they are held. The loader keeps them as Arrow lists (`pd.ArrowDtype`): 10^6 probe rows take
about a third of the memory of one NumPy array per cell and convert at no cost. A frame built
in memory (tests, simulations, notebooks) may hold Python lists or arrays instead; both read
the same."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

if TYPE_CHECKING:  # pandas is imported by whoever holds a frame; `records` stays light
    import pandas as pd


def _arrow(col: pd.Series) -> pa.ChunkedArray | None:
    """The column's Arrow list array, or None where it is held as Python objects."""
    import pandas as pd

    if isinstance(col.dtype, pd.ArrowDtype) and pa.types.is_list(col.dtype.pyarrow_dtype):
        arr = col.array.__arrow_array__()
        return arr if isinstance(arr, pa.ChunkedArray) else pa.chunked_array([arr])
    return None


def list_lengths(col: pd.Series) -> NDArray[np.int64]:
    """Each cell's length, -1 for a null cell."""
    arr = _arrow(col)
    if arr is not None:
        import pyarrow.compute as pc  # not at import: `specab status` never needs it

        out = pc.fill_null(pc.list_value_length(arr), -1).to_numpy()
        return np.asarray(out, dtype=np.int64)
    values = col.to_numpy()
    return np.fromiter(
        (-1 if x is None or (isinstance(x, float) and np.isnan(x)) else len(x) for x in values),
        np.int64,
        len(values),
    )


def list_matrix(col: pd.Series, width: int | None = None, dtype: type = np.int64) -> NDArray[Any]:
    """The cells as a (rows, width) matrix, shorter and null cells padded with zeros, longer
    ones cut; `width` defaults to the longest cell (at least 1). A null count inside a cell
    reads as NaN under a float `dtype` (the validity check looks for it)."""
    lengths = list_lengths(col)
    if width is None:
        width = max(int(lengths.max()) if len(lengths) else 1, 1)
    out: NDArray[Any] = np.zeros((len(col), width), dtype=dtype)
    arr = _arrow(col)
    if arr is not None:
        flat = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
        offsets = np.asarray(flat.offsets.to_numpy(), np.int64)
        child = flat.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        values: NDArray[Any] = np.asarray(child.to_numpy(zero_copy_only=False), dtype=dtype)
        if len(values) == len(col) * width and (lengths == width).all():
            return values.reshape(len(col), width)  # every cell full: no scatter
        rows = np.repeat(np.arange(len(col)), np.diff(offsets))
        pos = np.arange(len(values), dtype=np.int64) - (offsets[rows] - offsets[0])
        keep = (pos < width) & (lengths[rows] >= 0)  # a null cell's range is not data
        out[rows[keep], pos[keep]] = values[keep]
        return out
    cells = col.to_numpy()
    if len(cells) and (lengths == width).all():  # one concatenate, not a row-by-row copy
        return np.concatenate(list(cells)).astype(dtype).reshape(len(cells), width)
    for i in np.flatnonzero(lengths > 0):
        x: NDArray[Any] = np.asarray(cells[i], dtype=dtype)[:width]
        out[i, : len(x)] = x
    return out


def list_values(col: pd.Series) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Every cell's entries end to end and each cell's length (0 for a null cell): the
    variable-length columns (`step_accepted`, `step_drafted`) read without a row loop."""
    lengths = np.maximum(list_lengths(col), 0)
    arr = _arrow(col)
    if arr is not None:
        flat = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
        values = np.asarray(flat.flatten().to_numpy(zero_copy_only=False), dtype=np.int64)
        return values, lengths
    held = zip(col.to_numpy(), lengths, strict=True)
    cells = [np.asarray(x, dtype=np.int64) for x, n in held if n]
    return (np.concatenate(cells) if cells else np.zeros(0, dtype=np.int64)), lengths
