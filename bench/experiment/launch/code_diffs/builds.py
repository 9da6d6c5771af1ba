"""Which build a diff arm's diff is applied to: the arm's interpreter with its PYTHONPATH
(where it imports vllm from, without importing it), or the arm's image (read inside it).

Answers are cached per diff content and build, so preflight, the arm's definition and every
boot of a driver apply a diff once.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import unidiff

from bench.errors import SpecabError
from bench.experiment.launch.code_diffs.apply import AppliedDiff, Reader, apply_diff
from bench.experiment.launch.code_diffs.files import strip_prefix
from bench.experiment.launch.containers import container_vllm_files, container_vllm_version
from bench.experiment.launch.environment import interpreter_vllm_version, vllm_package_dir
from bench.experiment.spec import ContainerSpec


def applied_diff(
    source: Path,
    *,
    python: str,
    pythonpath: str,
    container: ContainerSpec | None,
    allow_noop: bool,
    field: str,
) -> AppliedDiff | None:
    """The diff applied to the arm's build (SpecabError when refused); None when that build
    cannot be read here (an image this machine does not have: checked when the boot starts)."""
    sha = hashlib.sha256(source.read_bytes()).hexdigest()
    key = container.model_dump_json() if container is not None else ""
    return _cached(str(source), sha, python, pythonpath, key, allow_noop, field)


@functools.lru_cache(maxsize=64)
def _cached(
    source: str, sha: str, python: str, pythonpath: str, container: str, allow: bool, field: str
) -> AppliedDiff | None:
    path = Path(source)
    if container:
        c = ContainerSpec.model_validate_json(container)
        found = container_vllm_files(c, python, tuple(touched_paths(path)))
        if found is None:
            return None
        root, files = found
        version = container_vllm_version(c, python) or "?"
        build = f"vLLM {version} in image {c.image} ({root})"
        return apply_diff(path, files.get, build=build, field=field, allow_noop=allow)
    pkg = vllm_package_dir(python, pythonpath)
    if pkg is None:
        raise SpecabError(
            f"interpreter {python} cannot import vllm, so the diff has nothing to apply to",
            file=path,
            field=field,
            fix="point the arm's python at a venv that has the vLLM the diff was made for",
        )
    build = f"vLLM {interpreter_vllm_version(python) or '?'} ({pkg})"
    return apply_diff(path, files_reader(pkg.parent), build=build, field=field, allow_noop=allow)


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
        return [strip_prefix(f.path) for f in unidiff.PatchSet(source.read_text(encoding="utf-8"))]
    except (OSError, UnicodeDecodeError, unidiff.UnidiffParseError):
        return []
