"""Sequential stopping in `specab run-ab` (experiment.looks) on real Ray with the fake server:
arms that clearly differ stop at the first look with fewer boots than planned; an A/A pair
goes on through every look; `--resume` after a stop launches nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.cli import run
from bench.store import load_results

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600), pytest.mark.usefixtures("shared_ray")]

LOOKS = [2, 4]
# With 2 boots per arm the boot-level test cannot reach look 1 of [2, 4]'s boundary (nominal
# alpha 0.0055; a 0.2 vs 0.9 acceptance gap gave p = 0.04), so the early stop uses [3, 6].
STOP_LOOKS = [3, 6]


def _ok_counts(root: Path) -> dict[str, int]:
    ok = load_results(root).ok_boots()
    return {str(a): int(n) for a, n in ok.groupby("arm").size().items()}


def _run(spec: Path, root: Path, *extra: str) -> int:
    return run(["run-ab", str(spec), "--results-dir", str(root), "--quiet", "--no-report", *extra])


def test_clear_difference_stops_at_first_look(
    tmp_path: Path, fake_experiment: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    spec = fake_experiment(
        tmp_path,
        {"low": {"SPECAB_FAKE_ACCEPT": "0.2"}, "high": {"SPECAB_FAKE_ACCEPT": "0.9"}},
        boots_per_arm=STOP_LOOKS[-1],
        experiment={"looks": STOP_LOOKS},
    )
    root = tmp_path / "results"
    assert _run(spec, root, "--slots", "2") == 0
    out = capsys.readouterr().out
    state = json.loads((root / "sequential.json").read_text())
    assert state["looks"] == STOP_LOOKS and state["stopped"] is True
    assert [d["look"] for d in state["decisions"]] == [1]
    d = state["decisions"][0]
    assert d["action"] == "stop" and d["boots_per_arm"] == STOP_LOOKS[0]
    assert all(c["status"] == "difference" for c in d["comparisons"])
    assert "look 1/2" in out and "STOP" in out and "launching no further boots" in out
    counts = _ok_counts(root)
    assert all(n >= STOP_LOOKS[0] for n in counts.values())
    assert sum(counts.values()) < STOP_LOOKS[-1] * 2  # fewer boots than the fixed design
    # Resuming a stopped run launches nothing and keeps the decision.
    n_files = len(list((root / "boots").glob("*.parquet")))
    assert _run(spec, root, "--resume") == 0
    assert len(list((root / "boots").glob("*.parquet"))) == n_files
    assert json.loads((root / "sequential.json").read_text()) == state


def test_aa_continues_through_every_look(
    tmp_path: Path, fake_experiment: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    spec = fake_experiment(
        tmp_path,
        {"a1": {"SPECAB_FAKE_ACCEPT": "0.6"}, "a2": {"SPECAB_FAKE_ACCEPT": "0.6"}},
        boots_per_arm=LOOKS[-1],
        experiment={"looks": LOOKS},
    )
    root = tmp_path / "results"
    assert _run(spec, root, "--slots", "2") == 0
    out = capsys.readouterr().out
    state = json.loads((root / "sequential.json").read_text())
    decisions = state["decisions"]
    assert [d["look"] for d in decisions] == [1, 2]  # each planned look taken once, in order
    assert decisions[0]["action"] == "continue" and decisions[0]["boots_per_arm"] == LOOKS[0]
    assert decisions[1]["action"] == "stop" and decisions[1]["boots_per_arm"] == LOOKS[1]
    assert not any(c["status"] == "difference" for d in decisions for c in d["comparisons"])
    assert "CONTINUE" in out and "look 2/2" in out
    assert _ok_counts(root) == {"a1": LOOKS[-1], "a2": LOOKS[-1]}


def test_looks_must_match_boots_per_arm(
    tmp_path: Path, fake_experiment: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    spec = fake_experiment(
        tmp_path, {"a": {}, "b": {}}, boots_per_arm=5, experiment={"looks": [2, 4]}
    )
    root = tmp_path / "results"
    assert _run(spec, root) == 2
    err = capsys.readouterr()
    assert "must equal the last look" in err.out + err.err
    assert not root.exists()
