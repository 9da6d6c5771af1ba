"""Speed, speedup, accepted length and categories in the report, the end-of-run printout and
`specab analyze`'s human view (a no-speculation arm and categorized probes)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from test_plots import _overlaps

from bench.cli import run
from bench.report import (
    analyze_results,
    arm_summary,
    build_figures,
    category_table,
    render_report,
    speed_table,
)
from bench.simulate import simulate_results
from bench.stats import AnalysisOptions
from bench.store import load_results


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return simulate_results(
        tmp_path_factory.mktemp("speedrep") / "sr",
        {"nospec": 0.0, "base": 0.0, "fix": 0.3},
        boots=4,
        prompts=24,
        baseline="base",
        no_spec=["nospec"],
        speed={"nospec": 1.0, "base": 1.6, "fix": 1.5},
        categories=["code", "chat"],
        failed_boots={"nospec": 0, "base": 1, "fix": 0},
    )


def test_report_has_speed_speedup_accepted_length_and_categories(results: Path) -> None:
    page = render_report(results, results.parent / "out", options=AnalysisOptions(n_resamples=0))
    names = {p.name for p in page.parent.iterdir()}
    assert {"fig7_speed.png", "fig8_accepted_length.png", "fig9_categories.png"} <= names
    md = page.with_name("report.md").read_text()
    for heading in ("## Speed", "## Speedup over no speculation",
                    "## Accepted length per verify step", "## By category"):  # fmt: skip
        assert heading in md
    analysis = json.loads(page.with_name("analysis.json").read_text())
    assert analysis["breakdown"]["by"] == "category"  # categories exist: broken down by them
    assert "| nospec | 4 | 0 | — | no speculation | no speculation |" in md  # arms table
    ups = {s["arm"]: s for s in analysis["speedups"]}
    assert f"{ups['fix']['speedup']:.3f}x [{ups['fix']['ci_low']:.3f}" in md
    fix = next(c for c in analysis["comparisons"] if c["arm"] == "fix" and c["metric"] ==
               "output_tokens_per_s")  # fmt: skip
    assert f"{fix['ratio']:.3f} [{fix['ratio_ci_low']:.3f}, {fix['ratio_ci_high']:.3f}]" in md
    assert "Speed is secondary" in md
    html = page.read_text()
    assert html.count("<img ") == 9


def test_speed_tables_and_figures_from_the_analysis(results: Path) -> None:
    r = load_results(results)
    analysis = analyze_results(r, options=AnalysisOptions(n_resamples=0))
    sp = speed_table(analysis).set_index("arm")
    assert sp.loc["base", "ratio to base [raw 95% CI]"] == "baseline"
    assert sp.loc["nospec", "speculative"] == "no" and sp.loc["nospec", "verdict"] == "regressed"
    cats = category_table(analysis)
    assert set(cats["category"]) == {"code", "chat"}
    assert set(cats[cats["arm"] == "nospec"]["metric"]) == {"tokens/s"}  # speed only
    summary = arm_summary(analysis).set_index("arm")
    assert summary.loc["nospec", "pos0"] == "no speculation"
    assert summary.loc["fix", "pos0"] == "improved" and summary.loc["base", "pos0"] == "baseline"
    assert summary.loc["fix", "speedup"].endswith("]") and "x [" in summary.loc["fix", "speedup"]
    figures = build_figures(r, analysis)
    assert list(figures)[-3:] == ["fig7_speed", "fig8_accepted_length", "fig9_categories"]
    for name in ("fig1_boots", "fig7_speed", "fig8_accepted_length", "fig9_categories"):
        assert _overlaps(figures[name]) == [], name
    # the acceptance figure leaves the arm without drafts out instead of an empty slot
    est_axis = figures["fig1_boots"].axes[3]  # bottom row's arm estimates (names shown)
    assert [t.get_text() for t in est_axis.get_xticklabels()] == ["base", "fix"]


def test_end_of_run_prints_tokens_per_s_and_the_speed_verdict(
    results: Path, print_end_of: Callable[..., Any]
) -> None:
    buf = io.StringIO()
    print_end_of(results, Console(file=buf, width=240), {})
    text = buf.getvalue()
    assert "per arm: acceptance verdicts and speed" in text
    assert "tokens/s [95% CI]" in text and "speed verdict" in text
    assert "no speculation" in text and "regressed" in text
    analysis = analyze_results(load_results(results))
    fix = next(a for a in analysis.arms if a.arm == "fix").metrics["output_tokens_per_s"]
    assert f"{fix.estimate:.1f} [{fix.ci_low:.1f}, {fix.ci_high:.1f}]" in text


def test_analyze_human_view_with_speed_and_by(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["analyze", str(results), "--resamples", "0", "--by", "category"]) == 0
    text = capsys.readouterr().out
    assert "tokens/s" in text and "no speculation" in text and "secondary" in text
    assert "speedup fix over nospec" in text and "By category" in text
    assert run(["analyze", str(results), "--json", "--resamples", "0", "--by", "probe_set"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["breakdown"]["by"] == "probe_set"
    assert run(["analyze", str(results), "--split-arm", "nospec"]) == 0
    assert "tokens/s" in capsys.readouterr().out
    assert run(["report", str(results), "--out", str(results.parent / "r2"), "--by", "nope"]) == 2
    assert "--by" in capsys.readouterr().err


def test_two_boots_an_arm_name_their_intervals_and_an_arm_without_boots_says_so(
    tmp_path: Path, print_end_of: Callable[..., Any]
) -> None:
    """At 2 boots an arm an interval rests on 1 degree of freedom ([2.8, 3478.5]): it is
    printed and marked; a stopped run's arm with no ok boot has no verdict."""
    res = simulate_results(
        tmp_path / "small",
        {"base": 0.0, "fix": 0.1, "gone": 0.0},
        boots={"base": 2, "fix": 2, "gone": 0},
        failed_boots={"base": 0, "fix": 0, "gone": 2},
        prompts=12,
        speed={"base": 1.0, "fix": 1.0, "gone": 1.0},
        sigma_speed_boot=0.4,
    )
    buf = io.StringIO()
    print_end_of(res, Console(file=buf, width=300), {})
    text = buf.getvalue()
    analysis = analyze_results(load_results(res))
    fix = next(a for a in analysis.arms if a.arm == "fix").metrics["output_tokens_per_s"]
    assert fix.df is not None and fix.df < 2
    assert fix.too_few_boots
    assert f"{fix.estimate:.1f} [{fix.ci_low:.1f}, {fix.ci_high:.1f}] (too few boots)" in text
    comparison = next(
        c for c in analysis.comparisons if c.arm == "fix" and c.metric == "output_tokens_per_s"
    )
    assert comparison.too_few_boots
    assert f"{100 * comparison.ci_high:+.1f} %] (too few boots)" in text  # the comparison too
    summary = arm_summary(analysis).set_index("arm")
    assert summary.loc["gone", "pos0"] == "no ok boots"
    assert summary.loc["gone", "speed verdict"] == "no ok boots"
    fig = build_figures(load_results(res), analysis)["fig7_speed"]
    ratio_axis = next(a for a in fig.axes if a.get_xlabel().startswith("ratio of output"))
    assert ratio_axis.get_xscale() == "log"  # as its label says
