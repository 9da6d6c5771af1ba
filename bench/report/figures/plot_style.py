"""Shared pieces of the report figures: palette, markers, labels, figure/legend helpers and
accessors of the typed analysis. No pyplot, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from bench.records import METRIC, PRIMARY_DEFAULT, REGISTRY
from bench.stats import Analysis

# Okabe & Ito (2008), ordered so the first two arms differ in hue and lightness.
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
VERDICT_COLOURS = {
    "improved": "#009E73",
    "small_improvement": "#009E73",
    "regressed": "#D55E00",
    "small_regression": "#D55E00",
    "equivalent": "#0072B2",
    "inconclusive": "#555555",
}
# The acceptance panels of the figures: the headline (primary by default) acceptance metrics;
# every other metric is in the report's tables.
FIGURE_METRICS = tuple(m for m in PRIMARY_DEFAULT if METRIC[m].acceptance)
METRIC_LABELS = {m.name: m.label for m in REGISTRY}
METRIC_TITLES = {m.name: m.title for m in REGISTRY}


def arm_styles(arms: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Colour and marker per arm, stable in the given (manifest) order."""
    return {
        a: (OKABE_ITO[i % len(OKABE_ITO)], MARKERS[i % len(MARKERS)]) for i, a in enumerate(arms)
    }


def new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    fig.set_facecolor("white")
    return fig


def add_legend(fig: Figure, handles: Sequence[Any], labels: Sequence[str]) -> None:
    """One legend under the plots, in as many columns as fit the figure's width (a legend
    at the top collides with the title once arm names get long)."""
    if not handles:
        return
    width_pt = fig.get_figwidth() * 72
    entry_pt = 7.0 * max(len(str(label)) for label in labels) + 40  # ~9 pt font + marker
    ncols = max(1, min(len(labels), int(width_pt // entry_pt)))
    fig.legend(handles, labels, loc="outside lower center", ncols=ncols, frameon=False)


def analysis_arms(analysis: Analysis) -> list[str]:
    return [a.arm for a in analysis.arms]


def finite(*values: Any) -> bool:
    return all(v is not None and np.isfinite(float(v)) for v in values)


def no_data(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#555555")
    ax.set_xticks([])
    ax.set_yticks([])


Interval = tuple[float | None, float | None] | None


def forest_row(
    ax: Axes,
    y: float,
    raw: Interval,
    thick: Interval,
    estimate: float | None,
    verdict: str,
    style: tuple[str, str],
    fontsize: int = 10,
) -> list[float]:
    """One comparison of a forest plot: the raw interval thin and dashed (just under the
    thick one, which usually holds it), the interval the verdict rests on thick, the estimate,
    the verdict word right of the axes. Returns the x values drawn (for the limits)."""
    colour, marker = style
    drawn: list[float] = []
    if raw is not None and raw[0] is not None and raw[1] is not None:
        ax.hlines(y - 0.2, raw[0], raw[1], color=colour, linewidth=1.0, linestyle=(0, (2, 1)))
        drawn += [raw[0], raw[1]]
    if thick is not None and thick[0] is not None and thick[1] is not None:
        ax.hlines(y, thick[0], thick[1], color=colour, linewidth=3.0)
        drawn += [thick[0], thick[1]]
    if estimate is not None:
        ax.plot([estimate], [y], marker=marker, markersize=9, color=colour,
                markeredgecolor="black", markeredgewidth=0.5)  # fmt: skip
        drawn.append(estimate)
    ax.annotate(
        verdict.replace("_", " "),
        xy=(1.02, y),
        xycoords=("axes fraction", "data"),
        va="center",
        ha="left",
        fontsize=fontsize,
        fontweight="bold",
        color=VERDICT_COLOURS.get(verdict, "#555555"),
    )
    return drawn
