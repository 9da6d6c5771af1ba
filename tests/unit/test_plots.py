"""Report figures: they draw the analysis' numbers, stay readable, and touch no pyplot state."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from bench import stats
from bench.records import Manifest, Results
from bench.report import analyze_results, build_figures, per_boot_frame, tables
from bench.report.figures import (
    plot_boot_strip,
    plot_forest,
    plot_output_identity,
    plot_positions,
    plot_timing,
    plot_variance,
)
from bench.simulate import simulate_frames, simulate_results, simulated_manifest
from bench.stats import Analysis, AnalysisOptions
from bench.store import load_results

MINIMAL = simulated_manifest({"base": 0.0}).to_json()  # a manifest whose spec is replaced


@pytest.fixture(scope="module")
def loaded(sim_results_dir: Path) -> tuple[Results, Analysis]:
    results = load_results(sim_results_dir)
    return results, analyze_results(results, options=AnalysisOptions(n_resamples=200))


def _probe(arm: str, boot_id: str, pid: str, drafts: int, acc: list[int], sha: str) -> dict:
    return {
        "arm": arm,
        "boot": int(boot_id[-1]),
        "boot_id": boot_id,
        "probe_set": "s",
        "probe_id": pid,
        "num_drafts": drafts,
        "num_accepted_tokens": sum(acc),
        "accepted_per_pos": acc,
        "output_sha256": sha,
    }


def test_per_boot_metrics_are_ratios_of_sums_within_each_boot() -> None:
    # Prompt-weighted mean of ratios would give pos0 (1/10 + 27/30)/2 = 0.5; the ratio of
    # sums gives 28/40: unequal drafts make the two estimands differ.
    probes, boots = simulate_frames({"a": 0.0}, boots=2, prompts=2, seed=1)
    cells = {
        ("a__b000__a1", "p0000"): (10, [1, 0]),
        ("a__b000__a1", "p0001"): (30, [27, 9]),
        ("a__b001__a1", "p0000"): (5, [5, 5]),
        ("a__b001__a1", "p0001"): (5, [4, 1]),
    }
    key = list(zip(probes["boot_id"], probes["probe_id"], strict=True))
    probes["num_drafts"] = [cells[k][0] for k in key]
    probes["accepted_per_pos"] = [cells[k][1] for k in key]
    probes["num_accepted_tokens"] = [sum(cells[k][1]) for k in key]
    boots["order"] = [7, 0]  # boot 1 launched first
    analysis = stats.analyze(
        Results(probes=probes, boots=boots, manifest=simulated_manifest({"a": 0.0})),
        options=AnalysisOptions(n_resamples=0),
    )
    out = per_boot_frame(analysis)
    assert list(out["boot_id"]) == ["a__b001__a1", "a__b000__a1"]  # launch order
    b0 = out.set_index("boot_id").loc["a__b000__a1"]
    assert b0["acceptance_pos0"] == pytest.approx(28 / 40)  # not (0.1 + 0.9) / 2
    assert b0["mean_accepted_length"] == pytest.approx(1 + 37 / 40)
    assert b0["order"] == 7 and b0["drafts"] == 40


def test_output_identity_counts_differing_and_unstable_probes() -> None:
    rows = [
        _probe("base", "base0", "p0", 1, [1], "x"),
        _probe("base", "base1", "p0", 1, [1], "x"),
        _probe("base", "base0", "p1", 1, [1], "y"),
        _probe("fix", "fix0", "p0", 1, [1], "x"),
        _probe("fix", "fix1", "p0", 1, [1], "z"),  # fix disagrees with itself on p0
        _probe("fix", "fix2", "p0", 1, [1], "x"),
        _probe("fix", "fix0", "p1", 1, [1], "q"),  # fix differs from base on p1
        _probe("fix", "fix0", "p2", 1, [1], "r"),  # p2 not in base: not compared
    ]
    ident = tables.output_identity(pd.DataFrame(rows), "base", ["base", "fix"])
    assert ident.to_dict("records") == [
        {
            "arm": "fix",
            "baseline": "base",
            "probe_set": "s",
            "probes": 2,
            "differ_from_baseline": 1,
            "unstable_within_arm": 1,
        }
    ]


def _data_points(ax: Any) -> list[tuple[float, float]]:
    pts = []
    for line in ax.get_lines():
        if line.get_gid() == "apart":  # a ring around a boot in a second mode, not a boot
            continue
        if line.get_linestyle() == "None" and line.get_marker() not in ("", "None", None):
            pts += list(zip(line.get_xdata(), line.get_ydata(), strict=True))
    return pts


def test_strip_plot_draws_every_ok_boot_at_its_launch_order(
    loaded: tuple[Results, Analysis],
) -> None:
    results, analysis = loaded
    fig = plot_boot_strip(analysis)
    strip_pos0 = fig.axes[0]
    ok = results.ok_boots()
    assert len(_data_points(strip_pos0)) == len(ok) == 15
    xs = sorted(x for x, _ in _data_points(strip_pos0))
    assert xs == sorted(ok["order"].tolist())
    # The estimate panel's error bars span exactly the analysis interval of each arm.
    est_ax = fig.axes[1]
    segments = [
        seg for c in est_ax.collections if isinstance(c, LineCollection) for seg in c.get_segments()
    ]
    spans = sorted((round(s[0][1], 9), round(s[1][1], 9)) for s in segments if len(s) == 2)
    want = sorted(
        (
            round(a.metrics["acceptance_pos0"].ci_low or np.nan, 9),
            round(a.metrics["acceptance_pos0"].ci_high or np.nan, 9),
        )
        for a in analysis.arms
    )
    assert spans == want


def test_forest_shows_each_verdict_its_interval_and_the_margin_band(
    loaded: tuple[Results, Analysis],
) -> None:
    _, analysis = loaded
    fig = plot_forest(analysis)
    for ax, metric in zip(fig.axes, ("acceptance_pos0", "mean_accepted_length"), strict=True):
        comps = [c for c in analysis.comparisons if c.metric == metric]
        words = sorted(t.get_text() for t in ax.texts)
        assert words == sorted(c.verdict.replace("_", " ") for c in comps)
        band = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_width() > 0]
        margin = comps[0].margin
        assert any(
            np.isclose(p.get_x(), -margin) and np.isclose(p.get_x() + p.get_width(), margin)
            for p in band
        )
        # thick segments: the intervals the verdicts rest on; thin: the raw ones
        segs: dict[float, list[tuple[float, float]]] = {1.0: [], 3.0: []}
        for col in ax.collections:
            if isinstance(col, LineCollection):
                width = round(float(col.get_linewidth()[0]), 1)
                segs[width] += [(round(s[0][0], 9), round(s[1][0], 9)) for s in col.get_segments()]
        segs = {w: sorted(v) for w, v in segs.items()}
        assert segs[3.0] == sorted(
            (round(c.verdict_ci[0], 9), round(c.verdict_ci[1], 9)) for c in comps
        )  # type: ignore[index]
        assert segs[1.0] == sorted((round(c.ci_low, 9), round(c.ci_high, 9)) for c in comps)  # type: ignore[arg-type]
    # This simulated fix is a real gain: the figure must say so.
    assert "improved" in [t.get_text() for ax in fig.axes for t in ax.texts]


def test_conditional_positions_match_direct_ratios(
    loaded: tuple[Results, Analysis],
) -> None:
    results, analysis = loaded
    p = results.probes[results.probes["arm"] == "baseline"]
    acc = np.vstack(p["accepted_per_pos"].to_numpy()).sum(axis=0)
    want = [acc[0] / p["num_drafts"].sum()] + [acc[k] / acc[k - 1] for k in range(1, acc.size)]
    base = analysis.arm("baseline")
    assert base is not None
    got = [pos.conditional for pos in base.per_position]
    assert np.allclose(got, want)
    for pos in base.per_position:
        assert pos.conditional_ci_low < pos.conditional < pos.conditional_ci_high  # type: ignore[operator]
    fig = plot_positions(analysis)
    for ax in fig.axes[:2]:
        assert {str(c.get_label()) for c in ax.containers} == set(results.arms())


def test_one_speculative_token_figures(tmp_path: Path) -> None:
    """K = 1: every figure renders; the position figure has one position."""
    results = load_results(simulate_results(tmp_path / "k1", {"a": 0.0, "b": 0.2}, positions=1))
    analysis = analyze_results(results, options=AnalysisOptions(n_resamples=0))
    figures = build_figures(results, analysis)
    pos = figures["fig3_positions"]
    assert [list(ax.get_xticks()) for ax in pos.axes[:2]] == [[0.0], [0.0]]
    for name, fig in figures.items():
        assert _overlaps(fig) == [], name


def test_timing_marks_and_lists_failed_attempts(
    loaded: tuple[Results, Analysis],
) -> None:
    results, _ = loaded
    fig = plot_timing(results.boots, results.arms())
    crosses = [
        line
        for line in fig.axes[0].get_lines()
        if isinstance(line, Line2D) and line.get_marker() == "x"
    ]
    assert len(crosses) == 1 and list(crosses[0].get_xdata()) == [1]
    listed = " ".join(t.get_text() for ax in fig.axes for t in ax.texts)
    assert "aux-fix boot 0 attempt 1: simulated failure" in listed


def _overlaps(fig: Figure) -> list[tuple[str, str]]:
    """Pairs of visible, non-empty text artists whose rendered boxes overlap."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    hidden = set()  # tick labels of ticks outside the view are not drawn
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            eps = 1e-9 * max(1.0, abs(hi - lo))
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not lo - eps <= tick.get_loc() <= hi + eps:
                    hidden |= {id(tick.label1), id(tick.label2)}
    boxes = []
    for t in fig.findobj(Text):
        if id(t) in hidden or not t.get_visible() or not t.get_text().strip():
            continue
        bb = t.get_window_extent(renderer).expanded(0.98, 0.9)  # ignore touching edges
        boxes.append((t.get_text(), bb))
    return [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2) if ba.overlaps(bb)]


def test_figures_have_no_overlapping_text_and_leave_pyplot_alone(
    loaded: tuple[Results, Analysis],
) -> None:
    import matplotlib.pyplot as plt

    results, analysis = loaded
    before = plt.get_fignums()
    figures = build_figures(results, analysis)
    assert list(figures) == [
        "fig1_boots",
        "fig2_forest",
        "fig3_positions",
        "fig4_variance",
        "fig5_timing",
        "fig6_identity",
        "fig7_speed",
        "fig8_accepted_length",
    ]
    assert plt.get_fignums() == before  # no pyplot figure was created
    for name, fig in figures.items():
        assert _overlaps(fig) == [], name
    labels = {
        name: " ".join(ax.get_xlabel() + " " + ax.get_ylabel() for ax in fig.axes)
        for name, fig in figures.items()
    }
    assert "accepted / drafts" in labels["fig1_boots"] and "tokens" in labels["fig1_boots"]
    assert "launch order" in labels["fig1_boots"]
    assert "(tokens)" in labels["fig2_forest"]
    assert "draft position" in labels["fig3_positions"]
    assert "standard deviation" in labels["fig4_variance"]
    assert "seconds" in labels["fig5_timing"]
    assert "probes (count)" in labels["fig6_identity"]
    assert "tokens/s" in labels["fig7_speed"] and "launch order" in labels["fig7_speed"]
    assert "share of verify steps" in labels["fig8_accepted_length"]


def test_identity_figure_and_variance_figure_degrade_without_data(tmp_path: Path) -> None:
    empty_identity = tables.output_identity(pd.DataFrame(), "a", ["a"])
    fig = plot_output_identity(empty_identity)
    assert "nothing to compare" in " ".join(t.get_text() for t in fig.axes[0].texts)
    one = analyze_results(load_results(simulate_results(tmp_path / "one", {"a": 0.0}, boots=1)))
    fig = plot_variance(tables.variance_table(one), one)
    assert "not available" in " ".join(t.get_text() for ax in fig.axes for t in ax.texts)


def test_identity_summary_warns_for_greedy_and_not_for_sampled_probes() -> None:
    ident = pd.DataFrame(
        [
            {
                "arm": "fix",
                "baseline": "base",
                "probe_set": "s",
                "probes": 20,
                "differ_from_baseline": 20,
                "unstable_within_arm": 0,
            }
        ]
    )
    greedy = tables.identity_summary(ident, "base", 0.0)
    assert greedy.startswith("**Generated text differs from base** (fix: 20 of 20 (s))")
    sampled = tables.identity_summary(ident, "base", 0.8)
    assert "temperature 0.8" in sampled and "expected" in sampled and "**" not in sampled
    sampled_run = Manifest.model_validate({**MINIMAL, "spec": {"probes": {"temperature": 0.8}}})
    assert tables.probe_temperature(sampled_run) == 0.8
    assert tables.probe_temperature(Manifest.model_validate({**MINIMAL, "spec": {}})) is None
    assert tables.probe_temperature(Manifest.model_validate(MINIMAL)) is None
    title = plot_output_identity(ident, 0.8)._suptitle
    assert title is not None and "differences are expected" in title.get_text()
