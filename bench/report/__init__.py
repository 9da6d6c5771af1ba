"""Rendering only: the report (markdown, self-contained HTML, figures), its tables, and what
the commands print. Everything here reads what `bench.store` loads and what `bench.stats`
computed; no statistic is computed here.

`figures` and `tables` are the parts; `sections` assembles the markdown report from them,
`render` writes report.md, report.html, analysis.json and the figures; `console` is what
`run-ab`, `analyze`, `plan` and `gate` print; `mlflow_runs` writes a results directory as
MLflow runs (`export mlflow`), `live_tracking` the same while a run goes (`run-ab --track`)."""

from bench.report.console import (
    print_end,
    render_analysis,
    render_gate,
    render_plan,
    render_split,
    table_console,
)
from bench.report.figures import METRIC_SHORT, per_boot_frame
from bench.report.live_tracking import LiveTracker
from bench.report.mlflow_runs import (
    check_server,
    finish_runs,
    log_boot,
    mlflow_client,
    open_runs,
    quick_requests,
)
from bench.report.render import (
    analyze_results,
    build_figures,
    figure_png,
    render_report,
    verdict_markdown,
    write_report,
)
from bench.report.tables import (
    accepted_length_table,
    arm_summary,
    category_table,
    draft_length_table,
    failed_attempts,
    identity_summary,
    output_identity,
    probe_temperature,
    provenance,
    render_selection,
    speed_table,
    speedup_table,
    variance_table,
    verdict_interval,
    verdict_table,
)

__all__ = [
    "METRIC_SHORT",
    "LiveTracker",
    "accepted_length_table",
    "analyze_results",
    "arm_summary",
    "build_figures",
    "category_table",
    "check_server",
    "draft_length_table",
    "failed_attempts",
    "figure_png",
    "finish_runs",
    "identity_summary",
    "log_boot",
    "mlflow_client",
    "open_runs",
    "output_identity",
    "per_boot_frame",
    "print_end",
    "probe_temperature",
    "provenance",
    "quick_requests",
    "render_analysis",
    "render_gate",
    "render_plan",
    "render_report",
    "render_selection",
    "render_split",
    "speed_table",
    "speedup_table",
    "table_console",
    "variance_table",
    "verdict_interval",
    "verdict_markdown",
    "verdict_table",
    "write_report",
]  # fmt: skip
