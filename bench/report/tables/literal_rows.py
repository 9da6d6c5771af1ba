"""Rows of data in a rich table: every cell literal text, so an interval's brackets
(`[0.10, 0.45]`) or an arm named `[a]` are never read as rich markup, which would hide them."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text


def data_row(table: Table, *cells: object) -> None:
    """Add one row whose cells print exactly as `str()` gives them."""
    table.add_row(*(c if isinstance(c, Text) else Text(str(c)) for c in cells))
