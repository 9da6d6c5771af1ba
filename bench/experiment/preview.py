"""Inspection without booting: what every arm would run (`specab validate`) and the same
files a boot would materialize, written to a directory (`specab materialize`)."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.errors import SpecabError
from bench.experiment.launch import (
    REDACTED,
    LaunchPlan,
    MemberCommand,
    ResolvedArm,
    base_env,
    container_name,
    launch_plan,
    member_command,
    redact_env,
    resolve_arm,
)
from bench.experiment.preflight import Preflight, preflight

PLACEHOLDER_WORKDIR = Path("$WORKDIR")


@dataclass(frozen=True)
class ArmView:
    arm: ResolvedArm
    plan: LaunchPlan
    env_set: dict[str, str]  # what the file sets (server + arm env), redacted
    env_vs_baseline: dict[str, tuple[str | None, str | None]]  # name -> (baseline, this arm)
    members: tuple[MemberCommand, ...] = ()  # head first; placeholders for run-time values


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
    # the baseline may be a point not built yet ([bisect.git] build): resolved, not checked
    baseline = resolve_arm(spec, Path(spec_file), spec.baseline)
    for arm, plan in zip(arms, plans, strict=True):
        diff: dict[str, tuple[str | None, str | None]] = {}
        red_b, red_a = redact_env(baseline.env), redact_env(arm.env)
        for k in sorted(set(red_b) | set(red_a)):
            if red_b.get(k) != red_a.get(k):
                diff[k] = (red_b.get(k), red_a.get(k))
        env_set = {k: v for k, v in plan.redacted_env().items() if k not in base_env_names}
        members = preview_members(plan, spec.experiment.name, spec.server.host)
        views.append(ArmView(arm, plan, env_set, diff, members))
    return checked, views


def preview_members(
    plan: LaunchPlan,
    experiment: str,
    host: str,
    *,
    boot_id: str = "$BOOT_ID",
    cwd: str = "$WORKDIR/cwd/$BOOT_ID",
) -> tuple[MemberCommand, ...]:
    """Every member's command as a boot builds it, with shell variables for what only the
    boot knows: $HEAD_IP / $MASTER_PORT (picked free on the head's node), $NODE_IP (each
    node's address), $PORT (the API port), $BOOT_ID (the attempt) and $WORKDIR."""
    out = []
    for rank in range(plan.nodes):
        m = member_command(
            plan,
            rank,
            master_addr="$HEAD_IP",
            master_port="$MASTER_PORT",
            node_ip="$NODE_IP" if plan.nodes > 1 else "",
            container_name=container_name(experiment, boot_id, rank, ""),
            labels={"specab.boot": boot_id, "specab.member": str(rank)},
            cwd=cwd if rank == 0 else f"{cwd}.m{rank}",
        )
        if rank == 0:
            m = MemberCommand(0, [*m.argv, "--host", host, "--port", "$PORT"], m.env, m.container)
        out.append(m)
    return tuple(out)


def command_line(plan: LaunchPlan | MemberCommand) -> str:
    """The argv as one shell line; $VARIABLE placeholders stay expandable."""
    return " ".join(_sh_word(a) for a in plan.argv)


# What only a boot knows; validate and materialize print these as shell variables.
PLACEHOLDERS = ("HEAD_IP", "MASTER_PORT", "NODE_IP", "PORT", "BOOT_ID", "WORKDIR")
_PLACEHOLDER = re.compile(r"\\\$(" + "|".join(PLACEHOLDERS) + r")\b")


def _sh_word(text: str, *, strict: bool = False) -> str:
    """shlex.quote, except that a word holding a placeholder ($HEAD_IP, ...) is
    double-quoted so the shell expands it and nothing else (`strict`: as ${NAME:?...}, so
    an unset one stops the script; PORT defaults to 8000)."""
    body = re.sub(r'([\\"`$])', r"\\\1", text)
    if not _PLACEHOLDER.search(body):
        return shlex.quote(text)

    def var(m: re.Match[str]) -> str:
        if not strict:
            return f"${m[1]}"
        return "${PORT:-8000}" if m[1] == "PORT" else f"${{{m[1]}:?set {m[1]}}}"

    return '"' + _PLACEHOLDER.sub(var, body) + '"'


def member_title(m: MemberCommand, nodes: int) -> str:
    """`head` / `worker r` (gang) or `server` (single node), for validate's listing."""
    if nodes == 1:
        return "server"
    return "head (node-rank 0, API server)" if m.rank == 0 else f"worker (node-rank {m.rank})"


def _env_lines(env: dict[str, str]) -> list[str]:
    """`NAME=value` for an env file; secrets stay redacted on disk."""
    return [f"{k}={shlex.quote(v)}" for k, v in sorted(redact_env(env).items())]


def _command_sh(m: MemberCommand, spec_file: Path, arm: str, nodes: int) -> str:
    env_args = []
    for k, v in sorted(m.env.items()):
        if redact_env({k: v})[k] == REDACTED:
            # Never write a secret to disk: take it from the caller's environment.
            env_args.append(f'"{k}=${{{k}:?export {k} first (redacted by specab)}}"')
        else:
            env_args.append(_sh_word(f"{k}={v}", strict=True))
    gang = [
        f"# Member {m.rank} of a {nodes}-node gang boot: run one script per node, all with",
        "# HEAD_IP and MASTER_PORT (the head's address and a free port there) and NODE_IP.",
    ]
    lines = [
        "#!/bin/sh",
        f"# specab materialize: arm {arm} of {spec_file}",
        "# Runs the server exactly as a boot would: clean environment, own cwd, loopback.",
        "# The boot picks a free port; here PORT (default 8000) chooses it. The boot also adds",
        "# the per-request metrics flags `specab validate` lists under 'measures'.",
        *(gang if nodes > 1 else []),
        "set -e",
        'cd "$(dirname "$0")/cwd' + (f".m{m.rank}" if m.rank else "") + '"',
        "exec env -i \\",
        *[f"  {a} \\" for a in env_args],
        "  " + " ".join(_sh_word(a, strict=True) for a in m.argv),
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
    (out / "server.env").write_text("\n".join(_env_lines(plan.env)) + "\n")
    members = preview_members(
        plan, spec.experiment.name, "127.0.0.1", boot_id="materialized", cwd=str(out / "cwd")
    )
    for m in members[1:]:
        (out / f"cwd.m{m.rank}").mkdir(exist_ok=True)
    body["members"] = [{"rank": m.rank, "argv": m.argv} for m in members]
    (out / "plan.json").write_text(json.dumps(body, indent=2, sort_keys=True, default=str) + "\n")
    for m in members:
        sh = out / ("command.sh" if m.rank == 0 else f"command-m{m.rank}.sh")
        sh.write_text(_command_sh(m, spec_file, arm_name, plan.nodes))
        sh.chmod(0o755)
    return plan
