"""`specab analyze` / `specab plan` through bench.cli.run on simulated results directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import run
from bench.stats.simulate import simulate_results


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
    assert {c["verdict"] for c in out["comparisons"]} == {"improved"}


def test_analyze_human_output_has_verdicts_and_why(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["analyze", str(results), "--json", "--resamples", "0"]) == 0
    d = json.loads(capsys.readouterr().out)["comparisons"][0]["difference"]
    # margin = the estimate itself: the interval excludes 0 and crosses the margin
    assert run(["analyze", str(results), "--resamples", "500", "--margin-pos0", str(d)]) == 0
    text = capsys.readouterr().out
    assert "fix vs base" in text and "Arms" in text
    assert "small_improvement" in text and "excludes 0" in text and "may be too small" in text
    assert run(["analyze", str(results), "--resamples", "0", "--margin-pos0", "0.5"]) == 0
    text = capsys.readouterr().out
    assert "fix pos0: equivalent" in text and "lies inside ±0.500" in text


def test_analyze_options_change_the_answer(
    results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["analyze", str(results), "--json", "--baseline", "fix", "--alpha", "0.01"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["alpha"] == 0.01 and out["comparisons"][0]["arm"] == "base"
    assert {c["verdict"] for c in out["comparisons"]} == {"regressed"}


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


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--baseline", "nope"], "--baseline"),
        (["--alpha", "0.9"], "--alpha"),
        (["--split-arm", "nope"], "--split-arm"),
        (["--looks", "3,x"], "--looks"),
        (["--prior-between-boot-sd", "1,2,3"], "--prior-between-boot-sd"),
    ],
)
def test_bad_options_print_one_line_and_exit_2(
    results: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    assert run(["analyze", str(results), *args]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
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
