"""Before anything is written: the reference's interpreter can import torch, transformers
and the forward (MODULE:FUNCTION on the arm's `path`), and the forward's own check, where it
has one (`FUNCTION.check(drafter)`), loads the drafter's checkpoint. A failure is one line
naming what is missing and the command that installs it, or the tensor the check named."""

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
paths, spec, drafter = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
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
if not callable(fn):
    print(json.dumps({"error": f"{module} has no function {name!r}"})); sys.exit(0)
check = getattr(fn, "check", None)
try:
    if callable(check):
        check(drafter)
except Exception as exc:
    print(json.dumps({"load": " ".join(f"{type(exc).__name__}: {exc}".split())[:400]}))
    sys.exit(0)
print(json.dumps({}))
"""


def check_reference_interpreter(
    ref: ReferenceForward, spec_file: str | Path, python: str, arm: str, drafter: str
) -> None:
    """SpecabError (exit 2, nothing written) unless `python` can run the forward and its
    check loads `drafter`."""
    field = f"arms({arm}).reference"
    paths = json.dumps(forward_paths(ref, spec_file))
    try:
        out = subprocess.run(
            [python, "-c", _PROBE, paths, ref.forward, drafter],
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
    if "load" in said:
        raise SpecabError(
            f"the reference forward {ref.forward!r} cannot load the drafter {drafter}: "
            f"{said['load']}", file=spec_file, field=f"{field}.forward",
            fix="point speculative_config.model at the checkpoint the training code wrote, "
            "or the forward at the module that checkpoint was trained as",
        )  # fmt: skip
