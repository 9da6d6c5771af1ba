"""Report figures 1-3: per-boot strip, forest of differences, acceptance per draft position.

Every function takes data frames and/or the `analyze --json` dict and returns a
`matplotlib.figure.Figure` built without pyplot (no global state, no I/O), so figures can be
rendered in a report, a notebook or a test alike. Figures 4-6 live in `bench.report._plots_runs`.
Colours are Okabe-Ito (colour-blind safe) and every arm also gets its own marker.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from bench.report._plots_common import (
    FEASIBLE,
    METRIC_LABELS,
    METRIC_TITLES,
    OKABE_ITO,
    VERDICT_COLOURS,
    Analysis,
    add_legend,
    analysis_arms,
    arm_metric_of,
    arm_styles,
    baseline_of,
    finite,
    new_figure,
    no_data,
)
from bench.stats import METRICS


def plot_boot_strip(per_boot: pd.DataFrame, analysis: Analysis) -> Figure:
    """Figure 1: each boot's metric in launch order (drift shows), and each arm's estimate.

    Left: one point per ok boot at its global launch order. Right: the arm's estimate with
    its (1 - alpha) interval from the analysis, on the same y scale.
    """
    arms = analysis_arms(analysis) or list(dict.fromkeys(per_boot["arm"]))
    styles = arm_styles(arms)
    alpha = float(analysis.get("alpha", 0.05))
    fig = new_figure(10.5, 6.4)
    grid = fig.add_gridspec(2, 2, width_ratios=[4, 1.4])
    for row, metric in enumerate(METRICS):
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
        ax.set_ylabel(METRIC_LABELS[metric])
        ax.set_title(f"{METRIC_TITLES[metric]}: each boot", loc="left", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        ax.margins(y=0.12)  # markers at the extremes stay whole
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if per_boot.empty:
            no_data(ax, "no ok boots yet")
        if row == len(METRICS) - 1:
            ax.set_xlabel("launch order (global boot attempt #)")
        clipped = any_ci = False
        for i, arm in enumerate(arms):
            colour, marker = styles[arm]
            m = arm_metric_of(analysis, arm, metric)
            if m is None or not finite(m.get("estimate")):
                continue
            est = float(m["estimate"])
            lo, hi = m.get("ci_low"), m.get("ci_high")
            if lo is not None and hi is not None and finite(lo, hi):
                # A t interval from few boots can leave the metric's range (acceptance < 0);
                # draw it to the edge and mark the cut with an arrow instead of a cap.
                f_lo, f_hi = FEASIBLE[metric]
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
        if row < len(METRICS) - 1:  # arm names once, under the bottom panel
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
    """Figure 2: each arm minus baseline with its interval, the ± margin band and the verdict."""
    comps = list(analysis.get("comparisons") or [])
    arms = [a for a in analysis_arms(analysis) if any(c["arm"] == a for c in comps)]
    styles = arm_styles(analysis_arms(analysis))
    alpha = float(analysis.get("alpha", 0.05))
    fig = new_figure(10.5, 1.6 + 1.1 * max(1, len(arms)))
    axes = fig.subplots(1, 2)
    base = baseline_of(analysis) or "baseline"
    for ax, metric in zip(axes, METRICS, strict=True):
        rows = [c for c in comps if c["metric"] == metric]
        if not rows:
            no_data(ax, "no comparison\n(only one arm)")
            ax.set_title(METRIC_TITLES[metric], fontsize=10)
            continue
        margin = rows[0].get("margin")
        if finite(margin):
            ax.axvspan(
                -float(margin),
                float(margin),
                color="#BBBBBB",
                alpha=0.45,
                linewidth=0,
                label=f"± margin {float(margin):g}",
            )
        ax.axvline(0, color="black", linewidth=0.8)
        span = [float(margin) if finite(margin) else 0.0]
        for y, arm in enumerate(reversed(arms)):
            c = next((r for r in rows if r["arm"] == arm), None)
            if c is None:
                continue
            colour, marker = styles.get(arm, (OKABE_ITO[0], "o"))
            diff, lo, hi = c.get("difference"), c.get("ci_low"), c.get("ci_high")
            if finite(lo, hi):
                ax.hlines(y, float(lo), float(hi), color=colour, linewidth=2.5)
                span += [abs(float(lo)), abs(float(hi))]
            if finite(diff):
                ax.plot(
                    [float(diff)],
                    [y],
                    marker=marker,
                    markersize=9,
                    color=colour,
                    markeredgecolor="black",
                    markeredgewidth=0.5,
                )
                span.append(abs(float(diff)))
            verdict = str(c.get("verdict", "")).replace("_", " ")
            ax.annotate(
                verdict,
                xy=(1.02, y),
                xycoords=("axes fraction", "data"),
                va="center",
                ha="left",
                fontsize=10,
                fontweight="bold",
                color=VERDICT_COLOURS.get(str(c.get("verdict")), "#555555"),
            )
        lim = 1.15 * max(span) if max(span) > 0 else 1.0
        ax.set_xlim(-lim, lim)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=6, symmetric=True))  # uncrowded ticks
        ax.set_ylim(-0.7, len(arms) - 0.3)
        ax.set_yticks(range(len(arms)), list(reversed(arms)))
        unit = "" if metric == "acceptance_pos0" else " (tokens)"
        ax.set_xlabel(f"{METRIC_TITLES[metric].lower()}: arm − {base}{unit}")
        ax.set_title(METRIC_TITLES[metric], fontsize=10, loc="left")
        ax.grid(axis="x", alpha=0.3)
        ax.legend(loc="lower left", fontsize=8, frameon=False)
    fig.suptitle(
        f'Each arm minus the baseline arm "{base}", {1 - alpha:.0%} CI; verdict at right',
        x=0.01,
        ha="left",
        fontsize=12,
    )
    return fig


def _dodge(n: int, width: float = 0.24) -> list[float]:
    return [0.0] if n <= 1 else list(np.linspace(-width / 2, width / 2, n))


def plot_positions(analysis: Analysis, conditional: pd.DataFrame | None = None) -> Figure:
    """Figure 3: acceptance per draft position, cumulative and conditional, one line per arm.

    Cumulative = ΣA_k/ΣD (from the analysis `per_position`, simultaneous intervals).
    Conditional = ΣA_k/ΣA_{k-1}: from `conditional` (columns arm, position, estimate,
    ci_low, ci_high; `bench.stats.conditional_positions`) when given, else the
    analysis' point estimates `per_position[].conditional` without intervals.
    """
    arms = analysis_arms(analysis)
    styles = arm_styles(arms)
    fig = new_figure(10.5, 4.4)
    axes = fig.subplots(1, 2, sharex=True)
    cum_rows = [
        {"arm": a["arm"], **p} for a in analysis.get("arms", []) for p in a.get("per_position", [])
    ]
    if conditional is None:
        conditional = pd.DataFrame(  # the analysis has conditional point estimates only
            [
                {
                    "arm": a["arm"],
                    "position": p["position"],
                    "estimate": p["conditional"],
                    "ci_low": p["conditional"],
                    "ci_high": p["conditional"],
                }
                for a in analysis.get("arms", [])
                for p in a.get("per_position", [])
                if p.get("conditional") is not None
            ]
        )
    panels = (
        (axes[0], pd.DataFrame(cum_rows), "cumulative: P(first k+1 drafts accepted)\n(ΣA_k / ΣD)"),
        (axes[1], conditional, "conditional: P(k accepted | k−1 accepted)\n(ΣA_k / ΣA_k−1)"),
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
                yerr=[np.clip(est - lo, 0, None), np.clip(hi - est, 0, None)],
                color=colour,
                marker=marker,
                markersize=6,
                capsize=3,
                linewidth=1.6,
                markeredgecolor="black",
                markeredgewidth=0.4,
                label=arm,
            )
        ax.set_ylabel(ylabel)
        ax.set_xlabel("draft position k (0 = first draft token)")
        ax.grid(alpha=0.3)
        positions = sorted(set(df["position"].astype(int)))
        ax.set_xticks(positions)
    axes[0].set_title("Cumulative acceptance", loc="left", fontsize=10)
    axes[1].set_title("Conditional acceptance", loc="left", fontsize=10)
    if arms:
        handles, labels = axes[0].get_legend_handles_labels()
        add_legend(fig, handles, labels)
    replicated = any(int(a.get("boots") or 0) >= 2 for a in analysis.get("arms", []))
    note = "simultaneous intervals" if replicated else "1 boot per arm: no intervals"
    fig.suptitle(f"Acceptance per draft position ({note})", x=0.01, ha="left", fontsize=12)
    return fig
