"""`[bisect]` files: the arms as a history, or a git range made into arms (one diff arm per
commit touching the package); every bad input exits 2 in one line and writes nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.cli import run
from bench.errors import SpecabError
from bench.experiment import load_spec

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


def test_a_git_range_becomes_one_diff_arm_per_commit_touching_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _repo(tmp_path)
    spec = load_spec(_file(tmp_path, 'git = { repo = "src", good = "good", bad = "bad" }'))
    names = [a.name for a in spec.arms]
    assert len(names) == 3 and names[0].startswith("00-")  # good, then 2 of 3 commits
    assert spec.arms[0].patches == [] and len(spec.arms[2].patches) == 1
    diff = Path(spec.arms[2].patches[0])
    assert diff.suffix == ".diff" and "vllm/n.py" in diff.read_text()
    assert "vllm/m.py" in diff.read_text()  # cumulative: good..commit
    assert spec.arms[1].description == "change 0" and spec.arms[1].allow_noop_patches


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


def test_a_compiled_change_in_the_range_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    repo = _repo(tmp_path)
    (repo / "vllm" / "ops.cu").write_text("// kernel\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "a kernel")
    with pytest.raises(SpecabError) as exc:
        load_spec(_file(tmp_path, 'git = { repo = "src", good = "good", bad = "HEAD" }'))
    assert "compiled code" in exc.value.one_line() and "vllm/ops.cu" in exc.value.one_line()


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
    spec = load_spec(_file(tmp_path, 'git = { repo = "src", good = "good", bad = "HEAD" }'))
    commits = [_git(repo, "rev-parse", "good")]
    commits += _git(repo, "rev-list", "--reverse", "good..HEAD", "--", "vllm/").split()
    assert len(spec.arms) == len(commits) == 4
    assert same_as(repo, commits, "vllm") == [None, None, None, 2]
    # the search: point 3 is never asked, never the culprit (the step is at 1)
    s = BisectSettings(n_points=4, endpoint_looks=(3,), cap=4)
    pts = np.array([0, 0, 0, 3, 3, 3, 1, 2])
    vals = np.array([0.0, 0.1, -0.1, 2.0, 2.1, 1.9, 2.0, 2.05])
    step = next_step(pts, vals, s, same=[3])
    assert step.outcome in ("culprit", "boot") and 3 not in step.boots
    assert step.posterior is not None and step.posterior[2] == 0.0
