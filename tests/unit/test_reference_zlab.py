"""z-lab's DFlash (PyPI `dflash`) as a built-in reference forward (runtime/specab_zlab_dflash.py),
on the committed demo drafter, whose config z-lab's class loads. Driven with the target's raw
last layer it proposes exactly what the demo's own training forward proposes (the same model,
another implementation: every count and token equal); with z-lab's own convention (the last
layer final-normed, as HF's hidden states hold it) a drafter trained on raw features accepts
less, which is the kind of departure a reference exists to show. Its check refuses a
checkpoint with a renamed tensor instead of letting from_pretrained initialize it at random."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.demo import committed_models
from bench.errors import SpecabError
from bench.experiment import REFERENCE_RUNNER
from bench.experiment.reference import check_reference_interpreter
from bench.experiment.spec import ReferenceForward

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "arms" / "demo" / "models"
pytestmark = [
    pytest.mark.skipif(committed_models() is None, reason="the committed demo models are absent"),
    pytest.mark.skipif(
        subprocess.run([sys.executable, "-c", "import dflash.model"]).returncode != 0,
        reason="z-lab's dflash is not installed (make install puts it in .venv)",
    ),
]


def _counts(tmp: Path, forward: str) -> list[dict[str, Any]]:
    lines = (ROOT / "arms" / "demo" / "probes" / "humaneval-12.jsonl").read_text().splitlines()
    probes = [json.loads(x) for x in lines if x.startswith("{")][:6]
    job = {"target": str(MODELS / "target"), "drafter": str(MODELS / "dflash-trained"),
           "forward": forward, "path": [str(ROOT)], "k": 4, "temperature": 0.0,
           "dtype": "auto", "ignore_eos": True,
           "probes": [{"set": "h", "id": p["id"], "prompt": p["prompt"], "max_tokens": 64}
                      for p in probes]}  # fmt: skip
    name = forward.replace(":", "-")
    (tmp / f"{name}.json").write_text(json.dumps(job))
    out = tmp / f"{name}.jsonl"
    subprocess.run([sys.executable, str(REFERENCE_RUNNER), str(tmp / f"{name}.json"), str(out)],
                   check=True, capture_output=True, timeout=600)  # fmt: skip
    return [json.loads(x) for x in out.read_text().splitlines()][:-1]


def test_z_labs_class_proposes_what_the_demos_training_forward_proposes(tmp_path: Path) -> None:
    keys = ("drafts", "accepted_per_pos", "step_accepted", "output_ids")
    demo = _counts(tmp_path, "bench.demo.training_forward:dflash_logits")
    raw = _counts(tmp_path, "specab_zlab_dflash:dflash_logits_raw")
    assert [{k: r[k] for k in keys} for r in raw] == [{k: r[k] for k in keys} for r in demo]
    normed = _counts(tmp_path, "specab_zlab_dflash:dflash_logits")
    pos0 = [sum(r["accepted_per_pos"][0] for r in x) / sum(r["drafts"] for r in x)
            for x in (raw, normed)]  # fmt: skip
    assert pos0[1] < pos0[0] - 0.06, pos0  # 0.641 and 0.514 here
    assert [r["output_ids"] for r in normed] == [r["output_ids"] for r in raw]  # greedy target


def test_a_checkpoint_z_labs_class_cannot_fully_load_is_refused_naming_the_tensor(
    tmp_path: Path,
) -> None:
    from safetensors.torch import load_file, save_file

    drafter = tmp_path / "dflash-renamed"
    shutil.copytree(MODELS / "dflash-trained", drafter)
    state = load_file(str(drafter / "model.safetensors"))
    name = sorted(k for k in state if k.endswith("o_proj.weight"))[0]
    state[name.replace("o_proj", "out_proj")] = state.pop(name)
    save_file(state, str(drafter / "model.safetensors"))
    ref = ReferenceForward(forward="specab_zlab_dflash:dflash_logits")
    check_reference_interpreter(
        ref, ROOT / "x.toml", sys.executable, "z", str(MODELS / "dflash-trained")
    )
    with pytest.raises(SpecabError, match=f"no tensor {name}, which z-lab's DFlashDraftModel has"):
        check_reference_interpreter(ref, ROOT / "x.toml", sys.executable, "z", str(drafter))
