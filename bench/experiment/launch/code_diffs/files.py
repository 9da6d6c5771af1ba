"""The files of a unified diff: parsed with `unidiff` (a hunk header without line ranges,
or text it cannot read, refused with its line), and each file classified as served (Python
file under vllm/: Python modules and the data files beside them, changed, added, deleted or
renamed), skipped (tests/, docs/, ...: no server imports them) or refused (compiled code,
build files, binary files, paths outside the package or one directory too high)."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import unidiff

from bench.errors import SpecabError
from bench.experiment.history import needs_build

DIFF_SUFFIXES = (".diff", ".patch")
COMPILED = "a compiled change needs its own build: `python =` or `container =`"
# Parts of the vLLM repository that no server process imports: a PR's diff touches them too.
_NOT_SERVED = ("tests/", "docs/", "examples/", "benchmarks/", ".github/", ".buildkite/")


def is_diff(path: Path) -> bool:
    return path.suffix in DIFF_SUFFIXES


def refuse(source: Path, line: int | None, problem: str, field: str, fix: str) -> SpecabError:
    where = f"{source}:{line}" if line else str(source)
    return SpecabError(problem, file=where, field=field, fix=fix)


def commit_refused(exc: SpecabError, commit: str, point: str, spec_file: str) -> SpecabError:
    """A git history point's served diff refused: said of its commit, not of a cache file."""
    return SpecabError(
        f"commit {commit[:12]} (point {point}): {exc.problem}",
        file=spec_file,
        field="bisect.git",
        fix="the range's good end must be the commit the arm's vLLM was built from (each "
        "point serves its Python over that build); or give [bisect] git a build command",
    )


def parse_diff(source: Path, text: str, field: str) -> unidiff.PatchSet:
    """The diff's files; a hunk header without line ranges (as bug reports abbreviate
    them) or anything `unidiff` cannot read is refused with its line."""
    for no, line in enumerate(text.splitlines(), 1):
        if line.startswith("@@") and not unidiff.constants.RE_HUNK_HEADER.match(line):
            raise refuse(
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
        raise refuse(source, None, problem, field, "use `git diff` output") from None
    if not len(patch):
        raise refuse(source, None, "holds no file change", field, "point at a `git diff` output")
    return patch


def header_line(f: unidiff.PatchedFile, index: int = 0) -> int | None:
    """Line of the diff holding hunk `index`'s `@@` header (None: no hunk)."""
    if len(f) <= index or not len(f[index]):
        return None
    no = f[index][0].diff_line_no
    return no - 1 if no else None


def strip_prefix(name: str) -> str:
    return name[2:] if name[:2] in ("a/", "b/") else name


def classify(source: Path, f: unidiff.PatchedFile, field: str) -> str:
    """'serve' or 'skip' for one file of the diff; anything else is refused."""
    path = strip_prefix(f.target_file if f.is_added_file else f.source_file)
    first = header_line(f)
    pure = PurePosixPath(path)
    if needs_build(path):
        raise refuse(source, first, f"{path}: {COMPILED}", field, _COMPILED_FIX)
    if path.startswith(_NOT_SERVED) or (len(pure.parts) == 1 and pure.suffix != ".py"):
        return "skip"
    if f.is_binary_file:
        raise refuse(
            source,
            first,
            f"{path} is a binary file, which a text diff cannot carry",
            field,
            "build vLLM with the change and point the arm's `python =` or `container =` at "
            "it, or leave the file out of the diff",
        )
    if "vllm" in pure.parts[1:] and pure.suffix == ".py":
        extra = "/".join(pure.parts[: pure.parts.index("vllm")])
        raise refuse(
            source,
            first,
            f"{path}: its path has a leading directory ({extra}/) before vllm/, so it names "
            "no file of the build",
            field,
            "make the diff from the vLLM repository root (`git diff` in the checkout, or "
            "`git diff --no-index` run from the directory that holds vllm/), so its paths "
            "read a/vllm/... and b/vllm/...",
        )
    if not path.startswith("vllm/"):
        raise refuse(
            source,
            first,
            f"{path} is not a file of the vLLM package (vllm/...); only those are served patched",
            field,
            "leave it out of the diff (`git diff -- vllm/`), or " + _COMPILED_FIX,
        )
    return "serve"


_COMPILED_FIX = (
    "build vLLM with the change and point the arm's `python =` (a venv) or `container =` "
    "(an image) at that build; keep the Python part of the fix in the diff"
)
