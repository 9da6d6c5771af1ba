"""Unified diffs as patches: `patches = ["fix.diff"]` runs the change an engineer would send
upstream (`git diff`, `git format-patch`, a PR's `.diff`; paths relative to the vLLM
repository, `a/vllm/...`) against the arm's own vLLM, without a monkeypatch.

The diff is parsed with `unidiff` and applied with `git apply` (offsets allowed, context
exact, as `git am` would) to copies of the touched files read from the arm's build: its
interpreter and PYTHONPATH, or inside its image. What comes out is an `AppliedDiff`: per
touched module its original file's sha256 in this build and the patched source, which the
patch directory serves at boot (`runtime/specab_patch.py`) to every server process.

Refused before anything is written, one line each: a hunk whose context is not in this
build (named by its number, header and line in the diff), a file missing from this build,
a change that needs compiling (csrc/, .cu, CMake: "its own build"), a deletion or rename,
anything else outside `vllm/**.py`, and a diff this build already carries (it reverses
cleanly) unless the arm allows no-op patches. Files no server imports (tests/, docs/, ...)
are left out and listed in the arm's definition.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import unidiff

from bench.errors import SpecabError

DIFF_SUFFIXES = (".diff", ".patch")
COMPILED = "a compiled change needs its own build: `python =` or `container =`"
_COMPILED_SUFFIXES = {
    ".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".cu", ".cuh", ".hip", ".cmake",
    ".metal", ".pyx", ".pxd", ".so",
}  # fmt: skip
_BUILD_FILES = {"CMakeLists.txt", "setup.py", "pyproject.toml", "MANIFEST.in", "Dockerfile"}
# Parts of the vLLM repository that no server process imports: a PR's diff touches them too.
_NOT_SERVED = ("tests/", "docs/", "examples/", "benchmarks/", ".github/", ".buildkite/")
_FAILED_AT = re.compile(r"patch failed: (?P<path>.+):(?P<line>\d+)\s*$", re.MULTILINE)

Reader = Callable[[str], bytes | None]  # repository path (vllm/...) -> file bytes or None


def is_diff(path: Path) -> bool:
    return path.suffix in DIFF_SUFFIXES


@dataclass(frozen=True)
class ServedModule:
    """One module a diff changes: what the build holds and what the boot serves instead."""

    path: str  # vllm/model_executor/models/x.py, as in the diff
    original_sha256: str | None  # None: the diff adds this module
    patched: bytes

    @property
    def module(self) -> str:
        name = self.path[: -len(".py")].replace("/", ".")
        return name.removesuffix(".__init__")

    @property
    def patched_sha256(self) -> str:
        return hashlib.sha256(self.patched).hexdigest()


@dataclass(frozen=True)
class AppliedDiff:
    """A diff applied to one build (`build`: how messages name it)."""

    source: Path
    sha256: str
    modules: tuple[ServedModule, ...]
    skipped: tuple[str, ...]  # files of the diff no server imports
    noop: bool  # this build already carries the change (allowed by the arm)
    build: str

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
        }


def _refuse(source: Path, line: int | None, problem: str, field: str, fix: str) -> SpecabError:
    where = f"{source}:{line}" if line else str(source)
    return SpecabError(problem, file=where, field=field, fix=fix)


def _parse(source: Path, text: str, field: str) -> unidiff.PatchSet:
    """The diff's files; a hunk header without line ranges (as bug reports abbreviate
    them) or anything `unidiff` cannot read is refused with its line."""
    for no, line in enumerate(text.splitlines(), 1):
        if line.startswith("@@") and not unidiff.constants.RE_HUNK_HEADER.match(line):
            raise _refuse(
                source,
                no,
                f"hunk header {line[:60]!r} has no line ranges (@@ -start,count +start,count @@)",
                field,
                "make the diff with `git diff` (or `diff -u`) on a vLLM checkout, not by hand",
            )
    try:
        patch = unidiff.PatchSet(text)
    except unidiff.UnidiffParseError as exc:
        problem = f"not a unified diff ({exc})"
        raise _refuse(source, None, problem, field, "use `git diff` output") from None
    if not len(patch):
        raise _refuse(source, None, "holds no file change", field, "point at a `git diff` output")
    return patch


def _header_line(f: unidiff.PatchedFile, index: int = 0) -> int | None:
    """Line of the diff holding hunk `index`'s `@@` header (None: no hunk)."""
    if len(f) <= index or not len(f[index]):
        return None
    no = f[index][0].diff_line_no
    return no - 1 if no else None


def _strip(name: str) -> str:
    return name[2:] if name[:2] in ("a/", "b/") else name


def _classify(source: Path, f: unidiff.PatchedFile, field: str) -> str:
    """'serve' or 'skip' for one file of the diff; anything else is refused."""
    path = _strip(f.target_file if f.is_added_file else f.source_file)
    first = _header_line(f)
    pure = PurePosixPath(path)
    if f.is_binary_file or pure.suffix in _COMPILED_SUFFIXES or pure.name in _BUILD_FILES:
        raise _refuse(source, first, f"{path}: {COMPILED}", field, _COMPILED_FIX)
    if path.startswith("csrc/") or pure.name.startswith("requirements"):
        raise _refuse(source, first, f"{path}: {COMPILED}", field, _COMPILED_FIX)
    if path.startswith(_NOT_SERVED) or (len(pure.parts) == 1 and pure.suffix != ".py"):
        return "skip"
    if not (path.startswith("vllm/") and pure.suffix == ".py"):
        raise _refuse(
            source,
            first,
            f"{path} is not Python source of the vLLM package (vllm/**.py); only those "
            "modules are served patched",
            field,
            "leave it out of the diff (`git diff -- vllm/`), or " + _COMPILED_FIX,
        )
    renamed = not f.is_added_file and _strip(f.source_file) != _strip(f.target_file)
    if f.is_removed_file or renamed:
        raise _refuse(
            source,
            first,
            f"{path}: a diff arm cannot delete or rename a module",
            field,
            "keep the module and change its content, or build vLLM with the change and "
            "point `python =` (or `container =`) at it",
        )
    return "serve"


_COMPILED_FIX = (
    "build vLLM with the change and point the arm's `python =` (a venv) or `container =` "
    "(an image) at that build; keep the Python part of the fix in the diff"
)


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
    path = _strip(f.source_file)
    m = _FAILED_AT.search(error)
    start = int(m["line"]) if m else None
    index = next((i for i, h in enumerate(f) if h.source_start == start), 0)
    h = f[index] if len(f) else None
    header = (
        f"@@ -{h.source_start},{h.source_length} +{h.target_start},{h.target_length} @@"
        if h
        else ""
    )
    line = _header_line(f, index)
    return _refuse(
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
        raise _refuse(source, None, "is not UTF-8 text", field, "use `git diff` output") from None
    patch = _parse(source, text, field)
    served = [f for f in patch if _classify(source, f, field) == "serve"]
    skipped = tuple(_strip(f.path) for f in patch if f not in served)
    strip = 1 if all(f.target_file.startswith("b/") for f in served) else 0
    with tempfile.TemporaryDirectory(prefix="specab-diff-") as tmp_name:
        tmp = Path(tmp_name) / "repo"
        originals: dict[str, bytes | None] = {}
        for f in served:
            path = _strip(f.target_file if f.is_added_file else f.source_file)
            originals[path] = read(path)
            if originals[path] is None and not f.is_added_file:
                problem = f"{path} is not in {build}"
                raise _refuse(source, _header_line(f), problem, field, _OTHER_BUILD_FIX)
            if originals[path] is not None:
                (tmp / path).parent.mkdir(parents=True, exist_ok=True)
                (tmp / path).write_bytes(originals[path] or b"")
        tmp.mkdir(parents=True, exist_ok=True)
        states = _states(source, served, tmp, strip, build, field)
        forward = [p for p, s in states.items() if s == "applies"]
        if forward and len(forward) < len(states):
            done = next(p for p, s in states.items() if s != "applies")
            raise _refuse(
                source,
                None,
                f"{done} already carries this diff's change in {build}, the other files do not",
                field,
                _OTHER_BUILD_FIX,
            )
        if not forward and not allow_noop:
            raise _refuse(
                source,
                None,
                f"{build} already carries this diff (it reverses cleanly), so this arm would "
                "equal its baseline",
                field,
                "drop the diff from the arm, or set allow_noop_patches = true to run it anyway",
            )
        if forward and (err := _git_apply(tmp, source, strip, forward)):
            raise _refuse(source, None, f"git apply failed: {err}", field, _OTHER_BUILD_FIX)
        modules = tuple(
            ServedModule(
                path=p,
                original_sha256=hashlib.sha256(o).hexdigest() if o is not None else None,
                patched=(tmp / p).read_bytes(),
            )
            for p, o in originals.items()
        )
    sha = hashlib.sha256(blob).hexdigest()
    return AppliedDiff(source, sha, modules, skipped, not forward, build)


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
        path = _strip(f.target_file if f.is_added_file else f.source_file)
        error = _git_apply(tmp, source, strip, [path], "--check")
        if not error:
            states[path] = "applies"
        elif not _git_apply(tmp, source, strip, [path], "--check", "--reverse"):
            states[path] = "applied"
        else:
            raise _conflict(source, f, error, build, field)
    return states


def files_reader(root: Path) -> Reader:
    """Read repository paths (vllm/...) from the directory that holds the vllm package."""

    def read(path: str) -> bytes | None:
        p = root / path
        return p.read_bytes() if p.is_file() else None

    return read


def touched_paths(source: Path) -> list[str]:
    """The repository paths a diff touches ([] when it cannot be read: `apply_diff` then
    says why), so a reader that must fetch files in one go (an image) knows which."""
    try:
        return [_strip(f.path) for f in unidiff.PatchSet(source.read_text(encoding="utf-8"))]
    except (OSError, UnicodeDecodeError, unidiff.UnidiffParseError):
        return []
