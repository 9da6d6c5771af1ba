"""Before anything is written: the reference's interpreter can import torch, transformers
and the forward (MODULE:FUNCTION on the arm's `path`). A failure is one line naming what is
missing and the command that installs it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from bench.errors import SpecabError
from bench.experiment.reference.forward_source import forward_paths
from bench.experiment.spec import ReferenceForward

# Run by the reference's interpreter: one JSON line, {"missing": package} or {"error": ...}.
_PROBE = """
import importlib, json, sys
paths, spec = json.loads(sys.argv[1]), sys.argv[2]
sys.path[:0] = paths
for need in ("torch", "transformers", "safetensors"):
    try:
        importlib.import_module(need)
    except ImportError:
        print(json.dumps({"missing": need})); sys.exit(0)
module, _, name = spec.partition(":")
try:
    fn = getattr(importlib.import_module(module), name, None)
except ImportError as exc:
    print(json.dumps({"missing": exc.name or module, "module": module})); sys.exit(0)
except Exception as exc:
    print(json.dumps({"error": f"importing {module}: {type(exc).__name__}: {exc}"})); sys.exit(0)
print(json.dumps({"error": f"{module} has no function {name!r}"} if not callable(fn) else {}))
"""


def check_reference_interpreter(
    ref: ReferenceForward, spec_file: str | Path, python: str, arm: str
) -> None:
    """SpecabError (exit 2, nothing written) unless `python` can run the forward."""
    field = f"arms({arm}).reference"
    try:
        out = subprocess.run(
            [python, "-c", _PROBE, json.dumps(forward_paths(ref, spec_file)), ref.forward],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SpecabError(
            f"the reference interpreter {python} cannot run ({exc})", file=spec_file,
            field=f"{field}.python", fix="point python at a working interpreter",
        ) from None  # fmt: skip
    lines = out.stdout.strip().splitlines()
    said = json.loads(lines[-1]) if out.returncode == 0 and lines else None
    if said is None:
        tail = " ".join(out.stderr.split()[-30:])
        raise SpecabError(
            f"the reference interpreter {python} failed: {tail}", file=spec_file,
            field=f"{field}.python", fix="point python at a working interpreter",
        )  # fmt: skip
    if "missing" in said:
        where = f" (imported by {said['module']})" if said.get("module") else ""
        raise SpecabError(
            f"the reference's interpreter {python} has no module {said['missing']!r}{where}",
            file=spec_file, field=f"{field}.python",
            fix=f"{python} -m pip install {said['missing'].split('.')[0]}, or set "
            "reference.python to the training framework's interpreter (or reference.path to "
            "the checkout that holds the forward)",
        )  # fmt: skip
    if "error" in said:
        raise SpecabError(
            f"the reference forward {ref.forward!r}: {said['error']}", file=spec_file,
            field=f"{field}.forward",
            fix="name a MODULE:FUNCTION the interpreter can import (docs/reference-forward.md)",
        )  # fmt: skip
