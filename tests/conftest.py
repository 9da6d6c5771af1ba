"""Shared pytest fixtures. Each block is marked with its owner; add yours in its own block."""

from __future__ import annotations

from pathlib import Path

import pytest

# ---------------------------------------------------------------------------------------
# demo (owner: demo) — the tiny Qwen3 target + draft every real-vLLM test boots.
# ---------------------------------------------------------------------------------------
from bench.demo import DemoModels, build_demo_models, committed_models


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> DemoModels:
    """The committed trained demo models (arms/demo/models/) if present, else random ones.

    Random ones are built once per session (~10 s); they share the tokenizer and geometry of
    the trained ones, so vLLM boots them the same way (acceptance is just not meaningful).
    """
    committed = committed_models()
    if committed is not None:
        return committed
    return build_demo_models(Path(tmp_path_factory.mktemp("demo-models")))


# --------------------------------------------------------------------------- end demo ---


# ---------------------------------------------------------------------------------------
# orchestrator (owner: orchestrator) — experiment files whose server is the fault-injection
# fake (tests/fakes/vllm/...), launched exactly like vLLM through the arm's PYTHONPATH.
# ---------------------------------------------------------------------------------------
import json  # noqa: E402
from collections.abc import Callable, Mapping  # noqa: E402
from typing import Any  # noqa: E402

FAKES_DIR = Path(__file__).parent / "fakes"


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a valid TOML basic string
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(v)


def write_fake_experiment(
    root: Path,
    arms: Mapping[str, Mapping[str, str]],
    *,
    name: str = "fake",
    boots_per_arm: int = 2,
    experiment: Mapping[str, Any] | None = None,
    server: Mapping[str, Any] | None = None,
    resources: Mapping[str, Any] | None = None,
    arm_extra: Mapping[str, Mapping[str, Any]] | None = None,
) -> Path:
    """Write `root/exp.toml` (+ a 3-probe set) for arms {name: env} served by the fake."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "probes.jsonl").write_text(
        "".join(
            json.dumps({"id": f"p{i}", "prompt": f"prompt number {i}"}) + "\n" for i in range(3)
        )
    )
    state = root / "fake-state"
    exp = {"name": name, "boots_per_arm": boots_per_arm, "seed": 7, **(experiment or {})}
    srv = {
        "model": "fake-model",
        "speculative_config": {"method": "draft_model", "num_speculative_tokens": 3},
        "env": {"PYTHONPATH": str(FAKES_DIR), "SPECAB_FAKE_STATE": str(state)},
        "ready_timeout_s": 20.0,
        "stop_grace_s": 2.0,
        **(server or {}),
    }
    lines = ["[experiment]"] + [f"{k} = {_toml_value(v)}" for k, v in exp.items()]
    lines += ["", "[server]"] + [f"{k} = {_toml_value(v)}" for k, v in srv.items()]
    lines += [
        "",
        "[probes]",
        'sets = ["probes.jsonl"]',
        "max_tokens = 16",
        "warmup = 1",
        'acceptance_source = "metrics_delta"',
    ]
    res = {"cpu": 1, **(resources or {})}
    lines += ["", "[resources]"] + [f"{k} = {_toml_value(v)}" for k, v in res.items()]
    for arm, env in arms.items():
        lines += ["", "[[arms]]", f"name = {_toml_value(arm)}"]
        if env:
            lines.append(f"env = {_toml_value(dict(env))}")
        for k, v in ((arm_extra or {}).get(arm) or {}).items():
            lines.append(f"{k} = {_toml_value(v)}")
    path = root / "exp.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def fake_experiment() -> Callable[..., Path]:
    """Factory: `fake_experiment(tmp_path, {"base": {}, "fix": {"SPECAB_FAKE_FAULT": ...}})`."""
    return write_fake_experiment


# ------------------------------------------------------------------- end orchestrator ---


# ---------------------------------------------------------------------------------------
# report (owner: report) — a simulated results directory with realistic output identity,
# a failed attempt and arm definitions, for the report, plot and notebook tests.
# ---------------------------------------------------------------------------------------
SIM_ARMS = {"baseline": 0.0, "aux-fix": 0.0, "aux+rope-fix": 0.2}
SIM_DIFFERING_PROBES = 3  # aux+rope-fix generates different text for p0000..p0002


def write_sim_results(root: Path, *, boots: int = 5, prompts: int = 40, seed: int = 3) -> Path:
    """Simulated results (bench.stats.simulate) written through the store, with greedy-like output
    hashes: one text per probe, except SIM_DIFFERING_PROBES probes of aux+rope-fix and one
    probe of aux-fix whose boot 1 differs from its other boots (nondeterminism)."""
    from bench.stats.simulate import SimRun, simulate_run, simulated_manifest
    from bench.store import ResultsWriter

    run = simulate_run(
        SIM_ARMS,
        boots=boots,
        prompts=prompts,
        seed=seed,
        experiment="sim-report",
        failed_boots={"baseline": 0, "aux-fix": 1, "aux+rope-fix": 0},
    )
    probes = run.probes
    digits = probes["probe_id"].str[1:].astype(int)
    sha = "text-" + probes["probe_id"]
    alt = (probes["arm"] == "aux+rope-fix") & (digits < SIM_DIFFERING_PROBES)
    flaky = (probes["arm"] == "aux-fix") & (probes["boot"] == 1) & (digits == 5)
    probes["output_sha256"] = sha.where(~(alt | flaky), "other-" + probes["probe_id"])
    manifest = simulated_manifest(SIM_ARMS, experiment="sim-report", boots=boots, prompts=prompts)
    manifest["arms"] = [
        {
            "name": "baseline",
            "definition_sha256": "0" * 64,
            "definition": {"patches": [], "draft_config": None},
        },
        {
            "name": "aux-fix",
            "definition_sha256": "1" * 64,
            "definition": {
                "patches": [{"name": "aux_fix", "sha256": "ab" * 32}],
                "env": {"DSPARK_AUX_FIX": "1"},
            },
        },
        {
            "name": "aux+rope-fix",
            "definition_sha256": "2" * 64,
            "definition": {
                "patches": [{"name": "aux_fix", "sha256": "ab" * 32}],
                "draft_config": {"partial_rotary_factor": 1.0},
            },
        },
    ]
    SimRun(probes, run.boots).write(ResultsWriter.create(root, manifest))
    return root


@pytest.fixture(scope="session")
def sim_results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A read-only simulated results directory shared by the report tests (copy to modify)."""
    return write_sim_results(tmp_path_factory.mktemp("sim") / "sim-report")


# ------------------------------------------------------------------------- end report ---
