"""The verdict table on a terminal: `specab analyze` and the end of `run-ab` print the same
table, the one the report and `analyze --format markdown` show (`verdict_table`), followed
by each comparison's reason and its resampling extras."""

from __future__ import annotations

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bench.report.tables import ab_comparisons, data_row, verdict_table
from bench.stats import Analysis, Comparison

# What the terminal leaves to the lines under the table (why) or to the report (method).
_BELOW = ("why", "method")


def print_frame(console: Console, df: pd.DataFrame, title: str) -> None:
    """A data frame as a rich table: every cell literal text, folded, never cut."""
    table = Table(title=title, title_justify="left")
    for col in df.columns:
        # "[raw 95% CI]" is not rich markup; fold, never cut, on a narrow terminal
        table.add_column(escape(str(col)), overflow="fold")
    for _, r in df.iterrows():
        data_row(table, *[f"{v:.4f}" if isinstance(v, float) else v for v in r.tolist()])
    console.print(table)


def _extras(c: Comparison) -> str:
    out = []
    if c.permutation_p is not None:
        out.append(
            f"permutation p {c.permutation_p:.3g} (min attainable {c.permutation_min_p:.3g})"
        )
    lo, hi = c.new_prompts_ci or (None, None)
    if lo is not None and hi is not None:
        out.append(f"on new prompts [{lo:+.4f}, {hi:+.4f}]")
    return "; ".join(out)


def print_verdicts(console: Console, analysis: Analysis) -> None:
    """The verdict table, then per comparison: its verdict, why, and the extras."""
    table = verdict_table(analysis)
    if table.empty:
        console.print("no comparison: only one arm has results", markup=False)
        return
    shown = ab_comparisons(analysis)
    paired = any(c.pairing == "duet" for c in shown)
    how = "Welch on boot values" + (
        "; speed marked 'paired (duets)' compared within co-run groups" if paired else ""
    )
    title = f"Each arm vs {analysis.baseline} ({how}; Holm within each family)"
    print_frame(console, table[[c for c in table.columns if c not in _BELOW]], title)
    for c, metric in zip(shown, table["metric"], strict=True):
        console.print(f"- {c.arm} {metric}: {c.verdict}: {c.why}", markup=False)
        extras = _extras(c)
        if extras:
            console.print(f"    {extras}", markup=False)
