"""Arms: merge each `[[arms]]` entry over `[server]` (what one boot runs: `launch_plan`).

Merging rules (documented in docs/arms.md):
- `args` by flag name ('_' and '-' are the same flag): `true` -> bare `--flag`,
  `false` / absent value -> the flag is omitted (an arm can remove a server flag),
  anything else -> `--flag value`. The arm wins.
- `speculative_config` and `env` by key; the arm wins. An arm's `speculative_config = false`
  turns speculative decoding off (a no-speculation speed arm; no --speculative-config).
- `concurrency`: the arm's, else `[probes].concurrency`.
- `patches`: the server's patches, then the arm's.
- `target_config` / `draft_config`: JSON merge patches (RFC 7386) on the model's config.json,
  materialized per boot as overlay directories (see `bench.experiment.launch.overlays`).
- `python`: the arm's interpreter, else the server's, else the one running specab (in a
  container: a path inside the image, default `python3`). `container`: the arm's, else the
  server's (none: the server runs on the host).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.errors import SpecabError
from bench.experiment.launch.code_diffs import (
    AppliedDiff,
    applied_diff,
    commit_refused,
    is_diff,
)
from bench.experiment.launch.containers import DEFAULT_PYTHON, container_vllm_version
from bench.experiment.launch.environment import interpreter_vllm_version
from bench.experiment.launch.gang_args import check_gang
from bench.experiment.launch.overlays import effective_config
from bench.experiment.launch.patches import arm_patch_files
from bench.experiment.reference import reference_definition
from bench.experiment.spec import (
    ArgValue,
    ContainerSpec,
    Experiment,
    ReferenceForward,
    redact_args,
    redact_env,
    refuse_secret_flag,
    resolve_path,
)

# Flags the boot sets itself; an arm that sets them would silently be overridden.
_RESERVED_FLAGS = {
    "host": "the boot picks a free loopback port and host itself",
    "port": "the boot picks a free loopback port and host itself",
    "model": "set [server].model instead",
    "speculative-config": "use the speculative_config table instead",
}


# Flags a gang boot sets per member; an arm setting them would break the gang.
# Every spelling of the parallel sizes in `args` (dashes or underscores, vLLM's short
# aliases) -> the size it sets.
PARALLEL_FLAGS = {
    "tensor-parallel-size": "tp", "tp": "tp",
    "pipeline-parallel-size": "pp", "pp": "pp",
    "data-parallel-size": "dp", "dp": "dp",
    "data-parallel-size-local": "dp_local", "dpl": "dp_local",
}  # fmt: skip


def _flag(name: str) -> str:
    return name.strip().lstrip("-").replace("_", "-")


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class ResolvedArm:
    """Everything that defines an arm, after merging over [server]."""

    name: str
    model: str
    args: dict[str, ArgValue]
    speculative_config: dict[str, Any]
    env: dict[str, str]
    patches: tuple[Path, ...]
    target_config: dict[str, Any] | None
    draft_config: dict[str, Any] | None
    python: str
    spec_file: str = ""
    allow_noop_patches: bool = False
    speculative: bool = True  # False: speculative_config = false (a speed-only arm)
    concurrency: int = 1  # probes in flight at once in a boot of this arm
    container: ContainerSpec | None = None  # the server runs in this image
    nodes: int = 1  # nodes one boot spans ([resources] nodes; >1: a gang boot)
    patch_fields: tuple[str, ...] = ()  # where each patch is written (messages)
    built_from: str | None = None  # the commit `python` is built from when first needed
    served_commit: str | None = None  # a git history's point: its last patch is that commit
    reference: ReferenceForward | None = None  # a reference arm: no server (reference_runs)

    @property
    def draft_model(self) -> str | None:
        m = self.speculative_config.get("model")
        return str(m) if m is not None else None

    @property
    def parallel_sizes(self) -> dict[str, int]:
        """Tensor, pipeline and data parallel sizes (and data_parallel_size_local) as `args`
        writes them, in any of vLLM's spellings (`tp`, `tensor-parallel-size`,
        `tensor_parallel_size`); preflight reads them through vLLM's parser where it can."""
        sizes: dict[str, int] = {}
        for key, value in self.args.items():
            name = PARALLEL_FLAGS.get(key.lstrip("-").replace("_", "-"))
            if name and isinstance(value, int) and not isinstance(value, bool):
                sizes[name] = value
        return sizes

    @property
    def world_size(self) -> int:
        """Tensor x pipeline x data parallel ranks of one server (over all its nodes)."""
        s = self.parallel_sizes
        return s.get("tp", 1) * s.get("pp", 1) * s.get("dp", 1)

    @property
    def num_speculative_tokens(self) -> int:
        """As written in speculative_config; 0 when left to the method's default (e.g. MTP's
        n_predict), which the boot then reads from the server's /metrics."""
        k = self.speculative_config.get("num_speculative_tokens")
        return int(k) if isinstance(k, int | float | str) and str(k).isdigit() else 0

    def definition(self) -> dict[str, Any]:
        """JSON-able definition for the manifest: effective configs, patch sha256s, args and
        env with secrets redacted. Hashing it tells whether two arms (or runs) are the same;
        a secret's value is not part of it (two arms that differ only in a key hash alike)."""
        diffs = self.diffs()
        return {
            "name": self.name,
            "model": self.model,
            "python": self.python,
            "vllm_version": self.vllm_version(),
            "args": dict(sorted(redact_args(self.args).items())),
            "speculative_config": self.speculative_config,
            "env": dict(sorted(redact_env(self.env).items())),
            "patches": [self._patch_definition(p, diffs) for p in self.patches],
            "target_config": self.target_config,
            "draft_config": self.draft_config,
            "effective_target_config": _maybe_effective(self.model, self.target_config),
            "effective_draft_config": _maybe_effective(self.draft_model, self.draft_config),
            **({"allow_noop_patches": True} if self.allow_noop_patches else {}),
            # Only when set: definitions (and hashes) of existing arms stay as they were.
            **({"speculative": False} if not self.speculative else {}),
            **({"concurrency": self.concurrency} if self.concurrency != 1 else {}),
            # Only when set: definitions (and hashes) of host, single-node arms are unchanged.
            **({"container": self.container.model_dump()} if self.container else {}),
            **({"nodes": self.nodes} if self.nodes > 1 else {}),
            **(
                {"reference": reference_definition(self.reference, self.spec_file, self.python)}
                if self.reference
                else {}
            ),
        }

    def _patch_definition(self, p: Path, diffs: dict[Path, AppliedDiff | None]) -> dict[str, Any]:
        entry = {
            "name": p.stem,
            "path": self._rel(p),
            "sha256": _file_sha256(p) if p.is_file() else None,
        }
        if p in diffs:
            applied = diffs[p]
            entry.update(applied.definition() if applied else {"kind": "diff", "files": None})
        return entry

    def diffs(self) -> dict[Path, AppliedDiff | None]:
        """Each diff patch (present on disk) applied to this arm's build (SpecabError:
        refused, a history point's served diff said of its commit; None: an image this
        machine cannot read, applied when the boot starts)."""
        fields = self.patch_fields or tuple("patches" for _ in self.patches)
        out = {}
        for i, (p, field) in enumerate(zip(self.patches, fields, strict=True)):
            if not (is_diff(p) and p.is_file()):
                continue
            try:
                out[p] = applied_diff(
                    p, python=self.python, field=field, container=self.container,
                    pythonpath=self.env.get("PYTHONPATH", ""), allow_noop=self.allow_noop_patches,
                )  # fmt: skip
            except SpecabError as exc:
                if self.served_commit is None or i != len(self.patches) - 1:
                    raise
                raise commit_refused(exc, self.served_commit, self.name, self.spec_file) from None
        return out

    def vllm_version(self) -> str | None:
        """The vLLM version this arm's server would run (in its image, if it has one); None
        for a commit's build, named by its commit (read now, it would change once built)."""
        if self.built_from is not None or self.reference is not None:
            return None
        if self.container is not None:
            return container_vllm_version(self.container, self.python)
        return interpreter_vllm_version(self.python)

    def _rel(self, p: Path) -> str:
        """Relative to the experiment file when below it: hashes stay checkout-independent."""
        base = Path(self.spec_file).resolve().parent if self.spec_file else None
        return os.path.relpath(p, base) if base and p.is_relative_to(base) else str(p)

    def definition_sha256(self) -> str:
        """Hash of everything but the name: two arms that run the same thing hash alike
        (an A/A control), two that differ anywhere do not."""
        body = {k: v for k, v in self.definition().items() if k != "name"}
        blob = json.dumps(body, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()


def _maybe_effective(model: str | None, patch: dict[str, Any] | None) -> dict[str, Any] | None:
    """The overlaid config.json when the model dir is readable here, else None."""
    if patch is None or model is None or not (Path(model) / "config.json").is_file():
        return None
    return effective_config(Path(model), patch)


def _model_path(spec_file: Path, value: str) -> str:
    """A model written as a relative path resolves against the experiment file when it exists;
    anything else (an absolute path, a hub name) is kept as written."""
    p = resolve_path(spec_file, value)
    return str(p) if p.exists() else value


def _interpreter(spec_file: Path, value: str | None, *, container: bool = False) -> str:
    if container:  # a path inside the image, as written
        return value or DEFAULT_PYTHON
    if not value:
        return sys.executable
    if os.sep in value or value.startswith("."):
        # Not .resolve(): a venv's python is a symlink and must stay inside its venv.
        return os.path.abspath(resolve_path(spec_file, value))
    return value


def _merged_args(spec: Experiment, spec_file: Path, name: str) -> dict[str, ArgValue]:
    """[server].args, then the arm's, by flag name; flags the boot owns are refused."""
    args: dict[str, ArgValue] = {}
    sources = (("server.args", spec.server.args), (f"arms({name}).args", spec.arm(name).args))
    for where, arg_src in sources:
        for key, value in arg_src.items():
            flag = _flag(key)
            if flag in _RESERVED_FLAGS:
                raise SpecabError(
                    f"flag {flag!r} cannot be set here",
                    file=spec_file,
                    field=f"{where}.{key}",
                    fix=f"remove it; {_RESERVED_FLAGS[flag]}",
                )
            refuse_secret_flag(flag, value, file=spec_file, field=f"{where}.{key}")
            args[flag] = value
    return args


def speculative_and_concurrency(spec: Experiment, name: str) -> tuple[bool, int]:
    """Whether arm `name` speculates, and its probes in flight at once (the merge rules of
    `resolve_arm`, without touching any file: for records of attempts that never resolved)."""
    arm = spec.arm(name)
    return arm.speculative_config is not False, arm.concurrency or spec.probes.concurrency


def resolve_arm(spec: Experiment, spec_file: str | Path, name: str) -> ResolvedArm:
    """Merge arm `name` over [server] (rules in the module docstring)."""
    spec_file = Path(spec_file)
    arm = spec.arm(name)
    srv = spec.server
    own = arm.speculative_config
    speculative, concurrency = speculative_and_concurrency(spec, name)
    bisect_builds = spec.bisect is not None and spec.bisect.builds
    spec_cfg = {**srv.speculative_config, **own} if own is not False else {}
    if isinstance(spec_cfg.get("model"), str):
        spec_cfg["model"] = _model_path(spec_file, spec_cfg["model"])
    if arm.draft_config is not None and not isinstance(spec_cfg.get("model"), str):
        raise SpecabError(
            "draft_config needs a draft model"
            + ("" if speculative else " (this arm has speculative_config = false)"),
            file=spec_file,
            field=f"arms({name}).draft_config",
            fix='set speculative_config.model = "path/to/draft" in [server] or the arm'
            if speculative
            else "remove draft_config from the no-speculation arm",
        )
    if arm.reference is not None:  # no server: none of [server]'s server settings apply
        return ResolvedArm(
            name=name, model=_model_path(spec_file, srv.model), args={},
            speculative_config=spec_cfg, env={}, patches=(), target_config=None,
            draft_config=None, python=_interpreter(spec_file, arm.reference.python or srv.python),
            spec_file=str(spec_file), concurrency=1, reference=arm.reference,
        )  # fmt: skip
    container = arm.container or srv.container
    patches, patch_fields = arm_patch_files(spec, spec_file, name)
    resolved = ResolvedArm(
        name=name,
        model=_model_path(spec_file, srv.model),
        args=_merged_args(spec, spec_file, name),
        speculative_config=spec_cfg,
        env={**srv.env, **arm.env},
        patches=patches,
        target_config=arm.target_config,
        draft_config=arm.draft_config,
        python=_interpreter(spec_file, arm.python or srv.python, container=container is not None),
        spec_file=str(spec_file),
        allow_noop_patches=(
            srv.allow_noop_patches if arm.allow_noop_patches is None else arm.allow_noop_patches
        ),
        speculative=speculative,
        concurrency=concurrency,
        container=container,
        nodes=spec.resources.nodes,
        patch_fields=patch_fields,
        built_from=arm.commit if bisect_builds else None,
        served_commit=arm.commit if arm.commit and arm.patches and not bisect_builds else None,
    )
    check_gang(resolved.name, resolved.spec_file, resolved.nodes, resolved.args,
               resolved.parallel_sizes)  # fmt: skip
    return resolved
