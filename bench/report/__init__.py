"""Rendering only: the report (markdown, self-contained HTML, figures), its tables, and what
the commands print. Everything here reads what `bench.store` loads and what `bench.stats`
computed; no statistic is computed here.

`figures` and `tables` are the parts; `sections` assembles the markdown report from them,
`render` writes report.md, report.html, analysis.json and the figures; `console` is what
`run-ab`, `analyze`, `plan` and `gate` print. Tracking (MLflow) is `bench.tracking`'s.
The tables and `figure_png` exported here are also the analysis notebook's
(notebooks/analysis.ipynb), a reader outside the package."""

# The face loads its modules on first use (PEP 562): `specab status` and the table views
# import what they print with, never the figures (matplotlib).
from typing import TYPE_CHECKING, Any

from bench import lazy_attribute

if TYPE_CHECKING:
    from bench.report.console import (
        print_end,
        render_analysis,
        render_gate,
        render_plan,
        render_split,
        render_trace,
        table_console,
    )
    from bench.report.figures import per_boot_frame
    from bench.report.render import (
        analysis_or_refusal,
        analyze_results,
        build_figures,
        figure_png,
        render_report,
        write_report,
    )
    from bench.report.tables import (
        accepted_length_table,
        analysis_json,
        arm_summary,
        category_table,
        draft_length_table,
        failed_attempts,
        output_identity,
        provenance,
        speed_table,
        speedup_table,
        verdict_markdown,
        verdict_table,
    )

_WHERE = {
    "accepted_length_table": "bench.report.tables",
    "failed_attempts": "bench.report.tables",
    "figure_png": "bench.report.render",
    "output_identity": "bench.report.tables",
    "provenance": "bench.report.tables",
    "speedup_table": "bench.report.tables",
    "verdict_table": "bench.report.tables",
    "analysis_json": "bench.report.tables",
    "analysis_or_refusal": "bench.report.render",
    "analyze_results": "bench.report.render",
    "arm_summary": "bench.report.tables",
    "build_figures": "bench.report.render",
    "category_table": "bench.report.tables",
    "draft_length_table": "bench.report.tables",
    "per_boot_frame": "bench.report.figures",
    "print_end": "bench.report.console",
    "render_analysis": "bench.report.console",
    "render_gate": "bench.report.console",
    "render_plan": "bench.report.console",
    "render_report": "bench.report.render",
    "render_split": "bench.report.console",
    "render_trace": "bench.report.console",
    "speed_table": "bench.report.tables",
    "table_console": "bench.report.console",
    "verdict_markdown": "bench.report.tables",
    "write_report": "bench.report.render",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _WHERE, name)


__all__ = [
    "accepted_length_table", "analysis_json", "analysis_or_refusal", "analyze_results",
    "arm_summary",
    "build_figures", "category_table", "draft_length_table", "failed_attempts", "figure_png",
    "output_identity", "per_boot_frame", "print_end", "provenance", "render_analysis",
    "render_gate", "render_plan", "render_report", "render_split", "render_trace", "speed_table",
    "speedup_table", "table_console", "verdict_markdown", "verdict_table", "write_report",
]  # fmt: skip
