"""A long git range listed as bisect points: how long `[bisect] git` takes to read a range of
N first-parent commits (each point's commit, subject, files, what it serves and leaves
unserved, its served diff written once) and to find which points run the same code as the
one before them, on a synthetic repository shaped like vLLM's (a package of 200 modules; the
commits touch Python, docs, csrc/, requirements and package data in turn).

    .venv/bin/python benchmarks/bench_history_points.py [--commits 500] [--modules 200]

Prints the seconds of each part and the total; the goal for 500 commits is 30 s on a
2-core machine. The served diffs are written under a temporary cache, removed afterwards.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b", *args],
        check=True, capture_output=True,
    )  # fmt: skip


def make_repo(root: Path, commits: int, modules: int) -> Path:
    repo = root / "src"
    for i in range(modules):
        path = repo / "vllm" / f"m{i // 20}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"X{i} = {i}\n" + "def f():\n    return 1\n" * 20)
    _git(root, "init", "-q", "-b", "main", str(repo))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "good")
    _git(repo, "tag", "good")
    kinds = ["py", "py", "comment", "docs", "csrc", "pin", "data"]
    for c in range(commits):
        kind = kinds[c % len(kinds)]
        i = (c * 7) % modules
        target = {
            "py": repo / "vllm" / f"m{i // 20}" / f"mod{i}.py",
            "comment": repo / "vllm" / f"m{i // 20}" / f"mod{i}.py",
            "docs": repo / "docs" / f"page{c}.md",
            "csrc": repo / "csrc" / "ops.cpp",
            "pin": repo / "requirements" / "common.txt",
            "data": repo / "vllm" / "configs" / f"c{c % 10}.json",
        }[kind]
        target.parent.mkdir(parents=True, exist_ok=True)
        old = target.read_text() if target.exists() else ""
        line = {"py": f"Y{c} = {c}\n", "comment": f"# note {c}\n"}.get(kind, f"{c}\n")
        target.write_text(old + line)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", f"{kind} {c}")
    return repo


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commits", type=int, default=500)
    ap.add_argument("--modules", type=int, default=200)
    args = ap.parse_args()
    from bench.experiment.history import expand_history, history_points
    from bench.experiment.manifest import same_as

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.monotonic()
        repo = make_repo(root, args.commits, args.modules)
        made = time.monotonic() - t0
        os.environ["XDG_CACHE_HOME"] = str(root / "cache")
        spec = root / "e.toml"
        git = {"repo": "src", "good": "good", "bad": "main", "package": "vllm"}
        t0 = time.monotonic()
        points = history_points(git, spec)
        listed = time.monotonic() - t0
        t0 = time.monotonic()
        arms = expand_history({"bisect": {"git": git}, "arms": [{}]}, spec)["arms"]
        expanded = time.monotonic() - t0
        t0 = time.monotonic()
        twins = same_as(repo, [p["commit"] for p in points], "vllm",
                        [p.get("served", []) for p in points])  # fmt: skip
        same = time.monotonic() - t0
        cache = root / "cache" / "specab" / "bisect"
        size = sum(f.stat().st_size for f in cache.rglob("*.diff")) if cache.exists() else 0
        print(
            f"{args.commits} commits ({made:.0f} s to make): points listed in {listed:.1f} s, "
            f"made into {len(arms)} arms with their diffs in {expanded:.1f} s, same code found "
            f"in {same:.1f} s, total {listed + expanded + same:.1f} s; "
            f"{sum(t is not None for t in twins)} points same as the one before; "
            f"served diffs written: {size / 1e6:.1f} MB"
        )


if __name__ == "__main__":
    main()
