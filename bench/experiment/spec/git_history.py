"""`[bisect] git = { repo, good, bad }`: a vLLM history as the arms of a bisection. The points
are `good` and the first-parent commits of good..bad that touch the package, oldest first;
each is the arm's own build (which must be `good`) plus the cumulative diff good..commit,
served through the diff-arm path (`patches`). The diffs are written once per commit under
specab's cache (content stays what git says; the arm definition hashes it). A range that
changes compiled code is refused: such a commit needs its own build. With `build`, every
point is instead its own build's interpreter (`build_cache/<commit>/bin/python`), which the
first boot that needs it makes (`bench.run.commit_builds`); any change can then be searched.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

from bench.errors import SpecabError

# What a diff arm cannot serve: a change to these needs its own build of vLLM.
_COMPILED_SUFFIXES = {
    ".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".cu", ".cuh", ".hip", ".cmake",
    ".metal", ".pyx", ".pxd", ".so",
}  # fmt: skip
_BUILD_FILES = {"CMakeLists.txt", "setup.py", "pyproject.toml", "MANIFEST.in", "Dockerfile"}


def needs_build(path: str) -> bool:
    """A repository path whose change no diff arm can serve: compiled code (csrc/, sources
    and headers, extension modules), build files or pinned requirements."""
    pure = PurePosixPath(path)
    return (
        pure.suffix in _COMPILED_SUFFIXES
        or pure.name in _BUILD_FILES
        or path.startswith("csrc/")
        or pure.name.startswith("requirements")
    )


def _git(repo: Path, *args: str, file: Path, field: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"git {args[0]} failed"])[-1]
        raise SpecabError(why, file=file, field=field, fix="check the repository and the revisions")
    return done.stdout


def _cache(good: str) -> Path:
    return _specab_cache() / "bisect" / good


def _specab_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specab"


def build_cache(git: dict[str, Any], file: Path) -> Path:
    """Where `[bisect] git.build` keeps its builds: build_cache/<commit> per commit."""
    value = str(git.get("build_cache") or "")
    if not value:
        return _specab_cache() / "builds"
    v = Path(value).expanduser()
    return v if v.is_absolute() else (file.parent / v).resolve()


def history_points(git: dict[str, Any], file: Path) -> list[dict[str, Any]]:
    """Each point: its commit, subject, date, the files it touches and the diff good..it
    (None for good itself, and for every point when each is built), oldest first; bad input
    is one SpecabError naming the field."""
    repo = (file.parent / str(git.get("repo", ""))).resolve()
    package = str(git.get("package", "vllm"))
    if not (repo / ".git").exists():
        raise SpecabError(
            f"{repo} is not a git repository", file=file, field="bisect.git.repo",
            fix="point repo at a vLLM checkout (relative to the experiment file)",
        )  # fmt: skip
    good = _git(repo, "rev-parse", "--verify", f"{git.get('good')}^{{commit}}", file=file,
                field="bisect.git.good").strip()  # fmt: skip
    bad = _git(repo, "rev-parse", "--verify", f"{git.get('bad')}^{{commit}}", file=file,
               field="bisect.git.bad").strip()  # fmt: skip
    if subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{bad}:{package}"],
                      capture_output=True, check=False).returncode != 0:  # fmt: skip
        raise SpecabError(
            f"the repository has no {package}/ at {bad[:12]}", file=file,
            field="bisect.git.package", fix="point repo at a checkout of the package's source",
        )  # fmt: skip
    if subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", good, bad],
                      capture_output=True, check=False).returncode != 0:  # fmt: skip
        raise SpecabError(
            f"good {good[:12]} is not an ancestor of bad {bad[:12]}", file=file,
            field="bisect.git.good", fix="swap them, or pick a good commit on bad's history",
        )  # fmt: skip
    listed = _git(repo, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}", "--",
                  f"{package}/", file=file, field="bisect.git").split()  # fmt: skip
    if not listed or listed[-1] != bad:
        listed = [c for c in listed if c != bad] + [bad] if listed or good != bad else []
    if not listed:
        raise SpecabError(
            f"the range {good[:12]}..{bad[:12]} is empty", file=file, field="bisect.git.bad",
            fix="give a bad commit after good",
        )  # fmt: skip
    out: list[dict[str, Any]] = [_point(repo, good, None, file)]
    built = git.get("build") is not None
    for commit in listed:
        if built:  # each commit is its own build: nothing is served as a diff
            out.append(_point(repo, commit, None, file))
            continue
        touched = _git(repo, "diff", "--name-only", good, commit, file=file,
                       field="bisect.git").split()  # fmt: skip
        if compiled := [p for p in touched if needs_build(p)]:
            raise SpecabError(
                f"commit {commit[:12]} changes compiled code ({', '.join(compiled[:3])})",
                file=file,
                field="bisect.git",
                fix="give [bisect] git a build command (each commit built, cached and "
                "skipped if it fails), or bisect a range of Python changes",
            )
        out.append(_point(repo, commit, good, file))
    return out


def _point(repo: Path, commit: str, good: str | None, file: Path) -> dict[str, Any]:
    meta = _git(repo, "show", "-s", "--format=%s%x00%cI", commit, file=file, field="bisect.git")
    subject, _, date = meta.rstrip("\n").partition("\x00")
    files = _git(repo, "show", "--format=", "--name-only", "--first-parent", commit, file=file,
                 field="bisect.git").split()  # fmt: skip
    diff = None
    if good is not None:
        diff = _cache(good) / f"{commit}.diff"
        if not diff.is_file():
            text = _git(repo, "diff", good, commit, file=file, field="bisect.git")
            diff.parent.mkdir(parents=True, exist_ok=True)
            tmp = diff.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.replace(diff)
    return {"commit": commit, "subject": subject, "date": date, "files": files, "diff": diff}


def expand_history(data: dict[str, Any], file: Path) -> dict[str, Any]:
    """The document with one arm per point of `[bisect] git` (the one hand-written arm, if
    any, is their template); unchanged without it."""
    git = (data.get("bisect") or {}).get("git") if isinstance(data.get("bisect"), dict) else None
    if not isinstance(git, dict):
        return data
    hand = data.get("arms") or [{}]
    if not isinstance(hand, list) or len(hand) != 1 or not isinstance(hand[0], dict):
        raise SpecabError(
            "[bisect] git makes the arms: give at most one [[arms]] table, their template",
            file=file,
            field="arms",
            fix="keep one [[arms]] (its fields apply to every point) or none",
        )
    template = {k: v for k, v in hand[0].items() if k != "name"}
    builds = build_cache(git, file) if git.get("build") is not None else None
    if builds is not None and ({"python", "container"} & set(template)):
        raise SpecabError(
            "[bisect] git.build makes every point's interpreter: the template arm cannot "
            "set python or container",
            file=file,
            field="arms",
            fix="remove python/container from the [[arms]] template, or drop build",
        )
    arms = []
    for i, p in enumerate(history_points(git, file)):
        arm = {**template, "name": f"{i:02d}-{p['commit'][:8]}", "description": p["subject"]}
        arm["commit"] = p["commit"]
        if builds is not None:
            arm["python"] = str(builds / p["commit"] / "bin" / "python")
        if p["diff"] is not None:
            arm["patches"] = [*template.get("patches", []), str(p["diff"])]
            arm["allow_noop_patches"] = True  # a point may change no executed code
        arms.append(arm)
    return {**data, "arms": arms}
