"""Figure 10: acceptance and speed by pass within boots ([probes] passes), per arm."""

from __future__ import annotations

from matplotlib.figure import Figure

from bench.records import SPEED_METRIC
from bench.report.figures.plot_style import (
    FIGURE_METRICS,
    METRIC_TITLES,
    add_legend,
    analysis_arms,
    arm_styles,
    new_figure,
)
from bench.stats import Analysis

_PANELS = tuple((m, METRIC_TITLES[m]) for m in (*FIGURE_METRICS, SPEED_METRIC))


def plot_drift(analysis: Analysis) -> Figure:
    """One panel per metric: the metric on each pass (mean over the arm's boots), a line per
    arm, with the first-to-last change and its verdict in the legend."""
    styles = arm_styles(
        list(dict.fromkeys([*analysis_arms(analysis), *(d.arm for d in analysis.drift)]))
    )
    panels = [(m, t) for m, t in _PANELS if any(d.metric == m for d in analysis.drift)]
    fig = new_figure(10.5, 3.6)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (metric, title) in zip(axes, panels, strict=True):
        for d in (d for d in analysis.drift if d.metric == metric):
            colour, marker = styles[d.arm]
            change = f"{100 * d.change:+.1f} %" if d.scale == "relative" else f"{d.change:+.4f}"
            ax.plot(
                range(len(d.by_pass)),
                d.by_pass,
                color=colour,
                marker=marker,
                label=f"{d.arm}: {change} ({d.verdict})" if metric == panels[0][0] else None,
            )
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("pass within the boot")
        ax.grid(alpha=0.3)
    add_legend(fig, *axes[0].get_legend_handles_labels())
    fig.suptitle(
        "Drift within boots: each pass over the probe set (mean over boots)",
        x=0.01,
        ha="left",
        fontsize=12,
    )
    return fig
