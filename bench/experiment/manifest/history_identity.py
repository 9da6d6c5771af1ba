"""Which points of a git history run the same code as the point before them: every file the
step between them changes under the package is Python whose syntax tree, comments,
docstrings and layout left out, is unchanged (the no-op-diff rule of diff arms). Such a
point cannot be the first changed one; the search boots it not and says "same code as …"."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.experiment.launch import same_code


def _show(repo: Path, rev: str, path: str) -> bytes | None:
    done = subprocess.run(["git", "-C", str(repo), "show", f"{rev}:{path}"], capture_output=True)
    return done.stdout if done.returncode == 0 else None


def same_code_step(repo: Path, before: str, after: str, package: str) -> bool:
    """The step before..after changes no executed code of the package."""
    listed = subprocess.run(
        ["git", "-C", str(repo), "diff", "--name-only", before, after, "--", f"{package}/"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    for path in listed:
        if not path.endswith(".py"):
            return False
        old, new = _show(repo, before, path), _show(repo, after, path)
        if old is None or new is None or not same_code(old, new):
            return False
    return True


def same_as(repo: Path, commits: list[str], package: str) -> list[int | None]:
    """Per point, the earlier point it runs the same code as (the first of its run), else
    None; the good end is always its own."""
    out: list[int | None] = [None]
    for k in range(1, len(commits)):
        if same_code_step(repo, commits[k - 1], commits[k], package):
            prev = out[k - 1]
            out.append(prev if prev is not None else k - 1)
        else:
            out.append(None)
    return out
