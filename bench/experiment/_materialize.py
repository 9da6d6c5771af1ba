"""Inspection without booting: what every arm would run (`specab validate`) and the same
files a boot would materialize, written to a directory (`specab materialize`)."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.errors import SpecabError
from bench.experiment._arms import ResolvedArm
from bench.experiment._envs import REDACTED, base_env, redact_env
from bench.experiment._launch import LaunchPlan, launch_plan
from bench.experiment._preflight import Preflight, preflight

PLACEHOLDER_WORKDIR = Path("$WORKDIR")


@dataclass(frozen=True)
class ArmView:
    arm: ResolvedArm
    plan: LaunchPlan
    env_set: dict[str, str]  # what the file sets (server + arm env), redacted
    env_vs_baseline: dict[str, tuple[str | None, str | None]]  # name -> (baseline, this arm)


def inspect_experiment(
    spec_file: str | Path, *, cluster: bool = False
) -> tuple[Preflight, list[ArmView]]:
    """Validate everything a run needs (`preflight`: spec, probe sets, patches, models,
    interpreters) and compute each arm's launch plan; writes nothing. Returns preflight's
    result (spec, warnings, lint) and one view per arm."""
    checked = preflight(spec_file, cluster=cluster)
    spec, arms = checked.spec, list(checked.arms)
    views: list[ArmView] = []
    base_env_names = set(base_env())
    plans = [launch_plan(a, PLACEHOLDER_WORKDIR, engine_seed=None, create=False) for a in arms]
    baseline = next(a for a in arms if a.name == spec.baseline)
    for arm, plan in zip(arms, plans, strict=True):
        diff: dict[str, tuple[str | None, str | None]] = {}
        red_b, red_a = redact_env(baseline.env), redact_env(arm.env)
        for k in sorted(set(red_b) | set(red_a)):
            if red_b.get(k) != red_a.get(k):
                diff[k] = (red_b.get(k), red_a.get(k))
        env_set = {k: v for k, v in plan.redacted_env().items() if k not in base_env_names}
        views.append(ArmView(arm, plan, env_set, diff))
    return checked, views


def command_line(plan: LaunchPlan) -> str:
    return shlex.join(plan.argv)


def _env_lines(env: dict[str, str]) -> list[str]:
    """`NAME=value` for an env file; secrets stay redacted on disk."""
    return [f"{k}={shlex.quote(v)}" for k, v in sorted(redact_env(env).items())]


def _command_sh(plan: LaunchPlan, spec_file: Path, arm: str) -> str:
    env_args = []
    for k, v in sorted(plan.env.items()):
        if redact_env({k: v})[k] == REDACTED:
            # Never write a secret to disk: take it from the caller's environment.
            env_args.append(f'"{k}=${{{k}:?export {k} first (redacted by specab)}}"')
        else:
            env_args.append(shlex.quote(f"{k}={v}"))
    lines = [
        "#!/bin/sh",
        f"# specab materialize: arm {arm} of {spec_file}",
        "# Runs the server exactly as a boot would: clean environment, own cwd, loopback.",
        "# The boot picks a free port; here PORT (default 8000) chooses it. The boot also adds",
        "# the per-request metrics flags `specab validate` lists under 'measures'.",
        "set -e",
        'cd "$(dirname "$0")/cwd"',
        "exec env -i \\",
        *[f"  {a} \\" for a in env_args],
        "  "
        + " ".join(shlex.quote(a) for a in plan.argv)
        + ' --host 127.0.0.1 --port "${PORT:-8000}"',
        "",
    ]
    return "\n".join(lines)


def materialize_arm(
    spec_file: str | Path,
    arm_name: str,
    out: str | Path,
    *,
    engine_seed: int | None = None,
    cluster: bool = False,
) -> LaunchPlan:
    """Write into `out` what one boot of `arm_name` runs: command.sh, server.env, plan.json,
    and the overlay and patch directories. Validates first, so a user error writes nothing
    (`cluster`: models that only the nodes have are not an error)."""
    spec_file, out = Path(spec_file), Path(out)
    checked, views = inspect_experiment(spec_file, cluster=cluster)
    spec = checked.spec
    spec.arm(arm_name)  # one-line error listing the arms
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SpecabError(
            "output directory exists and is not empty",
            file=out,
            field="--out",
            fix="choose a new or empty directory",
        )
    arm = next(v.arm for v in views if v.arm.name == arm_name)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cwd").mkdir(exist_ok=True)
    plan = launch_plan(arm, out.resolve(), engine_seed=engine_seed)
    body: dict[str, Any] = {
        "arm": arm_name,
        "experiment_file": str(spec_file),
        "argv": plan.argv,
        "env": plan.redacted_env(),
        "expected_patches": list(plan.expected_patches),
        "patch_dir": str(plan.patch_dir) if plan.patch_dir else None,
        "overlays": plan.overlays,
        "definition": arm.definition(),
        "definition_sha256": arm.definition_sha256(),
    }
    (out / "plan.json").write_text(json.dumps(body, indent=2, sort_keys=True, default=str) + "\n")
    (out / "server.env").write_text("\n".join(_env_lines(plan.env)) + "\n")
    sh = out / "command.sh"
    sh.write_text(_command_sh(plan, spec_file, arm_name))
    sh.chmod(0o755)
    return plan
