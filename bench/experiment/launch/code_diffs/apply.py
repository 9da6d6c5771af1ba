"""Unified diffs as patches: `patches = ["fix.diff"]` runs the change an engineer would send
upstream (`git diff`, `git format-patch`, a PR's `.diff`; paths relative to the vLLM
repository, `a/vllm/...`) against the arm's own vLLM, without a monkeypatch.

The diff is parsed with `unidiff` and applied with `git apply` (offsets allowed, context
exact, as `git am` would) to copies of the touched files read from the arm's build: its
interpreter and PYTHONPATH, or inside its image. What comes out is an `AppliedDiff`: per
touched file its original's sha256 in this build and the patched source, which the
patch directory serves at boot (`runtime/specab_patch.py`) to every server process.

Refused before anything is written, one line each: a hunk whose context is not in this
build (named by its number, header and line in the diff), a file missing from this build,
a change that needs compiling (csrc/, .cu, CMake: "its own build"), a binary file, anything
else outside `vllm/`, and a diff this build already carries (it reverses cleanly) or that
changes no executed code (comments, docstrings, formatting: compared by syntax tree,
`code_identity`) unless the arm allows no-op patches. Deletions, renames and the data files
beside the modules are served; files no server imports (tests/, docs/, ...) are left out
and listed in the arm's definition.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import unidiff

from bench.errors import SpecabError
from bench.experiment.launch.code_diffs.files import (
    classify,
    header_line,
    parse_diff,
    refuse,
    strip_prefix,
)
from bench.experiment.launch.code_diffs.identity import same_code

_FAILED_AT = re.compile(r"patch failed: (?P<path>.+):(?P<line>\d+)\s*$", re.MULTILINE)

Reader = Callable[[str], bytes | None]  # repository path (vllm/...) -> file bytes or None


@dataclass(frozen=True)
class ServedModule:
    """One file of the package a diff changes (a module, or a data file beside the modules:
    a JSON config, a chat template): what the build holds and what the boot serves instead."""

    path: str  # vllm/model_executor/models/x.py, as in the diff
    original_sha256: str | None  # None: the diff adds this file
    patched: bytes | None  # None: the diff deletes this file (a rename deletes its old path)

    @property
    def is_module(self) -> bool:
        return self.path.endswith(".py")

    @property
    def module(self) -> str:
        """The module's import name; for a data file, its path (no module)."""
        if not self.is_module:
            return self.path
        name = self.path[: -len(".py")].replace("/", ".")
        return name.removesuffix(".__init__")

    @property
    def patched_sha256(self) -> str | None:
        return hashlib.sha256(self.patched).hexdigest() if self.patched is not None else None


@dataclass(frozen=True)
class AppliedDiff:
    """A diff applied to one build (`build`: how messages name it)."""

    source: Path
    sha256: str
    modules: tuple[ServedModule, ...]
    skipped: tuple[str, ...]  # files of the diff no server imports
    noop: bool  # this build already carries the change (allowed by the arm)
    build: str
    code_unchanged: tuple[str, ...] = ()  # served files whose code the diff leaves as it was

    @property
    def name(self) -> str:
        return self.source.stem

    def definition(self) -> dict[str, Any]:
        """What the arm's definition records: resume never mixes two versions of a module."""
        files = [
            {
                "path": m.path,
                "original_sha256": m.original_sha256,
                "patched_sha256": m.patched_sha256,
            }
            for m in self.modules
        ]
        return {
            "kind": "diff",
            "files": files,
            **({"skipped": list(self.skipped)} if self.skipped else {}),
            **({"already_applied": True} if self.noop else {}),
            **({"code_unchanged": list(self.code_unchanged)} if self.code_unchanged else {}),
        }


def _git_apply(tmp: Path, diff: Path, strip: int, paths: list[str], *extra: str) -> str:
    """`git apply` in `tmp` (outside any repository) restricted to `paths`; '' when it
    succeeds, else its error text."""
    args = [
        "git",
        "apply",
        f"-p{strip}",
        *extra,
        *(f"--include={p}" for p in paths),
        str(diff.resolve()),
    ]
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp.parent), "LC_ALL": "C"}
    out = subprocess.run(args, cwd=tmp, capture_output=True, text=True, env=env, timeout=60)
    return "" if out.returncode == 0 else (out.stderr.strip() or f"git apply exit {out.returncode}")


def _conflict(
    source: Path, f: unidiff.PatchedFile, error: str, build: str, field: str
) -> SpecabError:
    """The refusal for a file whose hunks do not apply: the hunk git stopped at."""
    path = strip_prefix(f.source_file)
    m = _FAILED_AT.search(error)
    start = int(m["line"]) if m else None
    index = next((i for i, h in enumerate(f) if h.source_start == start), 0)
    h = f[index] if len(f) else None
    header = (
        f"@@ -{h.source_start},{h.source_length} +{h.target_start},{h.target_length} @@"
        if h
        else ""
    )
    line = header_line(f, index)
    return refuse(
        source,
        line,
        f"hunk {index + 1} of {path} ({header}) does not apply to {build}: its context "
        "differs in this build",
        field,
        "make the diff against this build (`git diff` on a checkout of the same vLLM "
        "version), or point the arm's `python =` / `container =` at the build it was made for",
    )


def apply_diff(
    source: Path, read: Reader, *, build: str, field: str, allow_noop: bool
) -> AppliedDiff:
    """Apply the diff at `source` to the build `read` reads from (SpecabError: refused)."""
    blob = source.read_bytes()
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError:
        raise refuse(source, None, "is not UTF-8 text", field, "use `git diff` output") from None
    patch = parse_diff(source, text, field)
    served = [f for f in patch if classify(source, f, field) == "serve"]
    skipped = tuple(strip_prefix(f.path) for f in patch if f not in served)
    named = [n for f in served for n in (f.source_file, f.target_file) if n != "/dev/null"]
    strip = 1 if all(n.startswith(("a/", "b/")) for n in named) else 0
    with tempfile.TemporaryDirectory(prefix="specab-diff-") as tmp_name:
        tmp = Path(tmp_name) / "repo"
        originals = _originals(source, served, read, tmp, build, field)
        states = _states(source, served, tmp, strip, build, field)
        forward = [p for p, s in states.items() if s == "applies"]
        if forward and len(forward) < len(states):
            done = next(p for p, s in states.items() if s != "applies")
            raise refuse(
                source,
                None,
                f"{done} already carries this diff's change in {build}, the other files do not",
                field,
                _OTHER_BUILD_FIX,
            )
        if not forward and not allow_noop:
            raise refuse(
                source,
                None,
                f"{build} already carries this diff (it reverses cleanly), so this arm would "
                "equal its baseline",
                field,
                "drop the diff from the arm, or set allow_noop_patches = true to run it anyway",
            )
        if forward and (err := _git_apply(tmp, source, strip, forward)):
            raise refuse(source, None, f"git apply failed: {err}", field, _OTHER_BUILD_FIX)
        modules = tuple(
            ServedModule(
                path=p,
                original_sha256=hashlib.sha256(o).hexdigest() if o is not None else None,
                patched=(tmp / p).read_bytes() if (tmp / p).is_file() else None,
            )
            for p, o in originals.items()
        )
    unchanged = tuple(
        m.path
        for m in modules
        if forward
        and m.is_module
        and (o := originals[m.path]) is not None
        and m.patched is not None
        and same_code(o, m.patched)
    )
    if modules and len(unchanged) == len(modules) and not allow_noop:
        raise refuse(
            source,
            None,
            f"changes no executed code: {', '.join(unchanged)} differ from {build} only in "
            "comments, docstrings or formatting, so this arm would equal its baseline",
            field,
            "change code in the diff, drop it from the arm, or set allow_noop_patches = true "
            "to run it anyway (an A/A control)",
        )
    sha = hashlib.sha256(blob).hexdigest()
    return AppliedDiff(source, sha, modules, skipped, not forward, build, unchanged)


def file_paths(f: unidiff.PatchedFile) -> list[str]:
    """The repository paths one file of a diff reads or writes: both of a rename's."""
    names = (f.source_file, f.target_file)
    return list(dict.fromkeys(strip_prefix(n) for n in names if n != "/dev/null"))


def _originals(
    source: Path, served: list[unidiff.PatchedFile], read: Reader, tmp: Path, build: str,
    field: str,
) -> dict[str, bytes | None]:  # fmt: skip
    """The build's copy of every path the served files touch, written under `tmp` (None:
    the diff adds it); a path the diff changes that the build lacks is refused."""
    originals: dict[str, bytes | None] = {}
    for f in served:
        for path in file_paths(f):
            originals[path] = read(path)
            added = f.is_added_file or path != strip_prefix(f.source_file)
            if originals[path] is None and not added:
                problem = f"{path} is not in {build}"
                raise refuse(source, header_line(f), problem, field, _OTHER_BUILD_FIX)
            if originals[path] is not None:
                (tmp / path).parent.mkdir(parents=True, exist_ok=True)
                (tmp / path).write_bytes(originals[path] or b"")
    tmp.mkdir(parents=True, exist_ok=True)
    return originals


_OTHER_BUILD_FIX = (
    "make the diff against the arm's vLLM build, or point the arm at the build it was made for"
)


def _states(
    source: Path, served: list[unidiff.PatchedFile], tmp: Path, strip: int, build: str, field: str
) -> dict[str, str]:
    """Per served file: 'applies', or 'applied' (already in this build); a conflict is
    refused naming its hunk."""
    states: dict[str, str] = {}
    for f in served:
        paths = file_paths(f)
        error = _git_apply(tmp, source, strip, paths, "--check")
        if not error:
            state = "applies"
        elif not _git_apply(tmp, source, strip, paths, "--check", "--reverse"):
            state = "applied"
        else:
            raise _conflict(source, f, error, build, field)
        states.update(dict.fromkeys(paths, state))
    return states
