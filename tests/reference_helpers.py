"""What the reference-arm tests share (docs/reference-forward.md): the committed demo models and
probes, the reference runner run on a job, a drafter checkpoint with one tensor renamed, and
an experiment file of the demo's DFlash drafter around the arms a test gives."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.experiment import REFERENCE_RUNNER

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "arms" / "demo" / "models"
PROBES = ROOT / "arms" / "demo" / "probes"
TRAINED = "bench.demo.training_forward:dflash_logits"


def demo_probes(n: int, max_tokens: int) -> list[dict[str, Any]]:
    """The first `n` HumanEval probes of the demo as runner job entries."""
    lines = (PROBES / "humaneval-12.jsonl").read_text().splitlines()
    probes = [json.loads(x) for x in lines if x.startswith("{")][:n]
    return [{"set": "h", "id": p["id"], "prompt": p["prompt"], "max_tokens": max_tokens}
            for p in probes]  # fmt: skip


def run_runner(
    tmp: Path, name: str, probes: list[dict[str, Any]], **job: Any
) -> list[dict[str, Any]]:
    """The runner's rows for a job: the demo's target and DFlash drafter, K = 4, greedy,
    float32 and `TRAINED` unless `job` says otherwise."""
    job = {"target": str(MODELS / "target"), "drafter": str(MODELS / "dflash-trained"),
           "forward": TRAINED, "path": [str(ROOT)], "k": 4, "temperature": 0.0,
           "dtype": "float32", "ignore_eos": True, "probes": probes, **job}  # fmt: skip
    (tmp / f"{name}.json").write_text(json.dumps(job))
    out = tmp / f"{name}.jsonl"
    subprocess.run([sys.executable, str(REFERENCE_RUNNER), str(tmp / f"{name}.json"), str(out)],
                   check=True, capture_output=True, timeout=600)  # fmt: skip
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert rows[-1] == {"done": True}
    return rows[:-1]


def renamed_tensor(tmp: Path, old: str, new: str) -> tuple[Path, str]:
    """A copy of the demo's DFlash drafter whose first tensor ending in `old` is renamed
    (`old` -> `new` in its name), and that tensor's original name."""
    from safetensors.torch import load_file, save_file

    drafter = tmp / "dflash-renamed"
    shutil.copytree(MODELS / "dflash-trained", drafter)
    state = load_file(str(drafter / "model.safetensors"))
    name = sorted(k for k in state if k.endswith(old))[0]
    state[name.replace(old, new)] = state.pop(name)
    save_file(state, str(drafter / "model.safetensors"))
    return drafter, name


def reference_experiment(
    tmp: Path, arms: str, *, name: str = "parity", probes: str = "", server: str = ""
) -> Path:
    """An experiment file: 2 boots an arm against `reference`, the demo's target and DFlash
    drafter (K = 4), greedy over the demo's stdlib probes, one core a boot; `arms` its
    [[arms]] tables, `probes` and `server` lines added to those tables."""
    path = tmp / f"{name}.toml"
    path.write_text(f"""
[experiment]
name = "{name}"
boots_per_arm = 2
baseline = "reference"
[server]
model = "{MODELS / "target"}"
speculative_config = {{ method = "dflash", num_speculative_tokens = 4, \
model = "{MODELS / "dflash-trained"}" }}
{server}
[probes]
sets = ["{PROBES / "stdlib-8.jsonl"}"]
temperature = 0.0
{probes}
[resources]
cpu = 1
{arms}
""")
    return path
