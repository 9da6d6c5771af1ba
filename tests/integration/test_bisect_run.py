"""`specab bisect` on real Ray with the fake server: the arms of a [bisect] file are a
history; the search boots the ends, then only the points it asks for, names the first changed
point, and `analyze --json` carries the answer (additive `bisection`). A history without a
change says so; a resumed search that has its answer boots nothing more."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.cli import run
from bench.store import load_results

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600), pytest.mark.usefixtures("shared_ray")]


def _history(tmp_path: Path, fake_experiment: Callable[..., Path], levels: list[str]) -> Path:
    """A point whose level is "crash" fails at every boot, the same way."""
    arms = {
        f"p{i}": {"SPECAB_FAKE_FAULT": "crash_at_boot"}
        if a == "crash"
        else {"SPECAB_FAKE_ACCEPT": a}
        for i, a in enumerate(levels)
    }
    spec = fake_experiment(tmp_path, arms, boots_per_arm=3)
    with spec.open("a") as f:
        f.write('\n[bisect]\nmetric = "acceptance_pos0"\nboots_per_point = 4\nendpoint_boots = 6\n')
    return spec


def test_bisect_names_the_first_changed_point_and_boots_only_what_it_asks(
    tmp_path: Path, fake_experiment: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _history(tmp_path, fake_experiment, ["0.2", "0.2", "0.2", "0.9", "0.9", "0.9"])
    root = tmp_path / "results"
    argv = ["bisect", str(spec), "--results-dir", str(root), "--quiet", "--no-report"]
    assert run(argv) == 0
    out = capsys.readouterr().out
    assert "bisect: the first changed point is p3" in out and "--baseline p2" in out
    assert out.index("bisect (") < out.index("History: where did")  # the answer leads
    counts = [x.split("done=")[1].split()[0] for x in out.splitlines() if " done=" in x]
    assert counts and all("/" not in c for c in counts)  # no plan's maximum to count down to
    ok = load_results(root).ok_boots()
    booted = set(ok["arm"])
    assert {"p0", "p5"} <= booted and len(booted) < 6  # not every point: the search chose
    assert run(["analyze", str(root), "--json", "--resamples", "0"]) == 0
    b = json.loads(capsys.readouterr().out)["bisection"]
    assert b["outcome"] == "culprit" and b["culprit"] == "p3" and b["last_good"] == "p2"
    assert b["boots"] == len(ok) and [p["arm"] for p in b["points"]] == [f"p{i}" for i in range(6)]
    assert run(["report", str(root)]) == 0
    md = (root / "report" / "report.md").read_text()
    assert md.index("## Which change did it") < md.index("## Verdicts")  # the answer leads
    answer = md[md.index("## Answer") : md.index("## Which change did it")]
    assert answer.index("**culprit**: p3 is the first changed point") < answer.index(" vs p0")
    never = sorted({f"p{i}" for i in range(6)} - booted)
    assert never and not any(f"**{a}** vs" in answer for a in never)  # never booted: no A/B
    verdicts = md[md.index("## Verdicts") : md.index("## Arms")]
    assert not any(f"| {a} " in verdicts for a in never) and "| p3 " in verdicts
    assert "Confirmation 1: p3 − p2 on 3 fresh boots each" in md  # said as the terminal says it
    assert "Confirmation 1: p3 − p2 on 3 fresh boots each" in out
    assert "p3 is the first changed point: 3 fresh boots of it and of p2 differ" in md
    assert md.index("fig0_history") < md.index("fig1_boots")  # the history leads the figures
    n = len(list((root / "boots").glob("*.parquet")))
    assert run([*argv, "--resume"]) == 0  # the answer stands: nothing more to boot
    assert len(list((root / "boots").glob("*.parquet"))) == n


def test_a_point_that_fails_the_same_way_twice_is_skipped_and_the_search_goes_on(
    tmp_path: Path, fake_experiment: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # p2 is the first point the search asks for (it splits the uniform prior); it never boots
    spec = _history(tmp_path, fake_experiment, ["0.2", "0.2", "crash", "0.2", "0.9", "0.9"])
    root = tmp_path / "results"
    assert run(["bisect", str(spec), "--results-dir", str(root), "--quiet", "--no-report"]) == 0
    out = capsys.readouterr().out
    assert "bisect: skipping p2, which fails the same way twice" in out
    assert "bisect: the first changed point is p4" in out
    boots = load_results(root).boots
    assert (boots.loc[boots["arm"] == "p2", "status"] == "failed").sum() == 2  # not retried on
    assert run(["analyze", str(root), "--json", "--resamples", "0"]) == 0
    b = json.loads(capsys.readouterr().out)["bisection"]
    assert b["culprit"] == "p4" and b["points"][2]["decision"] == "skipped"


def test_a_history_without_a_change_says_it_did_not_reproduce(
    tmp_path: Path, fake_experiment: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _history(tmp_path, fake_experiment, ["0.6", "0.6", "0.6", "0.6"])
    root = tmp_path / "results"
    # run-ab on a [bisect] file runs the search, and says so
    assert run(["run-ab", str(spec), "--results-dir", str(root), "--quiet", "--no-report"]) == 0
    out = capsys.readouterr().out
    assert "has [bisect]: its arms are a history, and this runs its culprit search" in out
    assert "did not reproduce" in out and "the ends would have shown a change of" in out
    ok = load_results(root).ok_boots()
    assert set(ok["arm"]) == {"p0", "p3"}  # the ends only, to their last look
    assert len(ok) == 12


def test_bisect_refuses_a_file_without_a_history(
    tmp_path: Path, fake_experiment: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    history = _history(tmp_path / "h", fake_experiment, ["0.2", "0.2", "0.9"])
    assert run(["validate", str(history)]) == 0  # a history: what the search may boot
    said = capsys.readouterr().out
    assert "a history of 3 points (p0 .. p2)" in said and "0 arm(s)" not in said
    spec = fake_experiment(tmp_path, {"a": {}, "b": {}})
    assert run(["bisect", str(spec), "--results-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "[bisect]" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


BUILD = """set -e
commit=$1
out=$2
if git cat-file -e "$commit:vllm/broken" 2>/dev/null; then
    echo "error: the extension does not compile" >&2
    exit 1
fi
level=$(git show "$commit:csrc/level.cpp")
mkdir -p "$out/bin"
printf '#!/bin/sh\\nexport SPECAB_FAKE_ACCEPT=%s\\nexec %s "$@"\\n' "$level" "{python}" \\
    > "$out/bin/python"
chmod +x "$out/bin/python"
echo "built $commit"
"""


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True, capture_output=True,
    )  # fmt: skip


def _built_history(tmp_path: Path) -> Path:
    """good (0.2), a docs edit, a commit whose build fails, its fix, the change (0.9: a
    csrc/-only commit, which only a build serves), a later edit: each commit is built by a
    script that reads the level from the commit's compiled source."""
    repo = tmp_path / "src"
    (repo / "vllm").mkdir(parents=True)
    (repo / "csrc").mkdir()
    _git(tmp_path, "init", "-q", "-b", "main", str(repo))
    steps = [
        ("good", {"csrc/level.cpp": "0.2", "vllm/README": "v"}, []),
        ("docs", {"vllm/README": "docs"}, []),
        ("a kernel that does not compile", {"vllm/broken": "x"}, []),
        ("the kernel fixed", {"vllm/kernel.cu": "ok"}, ["vllm/broken"]),
        ("the change", {"csrc/level.cpp": "0.9"}, []),
        ("a later edit", {"vllm/README": "more docs"}, []),
    ]
    for subject, files, removed in steps:
        for path, text in files.items():
            (repo / path).write_text(text + "\n")
        for path in removed:
            (repo / path).unlink()
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", subject)
        _git(repo, "tag", subject.split()[0]) if subject == "good" else None
    (tmp_path / "build.sh").write_text(BUILD.replace("{python}", sys.executable))
    return repo


def test_a_git_history_with_builds_builds_each_point_once_on_demand_and_skips_a_failing_build(
    tmp_path: Path,
    fake_experiment: Callable[..., Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _built_history(tmp_path)
    spec = fake_experiment(tmp_path, {"t": {}}, boots_per_arm=3)
    with spec.open("a") as f:
        f.write(
            '\n[bisect]\nboots_per_point = 4\nendpoint_boots = 6\n[bisect.git]\nrepo = "src"\n'
            'good = "good"\nbad = "main"\nbuild = "sh ../build.sh {commit} {out}"\n'
            'build_cache = "builds"\n'
        )
    root = tmp_path / "results"
    assert run(["bisect", str(spec), "--results-dir", str(root), "--quiet", "--no-report"]) == 0
    out = capsys.readouterr().out
    assert "bisect: skipping 02-" in out and "the extension does not compile" in out
    assert run(["analyze", str(root), "--json", "--resamples", "0"]) == 0
    b = json.loads(capsys.readouterr().out)["bisection"]
    assert b["outcome"] == "culprit" and b["culprit_commit"]["subject"] == "the change"
    assert b["culprit_commit"]["files"] == ["csrc/level.cpp"]  # compiled only: a build serves it
    decisions = {p["arm"][:2]: p["decision"] for p in b["points"]}
    assert decisions["02"] == "skipped"
    builds = tmp_path / "builds"
    built = {p.parent.name for p in builds.glob("*/.specab-built")}
    booted = {p["arm"] for p in b["points"] if p["boots"]}
    assert len(built) == len(booted) < 6  # on demand: only the points the search visited
    assert len(list(builds.glob("*.failed"))) == 1  # built once: the retry read the marker
    assert len(list(builds.glob("*.log"))) == len(built) + 1
