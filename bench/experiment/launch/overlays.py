"""Checkpoint-config overlays: a JSON merge patch (RFC 7386) on a model's config.json,
materialized as a directory holding the patched config.json and a symlink for every other
file. The directory name is a content hash, so repeat boots (and arms with the same overlay)
reuse it; it is built in a temporary directory and renamed into place, so a crash or a
concurrent boot never sees a half-built overlay.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.errors import SpecabError

CONFIG = "config.json"
_MARKER = ".specab-overlay.json"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: null deletes a key, objects merge recursively, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _read_config(model_dir: Path) -> dict[str, Any]:
    if not model_dir.is_dir():
        raise SpecabError(
            "model directory not found (a config overlay needs a local model dir)",
            file=model_dir,
            fix="point the model at an existing directory holding config.json",
        )
    cfg = model_dir / CONFIG
    if not cfg.is_file():
        raise SpecabError(
            "config.json not found in the model directory",
            file=model_dir,
            fix="use a Hugging Face-style model directory with a config.json",
        )
    try:
        data = json.loads(cfg.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SpecabError(
            f"config.json is not valid JSON ({exc})", file=cfg, fix="repair the file"
        ) from None
    if not isinstance(data, dict):
        raise SpecabError("config.json is not a JSON object", file=cfg, fix="repair the file")
    return data


def effective_config(model_dir: Path, patch: dict[str, Any]) -> dict[str, Any]:
    """The config.json a server sees after the overlay."""
    if not isinstance(patch, dict):
        raise SpecabError(
            "a config overlay must be a table (JSON object)",
            field="target_config/draft_config",
            fix="write it as a TOML table, e.g. draft_config = { partial_rotary_factor = 1.0 }",
        )
    result: dict[str, Any] = merge_patch(_read_config(model_dir), patch)
    mirror_rope_fields(result, patch)
    return result


# transformers >= 5 (what vLLM 0.32 loads configs with) copies these top-level fields into
# `rope_parameters` with setdefault, and vLLM's get_rope reads only `rope_parameters`: a
# value already inside rope_parameters wins, so overlaying just the top-level field would be
# silently ignored. An overlay of either placement is therefore written to both.
MIRRORED_ROPE_FIELDS = ("partial_rotary_factor", "rope_theta")


def mirror_rope_fields(config: dict[str, Any], patch: dict[str, Any]) -> None:
    """Make an overlaid rope field agree between the top level and rope_parameters."""
    rp = config.get("rope_parameters")
    if not isinstance(rp, dict):
        return  # legacy config: transformers moves the top-level field itself
    nested = any(isinstance(v, dict) for v in rp.values())
    inner = [v for v in rp.values() if isinstance(v, dict)] if nested else [rp]
    patch_rp = patch.get("rope_parameters")
    for key in MIRRORED_ROPE_FIELDS:
        in_top = key in patch
        in_inner = isinstance(patch_rp, dict) and not nested and key in patch_rp
        if in_top and not in_inner:
            for d in inner:
                if patch[key] is None:
                    d.pop(key, None)
                else:
                    d[key] = copy.deepcopy(patch[key])
        elif in_inner and not in_top and key in config:
            assert isinstance(patch_rp, dict)
            if patch_rp[key] is None:
                config.pop(key, None)
            else:
                config[key] = copy.deepcopy(patch_rp[key])


def overlay_key(model_dir: Path, patch: dict[str, Any]) -> str:
    """Content hash: which model dir, its config.json bytes, the patch."""
    h = hashlib.sha256()
    h.update(str(model_dir.resolve()).encode())
    h.update(b"\0" + (model_dir / CONFIG).read_bytes())
    h.update(b"\0" + json.dumps(patch, sort_keys=True).encode())
    return h.hexdigest()[:20]


def materialize_overlay(
    model_dir: Path, patch: dict[str, Any], root: Path, *, create: bool = True
) -> Path:
    """Return `root/<name>-<hash>/`, `model_dir` with the patched config.json (cached).
    With create=False only validate and return the path."""
    model_dir = Path(model_dir)
    merged = effective_config(model_dir, patch)
    final = root / f"{model_dir.name}-{overlay_key(model_dir, patch)}"
    if not create or (final / _MARKER).is_file():
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
    try:
        src = model_dir.resolve()
        for entry in sorted(src.iterdir()):
            if entry.name != CONFIG:
                os.symlink(entry, tmp / entry.name)
        (tmp / CONFIG).write_text(json.dumps(merged, indent=2, sort_keys=True) + "\n")
        (tmp / _MARKER).write_text(
            json.dumps({"source": str(src), "merge_patch": patch}, indent=2, sort_keys=True)
        )
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / _MARKER).is_file():  # lost a race to a complete twin: fine
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final
