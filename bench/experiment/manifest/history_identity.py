"""Which points of a git history run the same code as the point before them: every file the
step between them changes in what the point runs (its served modules for a diff point, the
whole tree a build reads for a built one) is Python whose syntax tree, comments, docstrings
and layout left out, is unchanged (the no-op-diff rule of diff arms). Such a point cannot be
the first changed one; the search boots it not and says "same code as …"."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.experiment.launch import same_code


def _show(repo: Path, rev: str, path: str) -> bytes | None:
    done = subprocess.run(["git", "-C", str(repo), "show", f"{rev}:{path}"], capture_output=True)
    return done.stdout if done.returncode == 0 else None


# Parts of a repository that no build or server reads: a commit that changes only these
# runs the code of the commit before it, also when each commit is its own build.
_UNREAD = ("tests/", "docs/", "examples/", "benchmarks/", ".github/", ".buildkite/")


def same_code_step(
    repo: Path, before: str, after: str, package: str, served: list[str] | None = None
) -> bool:
    """The step before..after changes no executed code: of the package's `served` modules
    (a diff point), or of the whole tree a build reads (`served` None: every file but those
    no build reads, Python compared by syntax tree, anything else a change)."""
    scope = ["--", *served] if served is not None else []
    if served == []:
        return True
    listed = subprocess.run(
        ["git", "-C", str(repo), "diff", "--name-only", before, after, *scope],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    for path in listed:
        if served is None and path.startswith(_UNREAD):
            continue
        if not path.endswith(".py"):
            return False
        old, new = _show(repo, before, path), _show(repo, after, path)
        if old is None or new is None or not same_code(old, new):
            return False
    return True


def same_as(
    repo: Path, commits: list[str], package: str, served: list[list[str]] | None = None
) -> list[int | None]:
    """Per point, the earlier point it runs the same code as (the first of its run), else
    None; the good end is always its own. `served`: each diff point's served modules (None
    for builds: the whole tree counts)."""
    out: list[int | None] = [None]
    for k in range(1, len(commits)):
        scope = None if served is None else sorted({*served[k - 1], *served[k]})
        if same_code_step(repo, commits[k - 1], commits[k], package, scope):
            prev = out[k - 1]
            out.append(prev if prev is not None else k - 1)
        else:
            out.append(None)
    return out
