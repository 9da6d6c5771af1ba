"""A diff arm whose changed model files the arm's models never import: an A/A under another
definition hash, said by `validate` (a warning, not a refusal: a registry or an architecture
this check cannot read is no proof).

Which model modules a server loads comes from the build's own registry (architecture ->
module, read from `vllm/model_executor/models/registry.py`, not imported), the target's and
draft's effective `config.json` architectures, and the imports between model modules. A
speculative method that wraps the target (EAGLE, MTP, DFlash) may load `<module>_eagle`,
`_eagle3`, `_mtp` or `_dflash` beside it, so those count as loaded. Only files under
`vllm/model_executor/models/` are judged; anything else may be imported by any server."""

from __future__ import annotations

import json
from pathlib import Path

from bench.experiment.launch import (
    MODELS_PACKAGE,
    AppliedDiff,
    ResolvedArm,
    effective_config,
    files_reader,
    loaded_model_modules,
    model_modules,
    vllm_package_dir,
)

_WRAPPERS = ("_eagle", "_eagle3", "_mtp", "_dflash")


def _architectures(model: str | None, overlay: dict | None) -> list[str] | None:
    """The architectures a local model's effective config declares (None: cannot tell)."""
    if model is None or not (Path(model) / "config.json").is_file():
        return None
    try:
        cfg = effective_config(Path(model), overlay or {})
    except (OSError, ValueError, json.JSONDecodeError):
        return None
    arch = cfg.get("architectures")
    return [a for a in arch if isinstance(a, str)] if isinstance(arch, list) else None


def unloaded_diff_warnings(arm: ResolvedArm, diffs: dict[Path, AppliedDiff | None]) -> list[str]:
    """One warning per diff that changes model modules the arm's models never import."""
    model_files = {
        p: [m for m in a.modules if m.module.startswith(MODELS_PACKAGE + ".")]
        for p, a in diffs.items()
        if a is not None
    }
    if arm.container is not None or not any(model_files.values()):
        return []
    archs = _architectures(arm.model, arm.target_config)
    if arm.draft_model is not None:
        draft = _architectures(arm.draft_model, arm.draft_config)
        archs = None if draft is None or archs is None else archs + draft
    pkg = vllm_package_dir(arm.python, arm.env.get("PYTHONPATH", ""))
    if not archs or pkg is None:
        return []
    read = files_reader(pkg.parent)
    registry = model_modules(read)
    if any(a not in registry for a in archs):
        return []  # an architecture this build names elsewhere: no claim
    roots = {registry[a] for a in archs}
    if arm.speculative_config:
        roots |= {r + w for r in set(roots) for w in _WRAPPERS}
    loaded = loaded_model_modules(read, roots)
    out = []
    for p, served in model_files.items():
        unused = [m for m in served if m.module.rsplit(".", 1)[-1] not in loaded]
        if not unused:
            continue
        applied = diffs[p]
        whole = applied is not None and len(unused) == len(applied.modules)
        names = ", ".join(m.module for m in unused)
        out.append(
            f"arm {arm.name}: diff {p.name} changes {names}, which the arm's models "
            f"({', '.join(dict.fromkeys(archs))}) never import"
            + (
                ": this arm runs the same code as its baseline (an A/A)"
                if whole
                else "; the rest of the diff is served"
            )
        )
    return out
