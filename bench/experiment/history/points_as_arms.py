"""A `[bisect] git` range made into the experiment's arms: one arm per point, the file's one
hand-written arm their template, each point served as the arm's own build (which must be
`good`) plus the package's files that good..commit changes, as a diff written once under
specab's cache (named by its content), or with `build` as its own build's interpreter
(`build_cache/<commit>/bin/python`, made by the first boot that needs it). Parsing the file
(`bench.experiment.spec`) runs no git and writes nothing; `load_experiment` does this once,
for the commands that boot, plan or check the points.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.experiment.history.git_points import git_output, history_points
from bench.experiment.spec import (
    Experiment,
    git_range,
    parse_spec,
    read_document,
    validate_document,
)

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


def served_diff(git: dict[str, Any], file: Path, commit: str, served: list[str]) -> Path:
    """The point's served change, `git diff good commit` over its served modules, written
    once under specab's cache (named by its content: equal diffs share one file)."""
    repo = (file.parent / str(git.get("repo", ""))).resolve()
    good = git_output(repo, "rev-parse", f"{git.get('good')}^{{commit}}", file=file,
                field="bisect.git.good").strip()  # fmt: skip
    text = git_output(repo, "diff", "--no-renames", good, commit, "--", *served, file=file,
                field="bisect.git")  # fmt: skip
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    diff = _cache(good) / f"{digest}.diff"
    if not diff.is_file():
        diff.parent.mkdir(parents=True, exist_ok=True)
        tmp = diff.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(diff)
    return diff


def load_experiment(path: str | Path) -> Experiment:
    """The experiment file as the commands that boot, plan or check its arms need it: parsed
    (every problem of the file itself found before git runs), then a `[bisect] git` range's
    points made into its arms (git read once, each point's served diff written)."""
    file = Path(path)
    data = read_document(file)
    spec = parse_spec(data, file)
    if not spec.git_template:
        return spec
    return validate_document(expand_history(data, file), file)


def expand_history(data: dict[str, Any], file: Path) -> dict[str, Any]:
    """The document with one arm per point of `[bisect] git` (the one hand-written arm, if
    any, is their template: `parse_spec` checked it); unchanged without it."""
    git = git_range(data)
    if git is None:
        return data
    hand = data.get("arms") or [{}]
    template = {k: v for k, v in hand[0].items() if k != "name"}
    builds = build_cache(git, file) if git.get("build") is not None else None
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
