"""Report figures 4-6: variance components and planning, boot/probe times, output identity.

Same rules as `acceptance_plots`: data in, `Figure` out, no pyplot, no I/O.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from bench.records import METRIC
from bench.report.figures.plot_style import (
    FIGURE_METRICS,
    METRIC_TITLES,
    add_legend,
    analysis_arms,
    arm_styles,
    new_figure,
    no_data,
)
from bench.stats import Analysis

# (column in variance_table, legend label, colour)
SD_BARS = (
    ("between_boot_sd", "SD of a boot's metric (what the CI uses)", "#0072B2"),
    ("boot", "σ boot: between-boot component", "#D55E00"),
    ("prompt", "σ prompt: between-prompt component", "#56B4E9"),
    ("residual", "σ residual: boot × prompt", "#999999"),
)


def plot_variance(components: pd.DataFrame, analysis: Analysis) -> Figure:
    """Figure 4: variance components per arm and the boots needed for the observed effect.

    `components` (from `bench.report.tables.variance_table`) has per arm and metric the
    crossed-ANOVA variances of the per-(boot, prompt) cell metric and the between-boot SD
    of the boot-level metric. Bars are SDs on a log axis (components span decades): prompts
    usually dominate a cell but cancel between arms, so the boot-level SD is what matters.
    Right: boots per arm for the analysis' power at max(|difference|, margin).
    """
    arms = analysis_arms(analysis) or list(dict.fromkeys(components.get("arm", [])))
    n = max(1, len(arms))
    fig = new_figure(11.0, 1.3 + 2 * (0.8 + 0.62 * n))
    grid = fig.add_gridspec(2, 2, width_ratios=[1.7, 1])
    width = 0.8 / len(SD_BARS)
    for row, metric in enumerate(FIGURE_METRICS):
        ax = fig.add_subplot(grid[row, 0])
        unit = METRIC[metric].unit or "share"
        ax.set_title(f"{METRIC_TITLES[metric]}: SD by source ({unit})", loc="left", fontsize=10)
        d = components[components["metric"] == metric] if len(components) else components
        d = d.set_index("arm").reindex([a for a in arms if a in set(d["arm"])]) if len(d) else d
        if d.empty:
            no_data(ax, "not available: needs ≥ 2 ok boots per arm")
            continue
        sds = np.column_stack(
            [
                d[col].to_numpy(dtype=float)
                if col == "between_boot_sd"
                else np.sqrt(d[col].to_numpy(dtype=float).clip(min=0))
                for col, _, _ in SD_BARS
            ]
        )
        positive = sds[np.isfinite(sds) & (sds > 0)]
        floor = positive.min() / 3 if positive.size else 1e-4
        y0 = np.arange(len(d))[::-1].astype(float)
        for j, (_, label, colour) in enumerate(SD_BARS):
            y = y0 + 0.4 - (j + 0.5) * width
            vals = sds[:, j]
            shown = np.where(np.isfinite(vals) & (vals > 0), vals, floor)
            ax.barh(
                y,
                shown,
                height=width * 0.92,
                color=colour,
                left=0,
                label=label if row == 0 else None,
            )
            for yi, v, sh in zip(y, vals, shown, strict=True):
                text = "n/a" if not np.isfinite(v) else ("0" if v <= 0 else f"{v:.2g}")
                ax.annotate(
                    text,
                    xy=(sh, yi),
                    xytext=(2, 0),
                    textcoords="offset points",
                    va="center",
                    fontsize=7,
                )
        ax.set_xscale("log")
        ax.set_xlim(floor, (positive.max() if positive.size else 1.0) * 4)
        ax.set_yticks(y0, list(d.index))
        ax.grid(axis="x", alpha=0.3, which="both")
        ax.set_axisbelow(True)  # grid behind the bars
        if row == len(FIGURE_METRICS) - 1:
            ax.set_xlabel("standard deviation (log scale; per-cell components, boot-level SD)")
    handles, labels = fig.axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(
            handles, labels, loc="outside lower center", ncols=2, frameon=False, fontsize=8.5
        )
    _plot_boots_needed(fig.add_subplot(grid[:, 1]), analysis)
    fig.suptitle(
        "Where the noise is, and how many boots the observed effect needs",
        x=0.01,
        ha="left",
        fontsize=12,
    )
    return fig


def _plot_boots_needed(ax: object, analysis: Analysis) -> None:
    from matplotlib.axes import Axes

    assert isinstance(ax, Axes)
    comps = [
        c for c in analysis.comparisons if c.boots_needed is not None and c.metric in FIGURE_METRICS
    ]
    base = analysis.baseline
    power = f"{analysis.settings.power:.0%}"
    if not comps:
        no_data(ax, "no boots-needed estimate\n(needs two arms with ≥ 2 ok boots)")
        ax.set_title(f"Boots per arm for {power} power", loc="left", fontsize=10)
        return
    labels, values = [], []
    for c in comps:
        short = METRIC[c.metric].short
        labels.append(f"{c.arm} ({short})")
        values.append(float(c.boots_needed or 0))
    y = np.arange(len(values))[::-1]
    shade = {m: ("#555555", "#AAAAAA")[i % 2] for i, m in enumerate(FIGURE_METRICS)}
    colours = [shade[c.metric] for c in comps]
    finite = [v for v in values if np.isfinite(v)]
    cap = max(finite) * 1.3 if finite else 1.0
    shown = [v if np.isfinite(v) else cap for v in values]
    ax.barh(y, shown, color=colours, height=0.6)
    for yi, v, s in zip(y, values, shown, strict=True):
        ax.annotate(
            f"{v:.0f}" if np.isfinite(v) else "∞ (no effect)",
            xy=(s, yi),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    booted = [a.boots for a in analysis.arms]
    if booted and min(booted) > 0:
        ax.axvline(
            min(booted),
            color="black",
            linestyle="--",
            linewidth=1,
            label=f"boots run ({min(booted)})",
        )
        ax.legend(loc="lower right", fontsize=8, frameon=False)
    if finite and max(finite) / max(min(finite), 1.0) > 50:
        ax.set_xscale("log")
    ax.set_yticks(y, labels)
    ax.set_xlim(right=cap * 1.25)
    ax.set_xlabel("boots per arm")
    ax.set_title(
        f"Boots/arm for {power} power vs {base}\n(effect = max(|difference|, margin))",
        loc="left",
        fontsize=10,
    )


def plot_timing(boots: pd.DataFrame, arms: list[str]) -> Figure:
    """Figure 5: boot time (start to /health) and probe time per boot attempt, launch order.

    Failed attempts are drawn as red crosses and listed under the plot with their errors.
    """
    arms = arms or list(dict.fromkeys(boots["arm"]))
    styles = arm_styles(arms)
    failed = boots[boots["status"] != "ok"] if len(boots) else boots
    # Inches for the list of failures under the plots: one monospace line per failure.
    extra = 0.17 * (min(len(failed), 8) + 2) if len(failed) else 0.0
    fig = new_figure(10.5, 5.0 + extra)
    grid = fig.add_gridspec(
        3 if len(failed) else 2, 1, height_ratios=[2.2, 2.2, extra] if len(failed) else [1, 1]
    )
    ax_boot = fig.add_subplot(grid[0])
    ax_probe = fig.add_subplot(grid[1], sharex=ax_boot)
    for ax, col, title in (
        (ax_boot, "boot_seconds", "Boot time (process start to /health ready)"),
        (ax_probe, "probe_seconds", "Probe time (warmup excluded)"),
    ):
        for arm in arms:
            colour, marker = styles[arm]
            d = boots[(boots["arm"] == arm) & (boots["status"] == "ok")]
            ax.plot(
                d["order"],
                d[col],
                linestyle="none",
                marker=marker,
                color=colour,
                markersize=7,
                markeredgecolor="black",
                markeredgewidth=0.4,
                label=arm,
            )
        if len(failed):
            ax.plot(
                failed["order"],
                failed[col].fillna(0.0),
                linestyle="none",
                marker="x",
                color="#D55E00",
                markersize=9,
                markeredgewidth=2,
                label="failed attempt (0 s if no time recorded)",
            )
        ax.set_ylabel("seconds")
        top = float(np.nanmax(boots[col].to_numpy(dtype=float), initial=0.0)) if len(boots) else 0
        ax.set_ylim(0, top * 1.12 if top > 0 else 1.0)  # room for the top marker
        ax.grid(axis="y", alpha=0.3)
        ax.set_title(title, loc="left", fontsize=10)
    ax_boot.tick_params(axis="x", labelbottom=False)
    ax_probe.set_xlabel("launch order (global boot attempt #)")
    ax_probe.xaxis.set_major_locator(MaxNLocator(integer=True))
    if boots.empty:
        for ax in (ax_boot, ax_probe):
            no_data(ax, "no boot attempts yet")
    handles, labels = ax_boot.get_legend_handles_labels()
    if handles:
        add_legend(fig, handles, labels)
    if len(failed):
        ax_txt = fig.add_subplot(grid[2])
        ax_txt.axis("off")
        lines = [f"Failed attempts ({len(failed)}):"]
        for _, r in failed.head(8).iterrows():
            err = " ".join(str(r.get("error") or "no error recorded").split())
            lines.append(
                textwrap.shorten(
                    f"#{r['order']} {r['arm']} boot {r['boot']} attempt {r['attempt']}: {err}",
                    width=120,
                    placeholder=" …",
                )
            )
        if len(failed) > 8:
            lines.append(f"… and {len(failed) - 8} more (see the report table)")
        ax_txt.text(
            0,
            1,
            "\n".join(lines),
            va="top",
            ha="left",
            fontsize=8.5,
            family="monospace",
            transform=ax_txt.transAxes,
        )
    fig.suptitle("Time per boot attempt", x=0.01, ha="left", fontsize=12)
    return fig


def plot_output_identity(identity: pd.DataFrame, temperature: float | None = None) -> Figure:
    """Figure 6: probes whose greedy output differs from the baseline's, per arm.

    `identity` comes from `bench.report.tables.output_identity` (one row per arm and probe
    set). Any non-zero bar means the arms did different work, so their acceptance is not
    directly comparable; at temperature > 0 differences are expected (the title says so).
    """
    fig = new_figure(9.0, 1.9 + 0.55 * max(1, len(identity)))
    ax = fig.add_subplot()
    if identity.empty:
        no_data(ax, "only one arm: nothing to compare")
        return fig
    labels = [f"{r.arm} · {r.probe_set}" for r in identity.itertuples()]
    y = np.arange(len(identity))[::-1]
    total = identity["probes"].to_numpy(dtype=float)
    differ = identity["differ_from_baseline"].to_numpy(dtype=float)
    ax.barh(y, total, color="#DDDDDD", height=0.6, label="probes compared")
    ax.barh(y, differ, color="#D55E00", height=0.6, label="output differs from baseline")
    for yi, d, t in zip(y, differ, total, strict=True):
        ax.annotate(
            f"{d:.0f} / {t:.0f}",
            xy=(t, yi),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=9,
        )
    ax.set_yticks(y, labels)
    ax.set_xlim(0, max(total.max(), 1) * 1.18)
    ax.set_xlabel("probes (count)")
    fig.legend(loc="outside lower center", ncols=2, frameon=False, fontsize=9)
    title = "Output identity: probes whose text differs from the baseline"
    if temperature:  # sampled text differs by design; say so on the figure itself
        title += f"\n(sampled at temperature {temperature:g}: differences are expected)"
    fig.suptitle(
        title,
        x=0.01,
        ha="left",
        fontsize=12,
    )
    return fig
