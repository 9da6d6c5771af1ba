"""speculators' DFlash (PyPI `speculators` 0.9) as a built-in reference forward
(runtime/specab_speculators.py), on the committed demo drafter converted as speculators'
own converter converts a z-lab checkpoint. Its model definition, driven one anchor block per
verify step, proposes exactly what the demo's own training forward proposes: the same
model in another framework, every count and token equal. The checkpoint declares
`partial_rotary_factor: 0.25`; speculators' definition rotates every dim, as the drafter was
trained (seed report 002: a field vLLM reads and training ignored). Its check refuses a
checkpoint with a renamed tensor, naming it, before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from reference_helpers import ROOT, TRAINED, demo_probes, renamed_tensor, run_runner

from bench.demo import committed_models
from bench.errors import SpecabError
from bench.experiment.reference import check_reference_interpreter
from bench.experiment.spec import ReferenceForward

FORWARD = "specab_speculators:dflash_logits"
pytestmark = [
    pytest.mark.skipif(committed_models() is None, reason="the committed demo models are absent"),
    pytest.mark.skipif(
        subprocess.run([sys.executable, "-c", "import speculators.models.dflash"]).returncode != 0,
        reason="speculators is not installed (make install puts it in .venv)",
    ),
]


def test_speculators_definition_proposes_what_the_demos_training_forward_proposes(
    tmp_path: Path,
) -> None:
    keys = ("drafts", "accepted_per_pos", "step_accepted", "output_ids")
    probes = demo_probes(6, 64)
    demo = run_runner(tmp_path, "demo", probes, forward=TRAINED)
    ours = run_runner(tmp_path, "speculators", probes, forward=FORWARD)
    assert [{k: r[k] for k in keys} for r in ours] == [{k: r[k] for k in keys} for r in demo]


def test_a_checkpoint_speculators_cannot_fully_load_is_refused_naming_the_tensor(
    tmp_path: Path,
) -> None:
    drafter, name = renamed_tensor(tmp_path, "o_proj.weight", "out_proj.weight")
    ref = ReferenceForward(forward=FORWARD)  # the committed drafter loads: the test above
    renamed = name.replace("o_proj.weight", "out_proj.weight")
    with pytest.raises(SpecabError, match=f"tensor {renamed} has no place in speculators'"):
        check_reference_interpreter(ref, ROOT / "x.toml", sys.executable, "s", str(drafter))
