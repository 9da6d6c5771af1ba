"""What specab prints to a terminal: run-ab's end of run (`end_of_run`: the verdict table,
the sweep's choice, the per-node balance), `specab analyze` / `plan` / `--split-arm`
(`analysis_view`), `specab gate` (`gate_view`) and `specab status` (`status_view`). Rich
tables from typed results only."""

from bench.report.console.analysis_view import render_analysis, render_plan, render_split
from bench.report.console.end_of_run import print_end, table_console
from bench.report.console.gate_view import render_gate
from bench.report.console.status_view import status_line, status_view

__all__ = [
    "print_end", "render_analysis", "render_gate", "render_plan", "render_split",
    "status_line", "status_view", "table_console",
]  # fmt: skip
