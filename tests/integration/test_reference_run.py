"""Reference arms through `run-ab` on real Ray (no vLLM server: the runner drives the drafter's
own forward with the target in HF transformers): the demo's DFlash training forward against a
mismatch planted by the config the demo ships (the same forward with rope over the quarter of
each head that `partial_rotary_factor` declares, as vLLM builds it). Both write the rows a
served boot writes; the analysis calls the planted one lower, from boots that repeat exactly,
and states no speed for either; their output tokens agree (greedy decoding does not depend
on the drafter)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reference_helpers import ROOT, TRAINED, reference_experiment

from bench.cli import run
from bench.demo import committed_models
from bench.store import load_results

pytestmark = [
    pytest.mark.ray,
    pytest.mark.timeout(600),
    pytest.mark.usefixtures("shared_ray"),
    pytest.mark.skipif(committed_models() is None, reason="the committed demo models are absent"),
]


def test_a_planted_mismatch_departs_from_the_training_forward(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arms = f"""
[[arms]]
name = "reference"
reference = {{ forward = "{TRAINED}", path = ["{ROOT}"] }}
[[arms]]
name = "declared-rope"
reference = {{ forward = "{TRAINED.replace("logits", "declared_logits")}", path = ["{ROOT}"] }}
"""
    spec = reference_experiment(tmp_path, arms, probes="max_tokens = 32")
    root = tmp_path / "results"
    assert run(["run-ab", str(spec), "--results-dir", str(root), "--quiet", "--no-report"]) == 0
    capsys.readouterr()
    res = load_results(root)
    ok = res.ok_boots()
    assert sorted(ok["arm"]) == ["declared-rope"] * 2 + ["reference"] * 2
    assert set(ok["reference_forward"]) == {
        "bench.demo.training_forward:dflash_logits",
        "bench.demo.training_forward:dflash_declared_logits",
    }
    pr = res.probes
    assert (pr["source"] == "reference").all() and pr["prompt_ids_sha256"].notna().all()
    by_arm = {a: g.sort_values(["boot", "probe_id"]) for a, g in pr.groupby("arm")}
    ref, planted = by_arm["reference"], by_arm["declared-rope"]
    assert [list(x) for x in ref["output_token_ids"]] == [
        list(x) for x in planted["output_token_ids"]
    ]
    assert list(ref["prompt_ids_sha256"]) == list(planted["prompt_ids_sha256"])
    assert run(["analyze", str(root), "--json", "--resamples", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    pos0 = next(
        c
        for c in out["comparisons"]
        if c["arm"] == "declared-rope" and c["metric"] == "acceptance_pos0"
    )
    assert pos0["verdict"] == "regressed" and pos0["difference"] < -0.05, pos0
    assert pos0["method"] == "deterministic"  # every boot repeats exactly at T = 0
    said = " ".join(out["notes"])  # so 2 boots an arm are enough, and said so
    assert "compared as 'deterministic'" in said and "rests on 1 degree" not in said
    assert not [c for c in out["comparisons"] if c["metric"] == "output_tokens_per_s"]
    speed = {a["arm"]: a["metrics"]["output_tokens_per_s"]["estimate"] for a in out["arms"]}
    assert speed == {"reference": None, "declared-rope": None}


def test_above_temperature_0_each_reference_boot_is_a_seed_and_no_token_parity_is_stated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At T > 0 the runner samples with vLLM's rule, its boots seeded by their engine seeds:
    two boots of one arm draw other tokens, and so do two passes of one boot; the analysis
    says why it states no token-for-token parity, and its drift across passes has no
    tokens/s for a reference arm (an HF forward's speed)."""
    arm = (
        f'[[arms]]\nname = "reference"\nreference = {{ forward = "{TRAINED}", path = ["{ROOT}"] }}'
    )
    spec = reference_experiment(tmp_path, arm, name="sampled", probes="max_tokens = 16\npasses = 2")
    spec.write_text(spec.read_text().replace("temperature = 0.0", "temperature = 0.8"))
    root = tmp_path / "results"
    assert run(["run-ab", str(spec), "--results-dir", str(root), "--quiet", "--no-report"]) == 0
    capsys.readouterr()
    pr = load_results(root).probes.sort_values(["boot", "pass_index", "probe_id"])
    boots = [[list(x) for x in g["output_token_ids"]] for _, g in pr.groupby("boot")]
    assert len(boots) == 2 and boots[0] != boots[1]
    passes = [[list(x) for x in g["output_token_ids"]] for _, g in pr.groupby("pass_index")]
    assert len(passes) == 2 and passes[0] != passes[1]  # each pass drawn anew
    assert run(["analyze", str(root), "--json", "--resamples", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["parity"] == []
    assert any("temperature 0.8" in n and "no token-for-token parity" in n for n in out["notes"])
    drifts = {d["metric"] for d in out["drift"]}  # drift across passes, but no HF tokens/s
    assert "acceptance_pos0" in drifts and "output_tokens_per_s" not in drifts
