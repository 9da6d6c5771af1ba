"""`[bisect]` files: the arms as a history, or a git range made into arms (one diff arm per
commit touching the package); every bad input exits 2 in one line and writes nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.cli import run
from bench.errors import SpecabError
from bench.experiment import load_experiment, load_spec

BASE = """[experiment]
name = "h"
[server]
model = "m"
speculative_config = { method = "ngram", num_speculative_tokens = 2 }
[probes]
sets = ["p.jsonl"]
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip


def _repo(tmp_path: Path) -> Path:
    """A package `vllm` with three commits: two touch it, one only docs."""
    repo = tmp_path / "src"
    (repo / "vllm").mkdir(parents=True)
    (repo / "vllm" / "m.py").write_text("X = 1\n")
    _git(repo.parent, "init", "-q", "-b", "main", str(repo))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "good")
    _git(repo, "tag", "good")
    for i, (path, text) in enumerate(
        [("vllm/m.py", "X = 2\n"), ("README", "docs\n"), ("vllm/n.py", "Y = 1\n")]
    ):
        (repo / path).write_text(text)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", f"change {i}")
    _git(repo, "tag", "bad")
    return repo


def _file(tmp_path: Path, bisect: str, arms: str = '[[arms]]\nname = "t"\n') -> Path:
    (tmp_path / "p.jsonl").write_text('{"id": "a", "prompt": "x"}\n')
    f = tmp_path / "e.toml"
    f.write_text(BASE + "[bisect]\n" + bisect + "\n" + arms)
    return f


def test_a_git_range_becomes_one_arm_per_first_parent_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every first-parent commit is a point; each serves the package's Python good..commit
    changes; a commit outside the package serves what the one before it serves."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _repo(tmp_path)
    spec = load_experiment(_file(tmp_path, 'git = { repo = "src", good = "good", bad = "bad" }'))
    names = [a.name for a in spec.arms]
    assert len(names) == 4 and names[0].startswith("00-")  # good, then all 3 commits
    assert spec.arms[0].patches == [] and len(spec.arms[3].patches) == 1
    diff = Path(spec.arms[3].patches[0])
    assert diff.suffix == ".diff" and "vllm/n.py" in diff.read_text()
    assert "vllm/m.py" in diff.read_text()  # cumulative: good..commit
    assert spec.arms[1].description == "change 0" and spec.arms[1].allow_noop_patches
    assert spec.arms[2].patches == spec.arms[1].patches  # README only: the same served diff
    assert "README" not in Path(spec.arms[2].patches[0]).read_text()


def test_parsing_a_git_range_runs_no_git_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`load_spec` checks the file itself (its template arm, the sections) without git: the
    range comes back as its template, and no process starts and nothing is written; the
    points, git and the served diffs are `load_experiment`'s, once."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _repo(tmp_path)
    f = _file(tmp_path, 'git = { repo = "src", good = "good", bad = "bad" }')
    before = sorted(tmp_path.rglob("*"))
    started: list[object] = []
    real_run = subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: started.append(a) or real_run(*a, **k))
    spec = load_spec(f)
    assert started == [] and sorted(tmp_path.rglob("*")) == before
    assert spec.git_template and [a.name for a in spec.arms] == ["t"]
    assert spec.arms[0].commit is None and spec.arms[0].patches == []
    points = load_experiment(f)
    assert started and not points.git_template and len(points.arms) == 4
    assert (tmp_path / "cache" / "specab" / "bisect").is_dir()  # the served diffs
    # a mistake in the file itself is found before any git runs
    started.clear()
    bad = _file(tmp_path, 'git = { repo = "nowhere", good = "good", bad = "bad" }',
                '[[arms]]\nname = "t"\nconcurrency = 0\n')  # fmt: skip
    with pytest.raises(SpecabError, match="concurrency"):
        load_experiment(bad)
    assert started == []


@pytest.mark.parametrize(
    ("bisect", "arms", "words"),
    [
        ('git = { repo = "src", good = "bad", bad = "good" }', None, "not an ancestor"),
        ('git = { repo = "src", good = "good", bad = "good" }', None, "empty"),
        ('git = { repo = "src", good = "good", bad = "nope" }', None, "bisect.git.bad"),
        ('git = { repo = "none", good = "good", bad = "bad" }', None, "not a git repository"),
        ('git = { repo = "src", good = "good", bad = "bad", package = "vllm2" }', None, "vllm2"),
        ('metric = "acceptance_pos0"', '[[arms]]\nname = "a"\n[[arms]]\nname = "b"\n', "3 arms"),
        ('metric = "tokens_per_joule"', None, "metric"),
        (  # the ends are built before anything is written
            'git = { repo = "src", good = "good", bad = "bad", build = "exit 1 {commit} {out}" }',
            None,
            "the build fails for both ends",
        ),
        ('git = { repo = "src", good = "good", bad = "bad", build = "make" }', None, "{out}"),
        (
            'git = { repo = "src", good = "good", bad = "bad", build = "b {commit} {out}" }',
            '[[arms]]\nname = "t"\npython = "/usr/bin/python3"\n',
            "cannot set python",
        ),
        (  # commit on a hand-written arm would be ignored: refused
            'metric = "acceptance_pos0"',
            '[[arms]]\nname = "a"\ncommit = "abc"\n[[arms]]\nname = "b"\n[[arms]]\nname = "c"\n',
            "arms[0].commit",
        ),
        (
            'git = { repo = "src", good = "good", bad = "bad" }',
            '[[arms]]\nname = "t"\ncommit = "abc"\n',
            "[bisect] git sets each point's commit",
        ),
        (  # a point without a drafter: its probes count no drafts
            'metric = "mean_accepted_length"',
            '[[arms]]\nname = "a"\n[[arms]]\nname = "b"\nspeculative_config = false\n'
            '[[arms]]\nname = "c"\n',
            "is not measured at b",
        ),
    ],
)
def test_bad_histories_are_refused_in_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    bisect: str,
    arms: str | None,
    words: str,
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _repo(tmp_path)
    f = _file(tmp_path, bisect, arms or '[[arms]]\nname = "t"\n')
    out = tmp_path / "results"
    assert run(["bisect", str(f), "--results-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1, err
    assert not out.exists()


def _commit(repo: Path, message: str, files: dict[str, str | None]) -> None:
    for path, text in files.items():
        if text is None:
            _git(repo, "rm", "-q", path)
            continue
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", message)


def test_a_range_shaped_like_vllms_is_searched_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PNG under docs/, a tuned JSON config in the package, a renamed module, a csrc/
    tweak, a requirements pin, the Python culprit, a kernel change with a comment in a
    model file and a merge: every first-parent commit is a point; data files, renames and
    deletions in the package are served; what a point cannot serve over the build (compiled
    code, pins, binary files) is listed; commits whose served code is unchanged are "same as"."""
    from bench.experiment.history import history_points
    from bench.experiment.manifest import same_as

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo = _repo(tmp_path)
    _commit(repo, "docs: a figure", {"docs/fig.png": "\x89PNG"})
    _commit(repo, "tuned MoE config", {"vllm/configs/E=64.json": "{}\n",
                                       "vllm/assets/logo.png": "\x89PNG\x00"})  # fmt: skip
    _commit(repo, "rename n", {"vllm/n.py": None, "vllm/n2.py": "Y = 1\n"})
    _commit(repo, "csrc tweak", {"csrc/ops.cpp": "int x;\n"})
    _commit(repo, "pin torch", {"requirements/common.txt": "torch==2\n"})
    _commit(repo, "the culprit", {"vllm/m.py": "X = 3\n"})
    _commit(repo, "kernel + comment", {"csrc/k.cu": "//\n", "vllm/m.py": "X = 3  # why\n"})
    _git(repo, "checkout", "-qb", "side")
    _commit(repo, "side work", {"vllm/s.py": "S = 1\n"})
    _git(repo, "checkout", "-q", "main")
    _git(repo, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    f = _file(tmp_path, 'git = { repo = "src", good = "good", bad = "main" }')
    spec = load_experiment(f)  # refused before: "commit <the culprit> changes compiled code"
    subjects = [a.description for a in spec.arms]
    assert subjects[-8:-1] == ["docs: a figure", "tuned MoE config", "rename n", "csrc tweak",
                               "pin torch", "the culprit", "kernel + comment"]  # fmt: skip
    assert subjects[-1] == "merge side" and "side work" not in subjects  # first parent only
    points = history_points({"repo": "src", "good": "good", "bad": "main"}, f)
    unserved = {p["subject"]: p.get("unserved") for p in points}
    assert unserved["tuned MoE config"] == ["vllm/assets/logo.png"]  # binary: not a diff
    assert unserved["csrc tweak"] == ["csrc/ops.cpp"] and unserved["the culprit"] == []
    assert unserved["pin torch"] == ["requirements/common.txt"]
    assert unserved["rename n"] == []  # served: n2.py added, n.py deleted
    assert unserved["kernel + comment"] == ["csrc/k.cu"]
    served = Path(spec.arms[-1].patches[0]).read_text()
    assert "docs/fig.png" not in served and "logo.png" not in served
    assert "b/vllm/configs/E=64.json" in served and "b/vllm/n2.py" in served
    assert "vllm/n.py" not in served  # added after good and renamed away: not in good..bad
    commits = [p["commit"] for p in points]
    twins = same_as(repo, commits, "vllm", [p.get("served", []) for p in points])
    same = {p["subject"] for p, t in zip(points, twins, strict=True) if t is not None}
    assert same == {"change 1", "docs: a figure", "csrc tweak", "pin torch",
                    "kernel + comment"}  # fmt: skip
    # strict: refused, naming the commit that made the compiled change
    strict = _file(tmp_path, 'git = { repo = "src", good = "good", bad = "main", strict = true }')
    with pytest.raises(SpecabError) as exc:
        load_experiment(strict)
    line = exc.value.one_line()
    assert "(csrc tweak) changes compiled code" in line and "csrc/ops.cpp" in line
    assert "the culprit" not in line and "build" in line and ".cache" not in line
    # builds: every first-parent commit a point, same code over the whole tree
    twins = same_as(repo, commits, "vllm")
    same = {p["subject"] for p, t in zip(points, twins, strict=True) if t is not None}
    assert same == {"docs: a figure"}  # a csrc-only commit can be the culprit with build


def test_a_commit_that_changes_no_executed_code_runs_its_neighbours_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A comment-only commit is the same code as the point before it (by syntax tree):
    the manifest says so, and the search never boots it nor names it."""
    import numpy as np

    from bench.experiment.manifest import same_as
    from bench.stats.bisect import BisectSettings, next_step

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo = _repo(tmp_path)
    (repo / "vllm" / "m.py").write_text("# a comment\nX = 2\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "comment only")
    spec = load_experiment(_file(tmp_path, 'git = { repo = "src", good = "good", bad = "HEAD" }'))
    commits = [_git(repo, "rev-parse", "good")]
    commits += _git(repo, "rev-list", "--reverse", "good..HEAD").split()
    assert len(spec.arms) == len(commits) == 5
    served = [
        [],
        ["vllm/m.py"],
        ["vllm/m.py"],
        ["vllm/m.py", "vllm/n.py"],
        ["vllm/m.py", "vllm/n.py"],
    ]
    assert same_as(repo, commits, "vllm", served) == [None, None, 1, None, 3]
    # the search: point 3 is never asked, never the culprit (the step is at 1)
    s = BisectSettings(n_points=4, endpoint_looks=(3,), cap=4)
    pts = np.array([0, 0, 0, 3, 3, 3, 1, 2])
    vals = np.array([0.0, 0.1, -0.1, 2.0, 2.1, 1.9, 2.0, 2.05])
    step = next_step(pts, vals, s, same=[3])
    # the posterior proposes point 1 and asks fresh boots of it and of 0 to confirm; point 3
    # runs 2's code, so it is never among them
    assert step.outcome == "boot" and step.boots == {0: 3, 1: 3}
    assert step.posterior is not None and step.posterior[2] == 0.0


def test_validate_writes_no_served_diff_into_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`validate` reads a history with its points' diffs in a directory that goes with the
    command: nothing lands in specab's cache, and the diffs it read were complete."""
    from bench.experiment.history import is_served_diff, served_diffs_in

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _repo(tmp_path)
    f = _file(tmp_path, 'git = { repo = "src", good = "good", bad = "bad" }')
    with served_diffs_in(tmp_path / "gone"):
        spec = load_experiment(f)
        diffs = [Path(a.patches[-1]) for a in spec.arms if a.patches]
        assert diffs and all(is_served_diff(d) and d.is_file() for d in diffs)
        assert all((tmp_path / "gone") in d.parents for d in diffs)
    assert not (tmp_path / "cache" / "specab" / "bisect").exists()
    run(["validate", str(f)])  # refused here (no such build) or not: it writes no diff
    capsys.readouterr()
    assert not (tmp_path / "cache" / "specab" / "bisect").exists()
