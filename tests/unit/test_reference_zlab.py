"""z-lab's DFlash (PyPI `dflash`) as a built-in reference forward (runtime/specab_zlab_dflash.py),
on the committed demo drafter, whose config z-lab's class loads. Driven with the target's raw
last layer it proposes exactly what the demo's own training forward proposes (the same model,
another implementation: every count and token equal); with z-lab's own convention (the last
layer final-normed, as HF's hidden states hold it) a drafter trained on raw features accepts
less, which is the kind of departure a reference exists to show. Its check refuses a
checkpoint with a renamed tensor instead of letting from_pretrained initialize it at random."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from reference_helpers import MODELS, ROOT, TRAINED, demo_probes, renamed_tensor, run_runner

from bench.demo import committed_models
from bench.errors import SpecabError
from bench.experiment.reference import check_reference_interpreter
from bench.experiment.spec import ReferenceForward

pytestmark = [
    pytest.mark.skipif(committed_models() is None, reason="the committed demo models are absent"),
    pytest.mark.skipif(
        subprocess.run([sys.executable, "-c", "import dflash.model"]).returncode != 0,
        reason="z-lab's dflash is not installed (make install puts it in .venv)",
    ),
]


def test_z_labs_class_proposes_what_the_demos_training_forward_proposes(tmp_path: Path) -> None:
    keys = ("drafts", "accepted_per_pos", "step_accepted", "output_ids")
    probes = demo_probes(6, 64)
    zlab = "specab_zlab_dflash:dflash_logits"
    # float32: a bf16 target's CPU kernels differ between machines (AVX-512 BF16 or not) by
    # enough to move the normed forward's pos0 from 0.514 to 0.598 on the same six probes
    at = {"dtype": "float32"}
    demo = run_runner(tmp_path, "demo", probes, forward=TRAINED, **at)
    raw = run_runner(tmp_path, "raw", probes, forward=f"{zlab}_raw", **at)
    assert [{k: r[k] for k in keys} for r in raw] == [{k: r[k] for k in keys} for r in demo]
    normed = run_runner(
        tmp_path, "normed", probes, forward="specab_zlab_dflash:dflash_logits", **at
    )
    pos0 = [sum(r["accepted_per_pos"][0] for r in x) / sum(r["drafts"] for r in x)
            for x in (raw, normed)]  # fmt: skip
    assert pos0[1] < pos0[0] - 0.06, pos0  # 0.656 and 0.545 here
    assert [r["output_ids"] for r in normed] == [r["output_ids"] for r in raw]  # greedy target


def test_a_checkpoint_z_labs_class_cannot_fully_load_is_refused_naming_the_tensor(
    tmp_path: Path,
) -> None:
    drafter, name = renamed_tensor(tmp_path, "o_proj.weight", "out_proj.weight")
    ref = ReferenceForward(forward="specab_zlab_dflash:dflash_logits")
    check_reference_interpreter(
        ref, ROOT / "x.toml", sys.executable, "z", str(MODELS / "dflash-trained")
    )
    with pytest.raises(SpecabError, match=f"no tensor {name}, which z-lab's DFlashDraftModel has"):
        check_reference_interpreter(ref, ROOT / "x.toml", sys.executable, "z", str(drafter))
