"""Preflight of an arm's target and draft models: a path must exist; a hub id must be in the
local Hugging Face cache while `HF_HUB_OFFLINE` forbids downloading it.

How a value is read: one that resolves to an existing path (a relative one against the
experiment file) is a path. Otherwise, one written as a path (starting with `.`, `/` or `~`,
more than one `/`, or not a valid hub id) is a missing path. What is left with the shape
ORG/NAME is a hub id, looked up in the cache the server would use (the arm's env over the
caller's, as `specab lint` does) — but `models/x` may also be a relative path that does not
exist, so that error names both readings. A bare NAME (a legacy hub id, or a path) is not
checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from bench.errors import SpecabError
from bench.experiment.launch import ResolvedArm
from bench.experiment.lint import cached_config, hub_cache_dir, is_hub_id
from bench.experiment.spec import ArgValue, Experiment, resolve_path

_TRUE = {"1", "on", "yes", "true"}  # huggingface_hub's reading of a boolean variable


def hub_offline(env: Mapping[str, str]) -> bool:
    return env.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def origin(spec: Experiment, arm: str, section: str, key: str) -> str:
    """The field path a merged value came from: the arm's table when it sets the key."""
    own = getattr(spec.arm(arm), section)
    mine = isinstance(own, dict) and key in own
    return f"arms({arm}).{section}.{key}" if mine else f"server.{section}.{key}"


def check_models(
    spec: Experiment,
    spec_file: Path,
    arm: ResolvedArm,
    environ: Mapping[str, str],
    *,
    cluster: bool,
) -> list[str]:
    """Raise SpecabError for a model that cannot be served; with `cluster`, return warning
    lines instead (a node may hold what this machine lacks)."""
    env = {**environ, **arm.env}
    own = spec.arm(arm.name).speculative_config
    cfg = {} if own is False else {**spec.server.speculative_config, **own}  # false: no draft
    items: list[tuple[str, str, ArgValue]] = [
        ("server.model", spec.server.model, arm.args.get("revision"))
    ]
    if isinstance(cfg.get("model"), str):
        field = origin(spec, arm.name, "speculative_config", "model")
        items.append((field, cfg["model"], cfg.get("revision")))
    warnings = []
    for field, value, revision in items:
        found = _problem(spec_file, value, revision, env)
        if found is None:
            continue
        problem, fix = found
        if not cluster:
            raise SpecabError(problem, file=spec_file, field=field, fix=fix)
        warnings.append(
            f"{arm.name}: warning: {field}: {problem} on this machine (the cluster's nodes may "
            f"have it). Fix: {fix}"
        )
    return warnings


def _problem(
    spec_file: Path, value: str, revision: ArgValue, env: Mapping[str, str]
) -> tuple[str, str] | None:
    """(problem, fix) when `value` cannot be served from here, else None."""
    path = resolve_path(spec_file, value)
    if path.exists():
        return None
    if value.startswith((".", "/", "~")) or value.count("/") > 1 or not is_hub_id(value):
        shown = value if str(path) == value else f"{value} ({path})"
        return (
            f"model path {shown} not found",
            "correct the path (relative paths are relative to the experiment file)",
        )
    if "/" not in value or not hub_offline(env):
        return None  # a bare name is not checked; online, the server downloads a hub id
    rev = revision if isinstance(revision, str) else None
    if cached_config(value, env, revision=rev) is not None:
        return None
    return (
        f"{value} is neither a directory relative to the experiment file ({path}) nor a "
        f"model in the local Hugging Face cache ({hub_cache_dir(env)}), and HF_HUB_OFFLINE=1 "
        "forbids downloading it",
        f"correct the path, or fetch the model into that cache (`hf download {value}` "
        "without HF_HUB_OFFLINE), or unset HF_HUB_OFFLINE",
    )
