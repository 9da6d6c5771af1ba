"""What specab prints to a terminal: run-ab's end of run (`end_of_run`: the verdict table,
the sweep's choice, the per-node balance), `specab analyze` / `plan` / `--split-arm`
(`analysis_view`), `specab gate` (`gate_view`), `specab status` (`status_view`) and
`specab trace` (`trace_view`). Rich
tables from typed results only."""

# The face loads its modules on first use (PEP 562): `specab status` and the table views
# import what they print with, never the figures (matplotlib) or MLflow.
from typing import TYPE_CHECKING, Any

from bench import lazy_attribute

if TYPE_CHECKING:
    from bench.report.console.analysis_view import render_analysis, render_plan, render_split
    from bench.report.console.end_of_run import print_end, table_console
    from bench.report.console.gate_view import render_gate
    from bench.report.console.status_view import status_line, status_view
    from bench.report.console.trace_view import render_trace

_WHERE = {
    "print_end": "bench.report.console.end_of_run",
    "render_analysis": "bench.report.console.analysis_view",
    "render_gate": "bench.report.console.gate_view",
    "render_plan": "bench.report.console.analysis_view",
    "render_split": "bench.report.console.analysis_view",
    "status_line": "bench.report.console.status_view",
    "status_view": "bench.report.console.status_view",
    "render_trace": "bench.report.console.trace_view",
    "table_console": "bench.report.console.end_of_run",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _WHERE, name)


__all__ = [
    "print_end", "render_analysis", "render_gate", "render_plan", "render_split",
    "render_trace", "status_line", "status_view", "table_console",
]  # fmt: skip
