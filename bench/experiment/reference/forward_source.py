"""What defines a reference forward beyond the experiment file: the file its MODULE lives in
(found on the arm's `path`, hashed: an edit to the training code is a new arm version) and
the torch, transformers and reference packages (z-lab's `dflash`, `speculators`) its
interpreter runs, read without importing them."""

from __future__ import annotations

import functools
import hashlib
import subprocess
from pathlib import Path
from typing import Any

from bench.experiment.spec import ReferenceForward, resolve_path

# specab's built-in forwards (`specab_zlab_dflash:dflash_logits`): importable by bare name,
# after the arm's own `path`.
RUNTIME_DIR = Path(__file__).resolve().parents[1] / "runtime"
_VERSIONS = (
    "import importlib.metadata as m\n"
    "for d in ('torch', 'transformers', 'dflash', 'speculators'):\n"
    "    try:\n        print(d + '==' + m.version(d))\n"
    "    except m.PackageNotFoundError:\n        print(d + '==')\n"
)


def forward_paths(ref: ReferenceForward, spec_file: str | Path) -> list[str]:
    """The arm's `path` entries, resolved against the experiment file, then specab's
    built-in forwards."""
    return [*(str(resolve_path(spec_file, p)) for p in ref.path), str(RUNTIME_DIR)]


def forward_file(ref: ReferenceForward, spec_file: str | Path) -> Path | None:
    """The source file of the forward's module on the arm's `path` (a module or a package's
    `__init__.py`); None where it is installed in the interpreter instead."""
    parts = ref.forward.partition(":")[0].split(".")
    for root in forward_paths(ref, spec_file):
        base = Path(root).joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


@functools.lru_cache(maxsize=16)
def interpreter_versions(python: str) -> dict[str, str]:
    """torch, transformers, dflash and speculators as installed for `python` ("" for a
    missing one, {} when the interpreter cannot run)."""
    try:
        out = subprocess.run([python, "-I", "-c", _VERSIONS], capture_output=True, text=True,
                             timeout=60)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if out.returncode != 0:
        return {}
    return dict(line.split("==", 1) for line in out.stdout.split() if "==" in line)


def reference_definition(
    ref: ReferenceForward, spec_file: str | Path, python: str
) -> dict[str, Any]:
    """The reference's part of its arm's definition (the manifest, the arm's hash)."""
    source = forward_file(ref, spec_file)
    return {
        **ref.model_dump(mode="json", exclude={"trace_map"}),
        "forward_sha256": hashlib.sha256(source.read_bytes()).hexdigest() if source else None,
        **interpreter_versions(python),
    }
