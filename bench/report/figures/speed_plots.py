"""Report figures 7-9: tokens/s per boot with each arm's ratio to the baseline, the
accepted-length distribution per arm, and per-category results.

Same rules as `acceptance_plots`: the typed analysis in, a `Figure` out, no pyplot, no I/O.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

from bench.records import DEFAULT_MARGINS, SPEED_METRIC
from bench.report.figures.plot_style import (
    FIGURE_METRICS,
    METRIC_TITLES,
    add_legend,
    analysis_arms,
    arm_styles,
    forest_row,
    new_figure,
    no_data,
)
from bench.stats import Analysis


def _dodge(n: int, width: float) -> list[float]:
    return [0.0] if n <= 1 else list(np.linspace(-width / 2, width / 2, n))


def _strip(ax: Axes, est_ax: Axes, analysis: Analysis) -> None:
    arms = analysis_arms(analysis)
    styles = arm_styles(arms)
    for i, a in enumerate(analysis.arms):
        colour, marker = styles[a.arm]
        pts = [(b.order, b.output_tokens_per_s) for b in a.per_boot]
        x = [o for o, v in pts if v is not None]
        y = [v for _, v in pts if v is not None]
        ax.plot(
            x,
            y,
            linestyle="none",
            marker=marker,
            markersize=7,
            color=colour,
            markeredgecolor="black",
            markeredgewidth=0.4,
            label=a.arm,
        )
        m = a.metrics.get(SPEED_METRIC)
        if m is None or m.estimate is None:
            continue
        if m.ci_low is not None and m.ci_high is not None:
            yerr = [[m.estimate - m.ci_low], [m.ci_high - m.estimate]]
            est_ax.errorbar([i], [m.estimate], yerr=yerr, color=colour, capsize=5, linewidth=2)
        est_ax.plot(
            [i],
            [m.estimate],
            marker=marker,
            markersize=8,
            color=colour,
            markeredgecolor="black",
            markeredgewidth=0.4,
        )
    ax.set_ylabel("output tokens/s\n(Σ completion tokens / Σ latency)")
    ax.set_xlabel("launch order (global boot attempt #)")
    ax.set_title("Tokens/s: each boot", loc="left", fontsize=10)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(axis="y", alpha=0.3)
    ax.margins(y=0.12)
    if not any(a.per_boot for a in analysis.arms):
        no_data(ax, "no ok boots yet")
    est_ax.set_xticks(range(len(arms)), arms, rotation=90 if len(arms) > 2 else 0)
    est_ax.set_xlim(-0.6, len(arms) - 0.4)
    est_ax.tick_params(axis="y", labelleft=False)
    est_ax.grid(axis="y", alpha=0.3)
    est_ax.set_title(f"geometric mean, {1 - analysis.alpha:.0%} CI", fontsize=10)


def _ratios(ax: Axes, analysis: Analysis) -> None:
    """Each arm / baseline: raw interval (dashed), the interval the verdict rests on (thick),
    the margin band, and the verdict; speedups over a no-speculation arm beneath."""
    comps = [c for c in analysis.comparisons if c.metric == SPEED_METRIC and c.ratio is not None]
    ups = [s for s in analysis.speedups if s.speedup is not None]
    styles = arm_styles(analysis_arms(analysis))
    margin = analysis.margins.get(SPEED_METRIC, DEFAULT_MARGINS[SPEED_METRIC])
    ax.axvspan(1 - margin, 1 + margin, color="#BBBBBB", alpha=0.45, linewidth=0)
    ax.axvline(1.0, color="black", linewidth=0.8)
    labels: list[str] = []
    for c in comps:
        y = -len(labels)
        lo, hi = c.verdict_ci or (None, None)
        thick = (1 + lo, 1 + hi) if lo is not None and hi is not None else None  # -> ratio
        raw = (c.ratio_ci_low, c.ratio_ci_high)
        style = styles.get(c.arm, ("#333333", "o"))
        forest_row(ax, y, raw, thick, float(c.ratio or np.nan), c.verdict, style, fontsize=9)
        labels.append(f"{c.arm} / {c.baseline}")
    for s in ups:
        y = -len(labels)
        colour, _ = styles.get(s.arm, ("#333333", "o"))
        if s.ci_low is not None and s.ci_high is not None:
            ax.hlines(y, s.ci_low, s.ci_high, color=colour, linewidth=1.5)
        ax.plot(
            [float(s.speedup or np.nan)],
            [y],
            marker="D",
            markersize=8,
            color="white",
            markeredgecolor=colour,
            markeredgewidth=1.5,
        )
        labels.append(f"speedup {s.arm} / {s.reference}")
    if not labels:
        no_data(ax, "no speed comparison\n(only one arm)")
        return
    ax.set_yticks([-i for i in range(len(labels))], labels)
    ax.set_ylim(-len(labels) + 0.4, 0.6)
    ax.set_xscale("log")  # the intervals are Welch's on log boot values: symmetric here
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("ratio of output tokens/s (log scale; Welch interval on log boot values)")
    diamonds = "; ◇ speedup over no speculation" if ups else ""
    ax.set_title(
        f"Ratio to {analysis.baseline} (± {100 * margin:g} % band; thick: the verdict's "
        f"interval, dashed: raw){diamonds}",
        loc="left",
        fontsize=9,
    )
    ax.grid(axis="x", alpha=0.3)


def plot_speed(analysis: Analysis) -> Figure:
    """Figure 7: tokens/s per boot in launch order and per arm; each arm's ratio to the
    baseline with its verdict, and the speedups over a no-speculation arm."""
    fig = new_figure(10.5, 7.0)
    grid = fig.add_gridspec(2, 2, width_ratios=[4, 1.4], height_ratios=[1.2, 1])
    ax = fig.add_subplot(grid[0, 0])
    _strip(ax, fig.add_subplot(grid[0, 1], sharey=ax), analysis)
    _ratios(fig.add_subplot(grid[1, :]), analysis)
    if analysis.arms:
        add_legend(fig, *ax.get_legend_handles_labels())
    fig.suptitle("Speed: output tokens/s per boot and per arm", x=0.01, ha="left", fontsize=12)
    return fig


def plot_accepted_length(analysis: Analysis) -> Figure:
    """Figure 8: share of verify steps accepting 0..K draft tokens, per speculative arm."""
    arms = [a for a in analysis.arms if a.accepted_length]
    styles = arm_styles(analysis_arms(analysis))
    fig = new_figure(10.5, 4.2)
    ax = fig.add_subplot()
    if not arms:
        no_data(ax, "no speculative arm with ok boots")
        return fig
    offsets = _dodge(len(arms), min(0.7, 0.18 * len(arms)))
    width = 0.8 / len(arms)
    for off, a in zip(offsets, arms, strict=True):
        colour, _ = styles[a.arm]
        x = np.array([s.accepted for s in a.accepted_length], dtype=float) + off
        y = np.array([np.nan if s.share is None else s.share for s in a.accepted_length])
        lo = np.array([np.nan if s.ci_low is None else s.ci_low for s in a.accepted_length])
        hi = np.array([np.nan if s.ci_high is None else s.ci_high for s in a.accepted_length])
        ax.bar(
            x, y, width=width * 0.95, color=colour, label=f"{a.arm} ({a.accepted_length_source})"
        )
        ok = np.isfinite(lo) & np.isfinite(hi)
        yerr = np.vstack([np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)])[:, ok]
        ax.errorbar(x[ok], y[ok], yerr=yerr, fmt="none", ecolor="black", capsize=2, linewidth=1)
    k = max(len(a.accepted_length) for a in arms)
    ax.set_xticks(range(k))
    ax.set_xlabel("draft tokens accepted in one verify step")
    ax.set_ylabel("share of verify steps")
    ax.grid(axis="y", alpha=0.3)
    add_legend(fig, *ax.get_legend_handles_labels())
    fig.suptitle(
        f"Accepted length per verify step ({1 - analysis.alpha:.0%} interval over boots, per bar)",
        x=0.01,
        ha="left",
        fontsize=12,
    )
    return fig


ALONG = ("prompt_tokens", "output_position")  # ordered bins: their estimates joined


def plot_categories(analysis: Analysis) -> Figure:
    """Figure 9: per group (category, probe set, prompt-length bin or output window), each
    arm's pos0, mean length and tokens/s with its interval (secondary; along the output
    there is no timing per window, so no tokens/s)."""
    b = analysis.breakdown
    fig = new_figure(11.0, 4.4)
    axes = fig.subplots(1, 3)
    if b is None or not b.groups:
        for ax in axes:
            no_data(ax, "no breakdown")
        return fig
    rows = [
        (g.group, a.arm, metric, m.estimate, m.ci_low, m.ci_high)
        for g in b.groups
        for a in g.arms
        for metric, m in a.metrics.items()
        if m.estimate is not None
    ]
    df = pd.DataFrame(rows, columns=["group", "arm", "metric", "est", "lo", "hi"])
    groups = [g.group for g in b.groups]
    arms = analysis_arms(analysis)
    styles = arm_styles(arms)
    offsets = dict(zip(arms, _dodge(len(arms), min(0.6, 0.15 * len(arms))), strict=True))
    titles = {m: METRIC_TITLES[m] for m in (*FIGURE_METRICS, SPEED_METRIC)}
    for ax, metric in zip(axes, titles, strict=True):
        for arm in arms:
            d = df[(df["arm"] == arm) & (df["metric"] == metric)]
            if d.empty:
                continue
            colour, marker = styles[arm]
            x = np.array([groups.index(g) for g in d["group"]], dtype=float) + offsets[arm]
            est, lo, hi = (d[c].to_numpy(dtype=float) for c in ("est", "lo", "hi"))
            if len(groups) > 1 and b.by.partition(":")[0] in ALONG:  # ordered bins: a line
                ax.plot(x, est, color=colour, alpha=0.5, linewidth=1)
            yerr = np.vstack([np.clip(est - lo, 0, None), np.clip(hi - est, 0, None)])
            ax.errorbar(
                x,
                est,
                yerr=np.nan_to_num(yerr),
                fmt=marker,
                color=colour,
                capsize=3,
                markeredgecolor="black",
                markeredgewidth=0.4,
                label=arm,
            )
        ax.set_xticks(range(len(groups)), groups, rotation=30 if len(groups) > 3 else 0)
        ax.set_xlim(-0.5, len(groups) - 0.5)
        ax.set_title(titles[metric], loc="left", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        if df[df["metric"] == metric].empty:
            no_data(ax, "no timing per output window" if metric == SPEED_METRIC else "no data")
    add_legend(fig, *axes[0].get_legend_handles_labels())
    fig.suptitle(
        f"By {b.by} (secondary; {1 - analysis.alpha:.0%} intervals within each group)",
        x=0.01,
        ha="left",
        fontsize=12,
    )
    return fig
