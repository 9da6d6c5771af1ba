"""The report's figures: each takes the typed analysis (and frames) and returns a
`matplotlib.figure.Figure` built without pyplot (no global state, no I/O), so a figure can be
drawn in a report, a notebook or a test alike. Acceptance (`acceptance_plots`: per-boot
strip, forest of differences, positions), runs (`run_plots`: variance, timing, output
identity), speed (`speed_plots`), drift (`drift_plot`), a sweep (`selection_plot`), a
culprit search (`history_plot`); shared
style in `plot_style`, titles and captions in `captions`."""

from bench.report.figures.acceptance_plots import (
    per_boot_frame,
    plot_boot_strip,
    plot_forest,
    plot_positions,
)
from bench.report.figures.captions import CAPTIONS
from bench.report.figures.drift_plot import plot_drift
from bench.report.figures.history_plot import plot_history
from bench.report.figures.run_plots import plot_output_identity, plot_timing, plot_variance
from bench.report.figures.selection_plot import plot_selection
from bench.report.figures.speed_plots import plot_accepted_length, plot_categories, plot_speed

__all__ = [
    "CAPTIONS", "per_boot_frame", "plot_accepted_length", "plot_boot_strip",
    "plot_categories", "plot_drift", "plot_forest", "plot_history", "plot_output_identity",
    "plot_positions",
    "plot_selection", "plot_speed", "plot_timing", "plot_variance",
]  # fmt: skip
