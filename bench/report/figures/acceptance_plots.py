"""Report figures 1-3: per-boot strip, forest of differences, acceptance per draft position.

Every function takes the typed analysis (`bench.stats.Analysis`) and returns a
`matplotlib.figure.Figure` built without pyplot (no global state, no I/O), so figures can be
rendered in a report, a notebook or a test alike. Figures 4-6 live in `run_plots`.
Colours are Okabe-Ito (colour-blind safe) and every arm also gets its own marker.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from bench.records import ALL_METRICS, METRIC
from bench.report.figures.plot_style import (
    FIGURE_METRICS,
    METRIC_LABELS,
    METRIC_TITLES,
    OKABE_ITO,
    add_legend,
    analysis_arms,
    arm_styles,
    forest_row,
    new_figure,
    no_data,
)
from bench.stats import Analysis


def per_boot_frame(analysis: Analysis) -> pd.DataFrame:
    """The analysis' per-boot metrics as a table, in launch order (figure 1, the notebook)."""
    cols = ["arm", "boot", "boot_id", "order", "drafts", *ALL_METRICS]
    rows = [{"arm": a.arm, **b.model_dump()} for a in analysis.arms for b in a.per_boot]
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values(["order", "arm", "boot"], kind="stable").reset_index(drop=True)


def _apart(analysis: Analysis, arm: str, metric: str) -> list[str]:
    """The arm's boots in a second mode of this metric (none: one population)."""
    entry = analysis.arm(arm)
    modes = [m for m in (entry.modes if entry else []) if m.metric == metric]
    return modes[0].other_boots if modes else []


def _ring(ax: Any, d: pd.DataFrame, apart: list[str], metric: str) -> None:
    ring = d[d["boot_id"].isin(apart)]
    style = {"markerfacecolor": "none", "markeredgecolor": "#d62728", "markeredgewidth": 1.5}
    ax.plot(ring["order"], ring[metric], linestyle="none", marker="o", markersize=15,
            gid="apart", **style)  # fmt: skip
    for order, value, boot_id in zip(ring["order"], ring[metric], ring["boot_id"], strict=True):
        ax.annotate(f"{boot_id}: apart", (order, value), fontsize=7, xytext=(8, -10),
                    textcoords="offset points", color="#d62728")  # fmt: skip


def plot_boot_strip(analysis: Analysis) -> Figure:
    """Figure 1: each boot's metric in launch order (drift shows), and each arm's estimate.

    Left: one point per ok boot at its global launch order. Right: the arm's estimate with
    its (1 - alpha) interval from the analysis, on the same y scale.
    """
    per_boot = per_boot_frame(analysis)
    styles = arm_styles(analysis_arms(analysis))  # the same style per arm in every figure
    arms = [a.arm for a in analysis.arms if a.speculative]  # no acceptance without drafts
    alpha = analysis.alpha
    fig = new_figure(10.5, 6.4)
    grid = fig.add_gridspec(2, 2, width_ratios=[4, 1.4])
    for row, metric in enumerate(FIGURE_METRICS):
        ax = fig.add_subplot(grid[row, 0])
        est_ax = fig.add_subplot(grid[row, 1], sharey=ax)
        for arm in arms:
            colour, marker = styles[arm]
            d = per_boot[per_boot["arm"] == arm]
            ax.plot(
                d["order"],
                d[metric],
                linestyle="none",
                marker=marker,
                markersize=7,
                color=colour,
                markeredgecolor="black",
                markeredgewidth=0.4,
                label=arm,
            )
            _ring(ax, d, _apart(analysis, arm, metric), metric)  # a second mode, named
        ax.set_ylabel(METRIC_LABELS[metric])
        ax.set_title(f"{METRIC_TITLES[metric]}: each boot", loc="left", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        ax.margins(y=0.12)  # markers at the extremes stay whole
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if per_boot.empty:
            no_data(ax, "no ok boots yet")
        if row == len(FIGURE_METRICS) - 1:
            ax.set_xlabel("launch order (global boot attempt #)")
        clipped = any_ci = False
        for i, arm in enumerate(arms):
            colour, marker = styles[arm]
            entry = analysis.arm(arm)
            m = entry.metrics.get(metric) if entry is not None else None
            if m is None or m.estimate is None:
                continue
            est = m.estimate
            lo, hi = m.ci_low, m.ci_high
            if lo is not None and hi is not None:
                # A t interval from few boots can leave the metric's range (acceptance < 0);
                # draw it to the edge and mark the cut with an arrow instead of a cap.
                f_lo, f_hi = METRIC[metric].value_range(entry.positions if entry else 0)
                lo_d, hi_d = max(float(lo), f_lo), min(float(hi), f_hi)
                any_ci = True
                est_ax.errorbar(
                    [i],
                    [est],
                    yerr=[[est - lo_d], [hi_d - est]],
                    color=colour,
                    capsize=5,
                    linewidth=2,
                )
                for cut, end, arrow in (
                    (lo_d > float(lo), lo_d, "v"),
                    (hi_d < float(hi), hi_d, "^"),
                ):
                    if cut:
                        est_ax.plot([i], [end], marker=arrow, color=colour, markersize=9)
                        clipped = True
            est_ax.plot(
                [i],
                [est],
                marker=marker,
                markersize=8,
                color=colour,
                markeredgecolor="black",
                markeredgewidth=0.4,
            )
        est_ax.set_xticks(
            range(len(arms)),
            arms,
            rotation=90 if len(arms) > 2 else 0,  # upright names would collide
        )
        est_ax.set_xlim(-0.6, len(arms) - 0.4)
        est_ax.tick_params(axis="y", labelleft=False)
        if row < len(FIGURE_METRICS) - 1:  # arm names once, under the bottom panel
            est_ax.tick_params(axis="x", labelbottom=False)
        est_ax.grid(axis="y", alpha=0.3)
        est_ax.margins(y=0.12)
        ci_text = f"{1 - alpha:.0%} CI" if any_ci else "no CI (1 boot)"
        est_ax.set_title(f"arm estimate, {ci_text}", fontsize=10)
        if clipped:
            est_ax.set_xlabel("arrow: CI cut at the\nmetric's possible range", fontsize=8)
    if arms:
        add_legend(fig, *fig.axes[0].get_legend_handles_labels())
    fig.suptitle("Per-boot acceptance in launch order", x=0.01, ha="left", fontsize=12)
    return fig


def plot_forest(analysis: Analysis) -> Figure:
    """Figure 2: each arm minus baseline, the ± margin band and the verdict. Thick: the
    interval the verdict rests on (Holm-compatible; TOST for equivalence); dashed: the raw
    (1 - alpha) interval."""
    comps = analysis.comparisons
    arms = [
        a
        for a in analysis_arms(analysis)
        if any(c.arm == a and c.metric in FIGURE_METRICS for c in comps)
    ]
    styles = arm_styles(analysis_arms(analysis))
    fig = new_figure(10.5, 1.9 + 1.1 * max(1, len(arms)))
    axes = fig.subplots(1, 2)
    base = analysis.baseline
    for ax, metric in zip(axes, FIGURE_METRICS, strict=True):
        rows = [c for c in comps if c.metric == metric]
        if not rows:
            no_data(ax, "no acceptance comparison\n(one speculative arm, or none)")
            ax.set_title(METRIC_TITLES[metric], fontsize=10)
            continue
        margin = rows[0].margin
        ax.axvspan(-margin, margin, color="#BBBBBB", alpha=0.45, linewidth=0)
        ax.axvline(0, color="black", linewidth=0.8)
        span = [margin]
        for y, arm in enumerate(reversed(arms)):
            c = next((r for r in rows if r.arm == arm), None)
            if c is not None:
                style = styles.get(arm, (OKABE_ITO[0], "o"))
                raw = (c.ci_low, c.ci_high)
                drawn = forest_row(ax, y, raw, c.verdict_ci, c.difference, c.verdict, style)
                span += [abs(x) for x in drawn]
        lim = 1.15 * max(span) if max(span) > 0 else 1.0
        ax.set_xlim(-lim, lim)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=6, symmetric=True))  # uncrowded ticks
        ax.set_ylim(-0.7, len(arms) - 0.3)
        # an arm compared with its own drafter's reference, not the baseline, says so
        own = {r.arm: r.baseline for r in rows if r.baseline != base}
        ax.set_yticks(range(len(arms)), [f"{a} − {own[a]}" if a in own else a for a in arms[::-1]])
        unit = f" ({METRIC[metric].unit})" if METRIC[metric].unit else ""
        ax.set_xlabel(f"{METRIC_TITLES[metric].lower()}: arm − {base}{unit}")
        ax.set_title(f"{METRIC_TITLES[metric]} (± margin {margin:g})", fontsize=10, loc="left")
        ax.grid(axis="x", alpha=0.3)
    handles = [
        Line2D([], [], color="#333333", linewidth=3.0),
        Line2D([], [], color="#333333", linewidth=1.0, linestyle=(0, (2, 1))),
        Patch(color="#BBBBBB", alpha=0.45),
    ]
    labels = [
        "interval the verdict rests on (Holm; TOST for equivalent)",
        f"raw {1 - analysis.alpha:.0%} interval",
        "± margin",
    ]
    add_legend(fig, handles, labels)
    fig.suptitle(
        f'Each arm minus the baseline arm "{base}"; verdict at right',
        x=0.01,
        ha="left",
        fontsize=12,
    )
    return fig


def _dodge(n: int, width: float = 0.24) -> list[float]:
    return [0.0] if n <= 1 else list(np.linspace(-width / 2, width / 2, n))


def _among_drafted(
    ax: Any, analysis: Analysis, styles: dict[str, tuple[str, str]], offsets: dict[str, float]
) -> None:
    """Where an arm drafts fewer than K tokens in some steps (ngram, dynamic speculation):
    its acceptance among the steps that drafted position k, dashed beside vLLM's ÷ drafts."""
    for a in analysis.arms:
        pts = [p for p in a.per_position if p.among_drafted is not None]
        if a.arm not in offsets or not any((p.drafted_share or 1.0) < 0.999 for p in pts):
            continue
        x = np.array([p.position for p in pts], dtype=float) + offsets[a.arm]
        colour, marker = styles[a.arm]
        label = f"{a.arm}: ÷ steps that drafted k"
        y = [p.among_drafted for p in pts]
        ax.plot(x, y, "--", color=colour, marker=marker, markerfacecolor="white", label=label)


def plot_positions(analysis: Analysis) -> Figure:
    """Figure 3: acceptance per draft position, cumulative and conditional, one line per arm.

    Cumulative = ΣA_k/ΣD and conditional = ΣA_k/ΣA_{k-1}, each with the analysis'
    simultaneous intervals over positions (any K >= 1; one position is a single point).
    """
    arms = analysis_arms(analysis)
    styles = arm_styles(arms)
    fig = new_figure(10.5, 4.4)
    axes = fig.subplots(1, 2, sharex=True)
    rows = [(a.arm, p) for a in analysis.arms for p in a.per_position]
    cum = pd.DataFrame(
        [(arm, p.position, p.estimate, p.ci_low, p.ci_high) for arm, p in rows],
        columns=["arm", "position", "estimate", "ci_low", "ci_high"],
    )
    cond = pd.DataFrame(
        [
            (arm, p.position, p.conditional, p.conditional_ci_low, p.conditional_ci_high)
            for arm, p in rows
            if p.conditional is not None
        ],
        columns=["arm", "position", "estimate", "ci_low", "ci_high"],
    )
    panels = (
        (axes[0], cum, "cumulative: P(first k+1 drafts accepted)\n(ΣA_k / ΣD)"),
        (axes[1], cond, "conditional: P(k accepted | k−1 accepted)\n(ΣA_k / ΣA_k−1)"),
    )
    offsets = dict(zip(arms, _dodge(len(arms), min(0.5, 0.08 * len(arms))), strict=True))
    for ax, df, ylabel in panels:
        if df.empty:
            no_data(ax, "not in the analysis")
            continue
        for arm in arms:
            d = df[df["arm"] == arm].sort_values("position")
            if d.empty:
                continue
            colour, marker = styles[arm]
            x = d["position"].to_numpy(dtype=float) + offsets[arm]
            est = d["estimate"].to_numpy(dtype=float)
            lo = d["ci_low"].to_numpy(dtype=float)
            hi = d["ci_high"].to_numpy(dtype=float)
            ax.errorbar(
                x,
                est,
                yerr=np.vstack([np.clip(est - lo, 0, None), np.clip(hi - est, 0, None)]),
                color=colour,
                marker=marker,
                markersize=6,
                capsize=3,
                linewidth=1.6,
                markeredgecolor="black",
                markeredgewidth=0.4,
                label=arm,
            )
        if ax is axes[0]:
            _among_drafted(ax, analysis, styles, offsets)
        ax.set_ylabel(ylabel)
        ax.set_xlabel("draft position k (0 = first draft token)")
        ax.grid(alpha=0.3)
        positions = sorted(set(df["position"].astype(int)))
        ax.set_xticks(positions)
        ax.set_xlim(positions[0] - 0.5, positions[-1] + 0.5)  # one position stays centred
    axes[0].set_title("Cumulative acceptance", loc="left", fontsize=10)
    axes[1].set_title("Conditional acceptance", loc="left", fontsize=10)
    if arms:
        handles, labels = axes[0].get_legend_handles_labels()
        add_legend(fig, handles, labels)
    replicated = any(a.boots >= 2 for a in analysis.arms)
    note = "simultaneous intervals" if replicated else "1 boot per arm: no intervals"
    fig.suptitle(f"Acceptance per draft position ({note})", x=0.01, ha="left", fontsize=12)
    return fig
