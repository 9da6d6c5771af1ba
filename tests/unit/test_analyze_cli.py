"""`specab analyze` / `specab plan` through bench.cli.run on simulated results directories."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from bench.cli import run
from bench.simulate import simulate_results
from bench.stats import AnalysisOptions


def _primary(out: dict) -> list[dict]:  # type: ignore[type-arg]
    return [c for c in out["comparisons"] if c["family"] == "primary"]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli") / "exp"
    return simulate_results(root, {"base": 0.0, "fix": 0.2}, boots=5, prompts=60)


def test_analyze_json_is_the_object_alone(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["analyze", str(results), "--json", "--resamples", "500"]) == 0
    out = json.loads(capsys.readouterr().out)  # stdout holds exactly one JSON object
    assert out["schema_version"] == 1 and out["experiment"] == "sim"
    assert {c["verdict"] for c in _primary(out)} == {"improved"}
    for c in _primary(out):  # the confidence of the interval the verdict rests on
        assert c["verdict_ci_kind"] == "holm" and c["verdict_ci_level"] in (0.025, 0.05)
        assert c["verdict_ci_confidence"] == pytest.approx(1 - c["verdict_ci_level"])


def test_analyze_human_output_has_verdicts_and_why(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["analyze", str(results), "--json", "--resamples", "0"]) == 0
    d = json.loads(capsys.readouterr().out)["comparisons"][0]["difference"]
    # margin = the estimate itself: the interval excludes 0 and crosses the margin
    assert run(["analyze", str(results), "--resamples", "500", "--margin-pos0", str(d)]) == 0
    text = capsys.readouterr().out
    assert "Each arm vs base" in text and "Arms" in text
    assert "small_improvement" in text and "excludes 0" in text and "may be too small" in text
    assert run(["analyze", str(results), "--resamples", "0", "--margin-pos0", "0.5"]) == 0
    text = capsys.readouterr().out
    assert "fix pos0: equivalent" in text and "lies inside ±0.500" in text


def test_tables_keep_metric_names_whole_in_a_pipe(
    results: Path, capsys: pytest.CaptureFixture[str], print_end_of: Callable[..., Any]
) -> None:
    # stdout is captured (not a terminal): rich alone would cut run-ab's and the demo's
    # end-of-run verdict table to 80 columns ("acceptanc…" in a CI log)
    from bench.report import table_console

    console = table_console()
    assert console.width >= 120
    print_end_of(results, console, {})
    text = capsys.readouterr().out
    assert "mean length" in text and "length/request" in text and "tokens/s" in text
    # a terminal narrower than the table folds cells instead of cutting them
    narrow = Console(file=io.StringIO(), width=60)
    print_end_of(results, narrow, {})
    assert "…" not in narrow.file.getvalue()
    # the same for `specab analyze`'s own view, breakdown included
    from bench import stats
    from bench.report import render_analysis
    from bench.store import load_results

    loaded = load_results(results)
    result = stats.analyze(
        loaded,
        options=AnalysisOptions(n_resamples=0, by="probe_set"),
    )
    narrow = Console(file=io.StringIO(), width=60)
    render_analysis(result, narrow)
    assert "…" not in narrow.file.getvalue()


def test_analyze_options_change_the_answer(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["analyze", str(results), "--json", "--baseline", "fix", "--alpha", "0.01"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["alpha"] == 0.01 and out["comparisons"][0]["arm"] == "base"
    assert {c["verdict"] for c in _primary(out)} == {"regressed"}


def test_split_arm_and_looks(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["analyze", str(results), "--split-arm", "base", "--json"]) == 0
    split = json.loads(capsys.readouterr().out)
    assert split["splits"] == 10 and split["exhaustive"]
    assert run(["analyze", str(results), "--looks", "3,6,10", "--resamples", "0"]) == 0
    assert "sequential: " in capsys.readouterr().out


def test_plan_prints_boots_and_prompts(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["plan", str(results), "--effect", "0.005"]) == 0
    text = capsys.readouterr().out
    assert "boots per arm:" in text and "prompts per boot" in text
    assert run(["plan", str(results), "--effect", "0.005", "--json"]) == 0
    p = json.loads(capsys.readouterr().out)
    assert p["boots_per_arm"] >= 2 and p["prompts_per_boot"] >= 1
    assert (
        run(
            ["plan", str(results), "--effect", "0.05", "--json", "--metric", "mean_accepted_length"]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["metric"] == "mean_accepted_length"


def test_plan_covers_every_comparison_of_the_primary_family(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two arms against the baseline on two primary metrics: 4 comparisons, so without
    --alpha the plan is at alpha / 4 (Holm's first step) and asks for more boots."""
    root = simulate_results(tmp_path / "exp", {"base": 0.0, "a": 0.1, "b": 0.1}, boots=4)
    alpha = json.loads((root / "manifest.json").read_text())["alpha"]
    args = ["plan", str(root), "--effect", "0.02", "--json"]
    assert run(args) == 0
    family = json.loads(capsys.readouterr().out)
    assert family["family_size"] == 4 and family["alpha_given"] is False
    assert family["alpha"] == pytest.approx(alpha / 4)
    assert run([*args, "--alpha", str(alpha)]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["alpha"] == alpha and one["alpha_given"] is True
    assert family["boots_per_arm"] > one["boots_per_arm"]
    assert run(args[:-1]) == 0
    assert "over its 4 primary comparisons" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--baseline", "nope"], "--baseline"),
        (["--alpha", "0.9"], "--alpha"),
        (["--split-arm", "nope"], "--split-arm"),
        (["--looks", "3,x"], "--looks"),
        (["--prior-between-boot-sd", "1,2,3,4"], "--prior-between-boot-sd"),
        (["--prior-between-boot-sd", "0.008"], "--prior-df"),
        (["--prior-between-boot-sd", "-1", "--prior-df", "4"], "--prior-between-boot-sd"),
        (["--margin-pos0", "-1"], "--margin acceptance_pos0"),
        (["--margin", "acceptance_pos0=-1"], "--margin acceptance_pos0"),
        (["--margin", "pos0=0.01"], "METRIC=VALUE"),
        (["--json", "--format", "markdown"], "two outputs"),
        (["--looks", "6,3"], "--looks"),
        (["--fail-on", "regresed"], "--fail-on"),
        (["--format", "yaml"], "--format"),
    ],
)
def test_bad_options_print_one_line_and_exit_2(
    results: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    assert run(["analyze", str(results), *args]) == 2
    captured = capsys.readouterr()
    # an old spelling's deprecation note may come first; the error is one line
    lines = [x for x in captured.err.strip().splitlines() if not x.startswith("note: ")]
    assert len(lines) == 1 and needle in lines[0] and "Fix:" in lines[0]
    assert "Traceback" not in captured.err and captured.out == ""


def test_split_arm_needs_four_boots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = simulate_results(tmp_path / "few", {"a": 0.0, "b": 0.0}, boots=3)
    assert run(["analyze", str(root), "--split-arm", "a"]) == 2
    assert "at least 4" in capsys.readouterr().err


def test_plan_and_analyze_reject_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["analyze", str(tmp_path / "missing")]) == 2
    root = simulate_results(tmp_path / "p", {"a": 0.0, "b": 0.0}, boots=2)
    assert run(["plan", str(root), "--effect", "-1"]) == 2
    assert run(["plan", str(root), "--effect", "0.01", "--metric", "pos9"]) == 2
    err = capsys.readouterr().err
    assert "--effect" in err and "--metric" in err


def test_fail_on_gates_ci(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """exit 1 when a primary verdict is one of --fail-on, 0 otherwise, 2 on error."""
    base = ["analyze", str(results), "--resamples", "0", "--format", "markdown"]
    assert run([*base, "--fail-on", "regressed,small_regression"]) == 0  # fix improved
    assert run([*base, "--fail-on", "improved"]) == 1
    assert run([*base, "--baseline", "fix", "--fail-on", "regressed,small_regression"]) == 1
    capsys.readouterr()
    assert run([*base, "--fail-on", "regressed", "--baseline", "nope"]) == 2


def test_markdown_format_is_a_job_summary(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["analyze", str(results), "--resamples", "0", "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    lines = md.splitlines()
    assert lines[0].startswith("### specab sim: each arm vs base")
    header = next(line for line in lines if line.startswith("| arm |"))
    assert "verdict interval" in header and "difference [raw 95% CI]" in header
    rows = [line for line in lines if line.startswith("| fix |") and "| primary |" in line]
    assert len(rows) == 2 and all("| improved |" in r and "Holm interval" in r for r in rows)


def test_prior_from_an_aa_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    aa = simulate_results(tmp_path / "aa", {"x": 0.0, "y": 0.0}, boots=4, seed=5)
    one = simulate_results(tmp_path / "one", {"a": 0.0, "b": 0.5}, boots=1)
    assert run(["analyze", str(one), "--json", "--resamples", "0"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert {c["method"] for c in before["comparisons"]} == {"unreplicated"}
    assert run(["analyze", str(one), "--json", "--resamples", "0", "--prior-from", str(aa)]) == 0
    out = json.loads(capsys.readouterr().out)
    prior = out["settings"]["prior"]
    assert prior["source"] == str(aa) and 5.9 < prior["df"]["acceptance_pos0"] <= 6
    assert {c["method"] for c in _primary(out)} == {"welch_prior_sd"}
    assert prior["boots"] == 8 and prior["supplied"] == ["a", "b"]
    assert prior["requests_per_boot"] == 100
    assert all(f"prior from {aa} (" in c["why"] for c in _primary(out))  # said in the verdict
    args = ["analyze", str(one), "--prior-from", str(aa), "--prior-df", "3"]
    assert run(args) == 2 and "--prior-from" in capsys.readouterr().err
    args = [
        "analyze",
        str(one),
        "--json",
        "--prior-between-boot-sd",
        "0.008,0.04",
        "--prior-df",
        "6",
    ]
    assert run(args) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["prior"]["df"]["acceptance_pos0"] == 6


@pytest.mark.parametrize(
    ("design", "words"),
    [
        ({"prompts": 40}, "requests per boot 100 vs 40"),
        ({"probe_set": "chat"}, "probe sets sim (sim) vs chat"),
    ],
)
def test_a_prior_from_another_design_is_refused_naming_what_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], design: dict[str, Any], words: str
) -> None:
    """A between-boot SD measured on other probes or another number of requests per boot
    would make a 1-boot arm's verdict rest on a spread this run never had."""
    aa = simulate_results(tmp_path / "aa", {"x": 0.0, "y": 0.0}, boots=4, seed=5)
    one = simulate_results(tmp_path / "one", {"a": 0.0, "b": 0.5}, boots=1, **design)
    before = sorted(p.name for p in one.rglob("*"))
    assert run(["analyze", str(one), "--json", "--prior-from", str(aa)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and words in err and "--prior-from" in err
    assert "Fix:" in err and sorted(p.name for p in one.rglob("*")) == before


def test_a_bad_manifest_setting_names_the_manifest_not_a_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], print_end_of: Callable[..., Any]
) -> None:
    """run-ab passes no flags: an error about its settings must not blame one."""
    root = simulate_results(tmp_path / "m", {"a": 0.0, "b": 0.0}, boots=2, prompts=10)
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["baseline"] = "gone"
    (root / "manifest.json").write_text(json.dumps(manifest))
    assert run(["analyze", str(root)]) == 2
    err = capsys.readouterr().err
    assert "manifest.json: experiment.baseline" in err and "--baseline" not in err
    console = Console(record=True, width=200)
    print_end_of(root, console, {})
    text = console.export_text()
    assert "no verdict:" in text and "experiment.baseline" in text and "--baseline" not in text


def test_the_end_of_run_says_whether_arms_stayed_balanced_across_hosts(
    tmp_path: Path, print_end_of: Callable[..., Any]
) -> None:
    """After a node left mid-run its retries ran elsewhere: the summary says the arms are not
    balanced, gives each arm's boots per host and what the analysis does about it."""
    even = {"base": ["h1", "h2"] * 2, "fix": ["h2", "h1"] * 2}
    uneven = {"base": ["h1", "h2", "h1", "h2"], "fix": ["h1", "h1", "h1", "h2"]}
    lines = {}
    for name, hosts in (("even", even), ("uneven", uneven)):
        root = simulate_results(tmp_path / name, {"base": 0.0, "fix": 0.0}, boots=4,
                                prompts=20, hosts=hosts)  # fmt: skip
        console = Console(record=True, width=400)
        print_end_of(root, console, {"h1": {}, "h2": {}})
        lines[name] = console.export_text()
    assert "balanced: every arm has the same share" in lines["even"]
    assert "NOT balanced" not in lines["even"]
    text = lines["uneven"]
    assert "NOT balanced across hosts" in text and "fix h1 3, h2 1" in text
    assert "fix: compared within hosts" in text


@pytest.mark.parametrize(
    "command", [["analyze"], ["report"], ["status"], ["plan", "--effect", "0.1"]]
)
def test_an_experiment_file_given_for_a_results_directory_names_the_directory_expected(
    command: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = Path(__file__).resolve().parents[2] / "arms" / "demo" / "demo.toml"
    monkeypatch.chdir(tmp_path)
    argv = [command[0], str(spec), *command[1:]]
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert "an experiment file, not a results directory" in err
    assert f"{tmp_path / 'results' / 'demo'}: not found here" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("metric", ["acceptance_pos0", "request_mean_accepted_length"])
def test_analyze_and_plan_give_one_answer_to_how_many_boots(
    results: Path, capsys: pytest.CaptureFixture[str], metric: str
) -> None:
    """analyze's boots-needed and plan's boots per arm are planned at one level (Holm's first
    step of the comparison's family): asked for the same effect, they answer alike."""
    assert run(["analyze", str(results), "--json", "--resamples", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    c = next(x for x in out["comparisons"] if x["metric"] == metric and x["arm"] == "fix")
    target = max(abs(c["difference"]), c["margin"])
    argv = ["plan", str(results), "--effect", repr(target), "--metric", metric]
    assert run([*argv, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["metric"] == metric
    if c["family"] == "primary":
        assert plan["alpha"] == pytest.approx(out["alpha"] / plan["family_size"])
        assert plan["boots_per_arm"] == c["boots_needed"]
    else:  # planned at the primary family's first step: at least the boots analyze asks
        assert plan["boots_per_arm"] >= c["boots_needed"]


@pytest.mark.parametrize(
    ("effect", "metric", "words"),
    [
        ("2", "acceptance_pos0", "impossible for acceptance_pos0"),
        ("9", "mean_accepted_length", "impossible for mean_accepted_length"),
        ("9", "request_mean_accepted_length", "impossible for request_mean_accepted_length"),
        ("0.05", "tokens", "unknown metric 'tokens'"),
    ],
)
def test_plan_refuses_what_no_arm_could_show(
    results: Path, capsys: pytest.CaptureFixture[str], effect: str, metric: str, words: str
) -> None:
    assert run(["plan", str(results), "--effect", effect, "--metric", metric]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_plan_sizes_a_speed_question_and_never_costs_more_than_now(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = simulate_results(
        tmp_path / "speed", {"base": 0.0, "fix": 0.0}, boots=4, prompts=20,
        speed={"base": 1.0, "fix": 1.0}, sigma_speed_boot=0.05,
    )  # fmt: skip
    argv = ["plan", str(res), "--effect", "0.05", "--metric", "output_tokens_per_s", "--json"]
    assert run(argv) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["metric"] == "output_tokens_per_s" and plan["effect"] == 0.05
    assert plan["boots_per_arm"] is not None and plan["boots_per_arm"] >= 2
    assert 0.01 < plan["between_boot_sd"] < 0.2  # of log tokens/s: relative, not tokens/s
    small = run(["plan", str(res), "--effect", "0.5", "--metric", "output_tokens_per_s", "--json"])
    assert small == 0
    big = json.loads(capsys.readouterr().out)
    assert big["boots_per_arm"] <= plan["boots_per_arm"]
    for p in (plan, big):
        if p.get("seconds_per_arm_at_optimum") is not None:
            assert p["seconds_per_arm_at_optimum"] <= p["seconds_per_arm_now"]


def test_analyze_reads_only_the_probe_columns_it_uses_and_answers_the_same(results: Path) -> None:
    from bench import stats
    from bench.store import load_results

    full, lean = load_results(results), load_results(results, stats.PROBE_COLUMNS)
    assert {"output_sha256", "ttft_s"} <= set(full.probes.columns)
    assert not {"output_sha256", "ttft_s"} & set(lean.probes.columns)
    opts = AnalysisOptions(n_resamples=200)
    assert stats.analyze(lean, opts).to_json() == stats.analyze(full, opts).to_json()


def test_by_prompt_tokens_groups_prompts_by_length_bins(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.store import load_results

    tokens = load_results(results).probes.groupby("probe_id")["prompt_tokens"].first()
    assert (
        run(["analyze", str(results), "--json", "--resamples", "0", "--by", "prompt_tokens"]) == 0
    )
    b = json.loads(capsys.readouterr().out)["breakdown"]
    assert b["by"] == "prompt_tokens" and [g["group"][:2] for g in b["groups"]] == [
        "1:",
        "2:",
        "3:",
        "4:",
    ]  # quartiles, in order
    assert sum(g["probes"] for g in b["groups"]) == len(tokens)
    cut = int(tokens.median())
    assert (
        run(["analyze", str(results), "--json", "--resamples", "0", "--by", f"prompt_tokens:{cut}"])
        == 0
    )
    groups = json.loads(capsys.readouterr().out)["breakdown"]["groups"]
    assert [g["probes"] for g in groups] == [(tokens < cut).sum(), (tokens >= cut).sum()]
    for bad in ("output_position", "prompt_tokens:x", "length", "prompt_tokens:50,10"):
        assert run(["analyze", str(results), "--by", bad]) == 2
    said = capsys.readouterr().err.splitlines()
    # simulated boots record no verify steps: acceptance along the output is refused, naming why
    assert "needs each request's verify steps in order" in said[0] and len(said) == 4
    assert "do not increase" in said[3] and "prompt_tokens:10,50" in said[3]


def test_a_group_verdict_not_borne_out_across_groups_says_so_on_its_line() -> None:
    """The A/A arm 'regressed' in one length bin while its p across the bins is 0.059: the
    table says, on that line, that the claim holds within the group only."""
    from bench.report.tables import group_verdict
    from bench.stats.schema import AcrossGroups, Breakdown, Comparison

    across = AcrossGroups(
        arm="aa", metric="acceptance_pos0", groups=["1", "2"], p_values=[0.012, 0.4],
        p_holm=[0.059, 0.4], differ=[],
    )  # fmt: skip
    b = Breakdown.model_construct(by="prompt_tokens", groups=[], note="", across_groups=[across])
    said = Comparison.model_construct(arm="aa", metric="acceptance_pos0", verdict="regressed")
    line = group_verdict(b, "1", said, 0.05)
    assert line.startswith("regressed in this group only") and "0.059 ≥ 0.05" in line
    held = across.model_copy(update={"p_holm": [0.02, 0.4]})
    assert group_verdict(b.model_copy(update={"across_groups": [held]}), "1", said, 0.05) == (
        "regressed"
    )
    quiet = said.model_copy(update={"verdict": "inconclusive"})
    assert group_verdict(b, "1", quiet, 0.05) == "inconclusive"
