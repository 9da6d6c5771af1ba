"""The points of `[bisect] git = { repo, good, bad }`, read from git: `good` and every
first-parent commit of good..bad (merges included), oldest first, each with its subject, date
and files, and, served as a diff over the build, the package's files it serves and what it
leaves unserved (compiled code, dependency pins, binary files). `strict` refuses a range with
compiled or dependency changes instead, naming the commit. Reading only: nothing is written.
"""

from __future__ import annotations

import copy
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
        or path.startswith(("csrc/", "requirements/"))
        or pure.name.startswith("requirements")
    )


def git_output(repo: Path, *args: str, file: Path, field: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"git {args[0]} failed"])[-1]
        raise SpecabError(why, file=file, field=field, fix="check the repository and the revisions")
    return done.stdout


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
    good = git_output(repo, "rev-parse", "--verify", f"{git.get('good')}^{{commit}}", file=file,
                field="bisect.git.good").strip()  # fmt: skip
    bad = git_output(repo, "rev-parse", "--verify", f"{git.get('bad')}^{{commit}}", file=file,
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
    listed = git_output(repo, "rev-list", "--first-parent", "--reverse", f"{good}..{bad}",
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
    counts = git_output(repo, "diff", "--numstat", "--no-renames", good, commit, "--",
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
    meta = git_output(
        repo, "show", "-s", "--format=%s%x00%cI", commit, file=file, field="bisect.git"
    )
    subject, _, date = meta.rstrip("\n").partition("\x00")
    files = git_output(repo, "show", "--format=", "--name-only", "--no-renames", "--first-parent",
                 "-m", commit, file=file, field="bisect.git").split()  # fmt: skip
    return {"commit": commit, "subject": subject, "date": date, "files": sorted(set(files))}
