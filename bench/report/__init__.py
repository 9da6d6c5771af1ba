"""Rendering only: the report (markdown, self-contained HTML, figures), its tables, and what
`run-ab` prints at the end. Everything here reads what `bench.store` loads and what
`bench.stats.analyze` computed; no statistic is computed here."""

from bench.report._plots import per_boot_frame
from bench.report._plots_common import METRIC_SHORT
from bench.report._provenance import provenance
from bench.report._render import (
    analyze_results,
    build_figures,
    figure_png,
    render_report,
    verdict_markdown,
    write_report,
)
from bench.report._selection_view import render_selection
from bench.report._summary import print_end, table_console
from bench.report._tables import (
    failed_attempts,
    identity_summary,
    output_identity,
    probe_temperature,
    variance_table,
    verdict_interval,
    verdict_table,
)
from bench.report._tables_drafting import draft_length_table
from bench.report._tables_speed import (
    accepted_length_table,
    arm_summary,
    category_table,
    speed_table,
    speedup_table,
)

__all__ = [
    "METRIC_SHORT",
    "accepted_length_table",
    "analyze_results",
    "arm_summary",
    "build_figures",
    "category_table",
    "draft_length_table",
    "failed_attempts",
    "figure_png",
    "identity_summary",
    "output_identity",
    "per_boot_frame",
    "print_end",
    "probe_temperature",
    "provenance",
    "render_report",
    "render_selection",
    "speed_table",
    "speedup_table",
    "table_console",
    "variance_table",
    "verdict_interval",
    "verdict_markdown",
    "verdict_table",
    "write_report",
]  # fmt: skip
