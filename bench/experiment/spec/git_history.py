"""`[bisect] git = { repo, good, bad }`: a vLLM history as the arms of a bisection. The points
are `good` and every first-parent commit of good..bad (merges included), oldest first; each
is the arm's own build (which must be `good`) plus the package's files that good..commit
changes, adds, deletes or renames (modules and data files), served through the diff-arm path
(`patches`; the diff written once under specab's cache, named by its content). What a point
cannot serve that way (compiled code, dependency pins, binary files) is its `unserved` list,
and a commit that changes only files outside the package runs the same code as the point
before it (never booted). `strict` refuses instead a range with compiled or dependency
changes, naming the commit that made them. With `build`, every point is instead its own
build's interpreter (`build_cache/<commit>/bin/python`), which the first boot that needs it
makes (`bench.run.commit_builds`); any change can then be searched.
"""

from __future__ import annotations

import copy
import hashlib
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
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
        or path.startswith(("csrc/", "requirements/"))
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


_DIFF_ROOTS: list[Path] = []  # served_diffs_in: where diffs go instead of the cache


@contextmanager
def served_diffs_in(root: Path) -> Iterator[None]:
    """Write the points' served diffs under `root` rather than specab's cache while the
    block runs (`validate` checks a history without writing anything that outlives it)."""
    _DIFF_ROOTS.append(root)
    try:
        yield
    finally:
        _DIFF_ROOTS.pop()


def _diff_root() -> Path:
    """Where the points' served diffs go: specab's cache, or `served_diffs_in`'s root."""
    return _DIFF_ROOTS[-1] if _DIFF_ROOTS else _specab_cache() / "bisect"


def is_served_diff(path: Path) -> bool:
    """Whether `path` is a history point's served diff (written by `served_diff`)."""
    return path.parent.parent == _diff_root()


def _cache(good: str) -> Path:
    return _diff_root() / good


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
    """Each point: its commit, subject, date, the files it touches and, served as a diff,
    the modules it serves and the files it leaves unserved, oldest first; bad input is one
    SpecabError naming the field. Read from git once per process for one range (parsing,
    the manifest and validate all ask)."""
    keys = ("repo", "good", "bad", "package", "build", "strict")
    key = (str(file.resolve()), *(str(git.get(k)) for k in keys))
    return copy.deepcopy(_read_points(key, git, file))


_READ: dict[tuple[str, ...], list[dict[str, Any]]] = {}


def _read_points(
    key: tuple[str, ...], git: dict[str, Any], file: Path
) -> list[dict[str, Any]]:  # fmt: skip
    if key not in _READ:
        _READ[key] = _points_from_git(git, file)
    return _READ[key]


def _points_from_git(git: dict[str, Any], file: Path) -> list[dict[str, Any]]:
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
    listed = _git(repo, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}",
                  file=file, field="bisect.git").split()  # fmt: skip
    if not listed:
        raise SpecabError(
            f"the range {good[:12]}..{bad[:12]} is empty", file=file, field="bisect.git.bad",
            fix="give a bad commit after good",
        )  # fmt: skip
    built, strict = git.get("build") is not None, bool(git.get("strict", False))
    out: list[dict[str, Any]] = [_point(repo, good, file)]
    for commit in listed:
        point = _point(repo, commit, file)
        if built:  # each commit is its own build: nothing is served as a diff
            out.append(point)
            continue
        if strict and (compiled := [f for f in point["files"] if needs_build(f)]):
            raise SpecabError(
                f"commit {commit[:12]} ({point['subject']}) changes compiled code or "
                f"dependencies ({', '.join(compiled[:3])})",
                file=file,
                field="bisect.git.strict",
                fix="give [bisect] git a build command (each commit built, cached and skipped "
                "if it fails), or drop strict to serve each point's Python over the build",
            )
        served, unserved = _served(repo, good, commit, package, point["files"], file)
        point["served"], point["unserved"] = served, unserved
        out.append(point)
    return out


def _served(
    repo: Path, good: str, commit: str, package: str, own: list[str], file: Path
) -> tuple[list[str], list[str]]:
    """What a point serves over the build: every text file of the package that good..commit
    changes, adds or deletes (modules and the data files beside them; a rename is its old
    path deleted and its new one added); and what the commit itself changes that is not
    served (compiled code, dependencies, binary files in the package)."""
    counts = _git(repo, "diff", "--numstat", "--no-renames", good, commit, "--",
                  f"{package}/", file=file, field="bisect.git").splitlines()  # fmt: skip
    served, binary = [], set()
    for line in counts:
        added, _, rest = line.partition("\t")
        path = rest.partition("\t")[2]
        if added == "-":  # numstat's "-": a binary file
            binary.add(path)
        elif not needs_build(path):
            served.append(path)
    return served, [f for f in own if needs_build(f) or f in binary]


def _point(repo: Path, commit: str, file: Path) -> dict[str, Any]:
    meta = _git(repo, "show", "-s", "--format=%s%x00%cI", commit, file=file, field="bisect.git")
    subject, _, date = meta.rstrip("\n").partition("\x00")
    files = _git(repo, "show", "--format=", "--name-only", "--no-renames", "--first-parent",
                 "-m", commit, file=file, field="bisect.git").split()  # fmt: skip
    return {"commit": commit, "subject": subject, "date": date, "files": sorted(set(files))}


def served_diff(git: dict[str, Any], file: Path, commit: str, served: list[str]) -> Path:
    """The point's served change, `git diff good commit` over its served modules, written
    once under specab's cache (named by its content: equal diffs share one file)."""
    repo = (file.parent / str(git.get("repo", ""))).resolve()
    good = _git(repo, "rev-parse", f"{git.get('good')}^{{commit}}", file=file,
                field="bisect.git.good").strip()  # fmt: skip
    text = _git(repo, "diff", "--no-renames", good, commit, "--", *served, file=file,
                field="bisect.git")  # fmt: skip
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    diff = _cache(good) / f"{digest}.diff"
    if not diff.is_file():
        diff.parent.mkdir(parents=True, exist_ok=True)
        tmp = diff.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(diff)
    return diff


def _check_hand_commits(data: dict[str, Any], file: Path, template: bool) -> None:
    """`commit` is [bisect] git's to set: on a hand-written arm it would be ignored (the arm
    serves its build, patches, python or container), so it is refused."""
    arms = data.get("arms")
    for i, arm in enumerate(arms if isinstance(arms, list) else []):
        if isinstance(arm, dict) and "commit" in arm:
            raise SpecabError(
                f"commit = {arm['commit']!r} on a hand-written arm serves nothing: "
                + ("[bisect] git sets each point's commit" if template
                   else "an arm runs its build, patches, python or container"),
                file=file,
                field=f"arms[{i}].commit",
                fix="remove it; serve a commit as `patches = [\"good..commit.diff\"]` (git diff "
                "good commit -- vllm/) or as its build (`python = \".../bin/python\"`)",
            )  # fmt: skip


def expand_history(data: dict[str, Any], file: Path) -> dict[str, Any]:
    """The document with one arm per point of `[bisect] git` (the one hand-written arm, if
    any, is their template); unchanged without it."""
    git = (data.get("bisect") or {}).get("git") if isinstance(data.get("bisect"), dict) else None
    _check_hand_commits(data, file, template=isinstance(git, dict))
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
        if p.get("served"):
            diff = served_diff(git, file, p["commit"], p["served"])
            arm["patches"] = [*template.get("patches", []), str(diff)]
            arm["allow_noop_patches"] = True  # a point may change no executed code
        arms.append(arm)
    return {**data, "arms": arms}
