"""`specab report`: a full report from stored results, self-contained, atomic, user errors."""

from __future__ import annotations

import base64
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.cli import run
from bench.errors import SpecabError
from bench.records import short_name
from bench.report import render_report
from bench.simulate import simulate_results
from bench.stats import AnalysisOptions

FILES = {
    "report.md",
    "report.html",
    "analysis.json",
    *(
        f"{s}.png"
        for s in (
            "fig1_boots",
            "fig2_forest",
            "fig3_positions",
            "fig4_variance",
            "fig5_timing",
            "fig6_identity",
            "fig7_speed",
            "fig8_accepted_length",
        )
    ),
}


@pytest.fixture(scope="module")
def rendered(sim_results_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One full report of the shared simulated results (rendered once: ~5 s)."""
    out = tmp_path_factory.mktemp("report")
    render_report(sim_results_dir, out, options=AnalysisOptions(n_resamples=500))
    return out


def test_report_has_every_file_and_a_self_contained_html(rendered: Path) -> None:
    assert {p.name for p in rendered.iterdir()} == FILES
    page = (rendered / "report.html").read_text()
    images = re.findall(r'<img [^>]*src="([^"]*)"', page)
    assert len(images) == 8
    assert all(src.startswith("data:image/png;base64,") for src in images)
    assert not re.search(r"<(link|script)\b", page)  # nothing fetched from elsewhere
    # The embedded images are the PNGs written beside it; the forest of differences leads.
    first = base64.b64decode(images[0].split(",", 1)[1])
    assert first == (rendered / "fig2_forest.png").read_bytes()
    assert first[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_states_verdicts_why_provenance_failures_and_identity(rendered: Path) -> None:
    md = (rendered / "report.md").read_text()
    analysis = json.loads((rendered / "analysis.json").read_text())
    for c in analysis["comparisons"]:
        row = next(
            line
            for line in md.splitlines()
            if line.startswith(f"| {c['arm']} | {short_name(c['metric'])} |")
        )
        assert f"| {c['verdict']} |" in row
        assert " ".join(c["why"].split()) in row  # the analysis' own sentence
    verdicts = {(c["arm"], c["metric"]): c["verdict"] for c in analysis["comparisons"]}
    assert verdicts[("aux+rope-fix", "mean_accepted_length")] == "improved"
    # Provenance: patches (name + sha prefix), overlays, versions, hosts, GPUs.
    assert "aux_fix (abababababab)" in md
    assert '{"partial_rotary_factor":1.0}' in md
    assert 'env.DSPARK_AUX_FIX="1"' in md  # what else differs from the baseline definition
    assert "vLLM sim; hosts sim-host; GPUs sim-gpu" in md
    assert "| aux-fix | 0000000000000" not in md
    # The failed attempt, with its error; the output-identity counts.
    assert "simulated failure: server exited during startup" in md
    assert "aux+rope-fix: 3 of 40" in md
    assert "1 probe(s) of aux-fix" in md  # nondeterminism within an arm is reported
    for name in FILES - {"report.md", "report.html", "analysis.json"}:
        assert f"]({name})" in md


def test_cli_report_writes_into_results_dir_by_default(
    sim_results_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "r"
    shutil.copytree(sim_results_dir, results)
    assert run(["report", str(results), "--margin-length", "0.5"]) == 0
    out = capsys.readouterr().out
    assert f"report {results / 'report' / 'report.html'}" in out
    assert {p.name for p in (results / "report").iterdir()} == FILES
    # Options reach the analysis: a 0.5-token margin swallows the observed gain.
    analysis = json.loads((results / "report" / "analysis.json").read_text())
    length = [c for c in analysis["comparisons"] if c["metric"] == "mean_accepted_length"]
    assert {c["margin"] for c in length} == {0.5}
    assert all(c["verdict"] != "improved" for c in length)


def test_user_errors_are_one_line_and_write_nothing(
    sim_results_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["report", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "results directory not found" in err and "Fix:" in err
    out = tmp_path / "out"
    assert run(["report", str(sim_results_dir), "--out", str(out), "--baseline", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--baseline" in err and "nope" in err
    assert not out.exists()


def test_a_failure_while_rendering_leaves_no_half_written_report(
    sim_results_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_a: object, **_k: object) -> None:
        raise RuntimeError("injected plot failure")

    monkeypatch.setattr("bench.report.render.plot_output_identity", broken)  # the last figure
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="injected"):
        render_report(sim_results_dir, out, options=AnalysisOptions(n_resamples=0))
    assert not out.exists() or not any(out.iterdir())


def test_single_arm_results_render_without_comparisons(tmp_path: Path) -> None:
    results = simulate_results(tmp_path / "one", {"only": 0.0}, boots=3, prompts=10)
    page = render_report(results, options=AnalysisOptions(n_resamples=0))
    md = page.with_name("report.md").read_text()
    assert "Only one arm: nothing to compare." in md
    assert page.stat().st_size > 0 and len(list(page.parent.glob("*.png"))) == 8


def test_unreplicated_arm_says_so_instead_of_a_verdict(tmp_path: Path) -> None:
    results = simulate_results(tmp_path / "b1", {"a": 0.0, "b": 0.3}, boots=1, prompts=10)
    page = render_report(results, options=AnalysisOptions(n_resamples=0))
    md = page.with_name("report.md").read_text()
    assert "unreplicated" in md and "| inconclusive |" in md
    with pytest.raises(SpecabError):
        render_report(
            tmp_path / "b1" / "boots", options=AnalysisOptions(n_resamples=0)
        )  # not a results directory


def test_a_results_dir_without_boots_yet_still_renders(tmp_path: Path) -> None:
    from bench.simulate import simulated_manifest
    from bench.store import ResultsWriter

    root = tmp_path / "started"
    ResultsWriter.create(root, simulated_manifest({"a": 0.0, "b": 0.0}))
    page = render_report(root, options=AnalysisOptions(n_resamples=0))
    md = page.with_name("report.md").read_text()
    assert "| b | pos0 | primary | — [—, —] |" in md and "| inconclusive |" in md
    assert "0 failed boot attempt(s)" in md


def test_each_verdict_shows_the_interval_it_rests_on_beside_the_raw_one(rendered: Path) -> None:
    md = (rendered / "report.md").read_text()
    analysis = json.loads((rendered / "analysis.json").read_text())
    header = next(line for line in md.splitlines() if line.startswith("| arm | metric |"))
    assert "difference [raw 95% CI]" in header and "verdict interval" in header
    for c in analysis["comparisons"]:
        row = next(
            line
            for line in md.splitlines()
            if line.startswith(f"| {c['arm']} | {short_name(c['metric'])} |")
        )
        lo, hi = c["verdict_ci"]
        f = "{:+.4f}".format if c["scale"] == "absolute" else lambda x: f"{100 * x:+.1f} %"
        assert f"[{f(lo)}, {f(hi)}]" in row and f"[{f(c['ci_low'])}, {f(c['ci_high'])}]" in row
        kind = "TOST" if c["verdict"] == "equivalent" else "Holm"
        assert f"{kind} interval" in row


def test_one_speculative_token_report(tmp_path: Path) -> None:
    results = simulate_results(
        tmp_path / "k1", {"a": 0.0, "b": 0.2}, boots=3, prompts=20, positions=1
    )
    page = render_report(results, options=AnalysisOptions(n_resamples=0))
    assert {p.name for p in page.parent.iterdir()} == FILES
    analysis = json.loads(page.with_name("analysis.json").read_text())
    assert [len(a["per_position"]) for a in analysis["arms"]] == [1, 1]


def test_end_of_run_falls_back_to_pooled_numbers_labelled_not_a_verdict(
    tmp_path: Path, print_end_of: Callable[..., Any]
) -> None:
    """Boots of one arm that ran different probe sets make the analysis refuse the data;
    run-ab's end still shows the pooled ratios of the boots' /metrics deltas, and says they
    are not a verdict."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq
    from rich.console import Console

    root = simulate_results(tmp_path / "z", {"a": 0.0, "b": 0.0}, boots=2, prompts=5)
    path = root / "probes" / "b__b001__a1.parquet"
    rows = pq.read_table(path).to_pylist()
    for r in rows:
        r.update(probe_set="other")
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)
    console = Console(record=True, width=200)
    assert print_end_of(root, console, {}) is None  # no analysis, so no report either
    text = console.export_text()
    assert "no verdict:" in text and "different probe sets" in text and "NOT A VERDICT" in text
    ok = pd.concat(pd.read_parquet(p) for p in sorted((root / "boots").glob("a__*.parquet")))
    pos0 = sum(int(x[0]) for x in ok["accepted_per_pos"]) / ok["num_drafts"].sum()
    assert f"{pos0:.4f}" in text  # arm a's pooled pos0, from its boot rows
    assert not (root / "report").exists()
