"""`[screen]` on real Ray with the fake server: candidates without an order, each against
the baseline; a candidate decided at a look gets no more boots, the boots go to the
unresolved ones, and `analyze --json` reports the same decisions (additive `screening`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.cli import run
from bench.store import load_results

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600), pytest.mark.usefixtures("shared_ray")]


def test_screening_stops_booting_decided_candidates_and_reports_them(
    tmp_path: Path, fake_experiment: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # same-a and same-b measure like the baseline but are other arms (an env the fake
    # ignores); twin is the baseline's very definition, so it runs the baseline's code
    levels = {"base": "0.6", "same-a": "0.6", "same-b": "0.6", "worse": "0.1", "twin": "0.6"}
    env = {a: {"SPECAB_FAKE_ACCEPT": v} for a, v in levels.items()}
    env["same-a"]["SPECAB_CANDIDATE"], env["same-b"]["SPECAB_CANDIDATE"] = "a", "b"
    spec = fake_experiment(tmp_path, env, boots_per_arm=10, experiment={"baseline": "base"})
    with spec.open("a") as f:
        f.write('\n[screen]\nmetric = "acceptance_pos0"\nmargin = 0.25\nlooks = [3, 6, 10]\n')
    root = tmp_path / "results"
    assert run(["run-ab", str(spec), "--results-dir", str(root), "--quiet", "--no-report"]) == 0
    out = capsys.readouterr().out
    assert "screening: no more boots for worse: lowered" in out
    assert "screening: no more boots for twin: cleared: runs the baseline's code" in out
    ok = load_results(root).ok_boots().groupby("arm").size().to_dict()
    assert "twin" not in ok and ok["same-a"] >= 3  # the twin never booted; the others did
    assert max(ok.values()) <= 10 and sum(ok.values()) < 40  # decided arms stopped early
    assert ok["worse"] <= 6  # a plainly harmful candidate: decided at an early look
    assert run(["analyze", str(root), "--json", "--resamples", "0"]) == 0
    s = json.loads(capsys.readouterr().out)["screening"]
    status = {c["arm"]: c["status"] for c in s["candidates"]}
    assert status == {
        "same-a": "cleared",
        "same-b": "cleared",
        "worse": "lowered",
        "twin": "cleared",
    }
    assert [c["arm"] for c in s["candidates"] if c["same_code"]] == ["twin"]
    assert s["spread"] == "pooled"  # three candidates tested: one spread over every arm
    assert {c["spread"] for c in s["candidates"] if not c["same_code"]} <= {"pooled", "welch"}
    assert s["finished"] and s["boots_used"] == sum(ok.values()) < s["boots_fixed_design"]
    margin = ["--margin", "acceptance_pos0=0.01"]
    assert run(["analyze", str(root), "--json", "--resamples", "0", *margin]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["screening"]["margin"] == 0.01  # re-decided at the margin given, and said
    assert any("screening re-decided at --margin acceptance_pos0=0.01" in n for n in again["notes"])
    written = (root / "manifest.json").read_text()
    manifest = json.loads(written)
    del manifest["screen"]["spread"]  # as results written before the rule was recorded
    (root / "manifest.json").write_text(json.dumps(manifest))
    assert run(["analyze", str(root), "--json", "--resamples", "0"]) == 0
    old = json.loads(capsys.readouterr().out)["screening"]
    assert old["spread"] == "welch" and {c["spread"] for c in old["candidates"]} <= {"welch", None}
    (root / "manifest.json").write_text(written)
    assert run(["report", str(root)]) == 0
    md = (root / "report" / "report.md").read_text()
    answer = md[md.index("## Answer") : md.index("## Which candidates lowered it")]
    assert "**screening** on pos0 (margin 0.25)" in answer  # its own margin and words
    assert "**worse** vs base" in answer and "lowered: worse than base" in answer
    assert "not worse than base by more than 0.25" in answer and "regressed" not in answer
    assert "**twin** runs base's code: cleared without boots." in answer
    assert "with one boot spread pooled over every arm" in md  # the rule, where it is told
    n = len(list((root / "boots").glob("*.parquet")))
    assert run(["run-ab", str(spec), "--results-dir", str(root), "--resume", "--quiet"]) == 0
    assert len(list((root / "boots").glob("*.parquet"))) == n  # decided: nothing more to boot
