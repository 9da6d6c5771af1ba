"""Figure 11 (sweeps): the objective against the speculative tokens per step, one line per
selection group with per-configuration intervals, the configurations that may be the best
filled, the chosen one starred and the margin below each group's best shaded; and the
acceptance per position of the same configurations."""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from bench.report.figures.plot_style import MARKERS, OKABE_ITO, add_legend, new_figure
from bench.stats import Analysis, Selection


def _objective_panel(ax: Axes, sel: Selection) -> None:
    relative = sel.margin_scale == "relative"
    for i, g in enumerate(sel.groups):
        colour, marker = OKABE_ITO[i % len(OKABE_ITO)], MARKERS[i % len(MARKERS)]
        rows = sorted(
            (c for c in g.configs if c.estimate is not None), key=lambda c: c.speculative_tokens
        )
        if not rows:
            continue
        xs = [c.speculative_tokens for c in rows]
        ys = [float(c.estimate or 0.0) for c in rows]
        ax.plot(xs, ys, color=colour, alpha=0.5, label=f"{g.group}: {g.status}")
        for c, x, y in zip(rows, xs, ys, strict=True):
            lo, hi = c.ci_low, c.ci_high
            if lo is not None and hi is not None:
                ax.errorbar([x], [y], yerr=[[y - lo], [hi - y]], color=colour, capsize=3)
            face = colour if c.in_subset else "white"
            ax.plot([x], [y], marker=marker, color=colour, markerfacecolor=face, ls="none")
            if c.arm == g.chosen:
                ax.plot([x], [y], marker="*", color="black", markersize=14, ls="none")
        best = max(ys)
        low = best * (1 - sel.margin) if relative else best - sel.margin
        ax.axhspan(low, best, color=colour, alpha=0.12, lw=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("speculative tokens per step (0: no speculation)")
    ax.set_ylabel(sel.objective)
    ax.set_title("objective by configuration (filled: may be the best; star: chosen)", fontsize=10)
    ax.grid(alpha=0.3)


def _acceptance_panel(ax: Axes, analysis: Analysis, sel: Selection) -> None:
    shown = {c.arm for g in sel.groups for c in g.configs if c.in_subset or c.arm == g.chosen}
    for i, a in enumerate(a for a in analysis.arms if a.speculative and a.arm in shown):
        pos = [p for p in a.per_position if p.estimate is not None]
        ax.plot(
            [p.position for p in pos],
            [float(p.estimate or 0.0) for p in pos],
            color=OKABE_ITO[i % len(OKABE_ITO)],
            marker=MARKERS[i % len(MARKERS)],
            label=a.arm,
        )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("draft position k")
    ax.set_ylabel("cumulative acceptance A_k / drafts")
    ax.set_title("acceptance per position (the may-be-best configurations)", fontsize=10)
    ax.grid(alpha=0.3)


def plot_selection(analysis: Analysis) -> Figure:
    sel = analysis.selection
    fig = new_figure(11.0, 4.2)
    ax1, ax2 = fig.subplots(1, 2)
    if sel is not None:
        _objective_panel(ax1, sel)
        _acceptance_panel(ax2, analysis, sel)
    h1, l1 = ax1.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    add_legend(fig, [*h1, *h2], [*l1, *l2])
    fig.suptitle("Sweep: which configuration to ship", x=0.01, ha="left", fontsize=12)
    return fig
