"""The demo drafters' training forwards as reference forwards: what a reference arm runs
(`reference = { forward = "bench.demo.training_forward:dflash_logits" }`), through the
protocol of docs/reference-forward.md. Each loads its checkpoint into the very module it was trained
as (`bench.demo.dflash`, `bench.demo.eagle3`: full-head rope, whatever config.json declares)
and proposes the K drafted slots' logits for one verify step. `dflash_declared_logits` is
the same DFlash forward rotating only the share of each head that config.json declares
(`partial_rotary_factor`), as vLLM builds it: the shipped bug, offline.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from transformers import Qwen3Config

from bench.demo.dflash import DFlashDraft, block_inputs
from bench.demo.eagle3 import Eagle3Head


def _config(drafter: str) -> tuple[Qwen3Config, dict[str, Any]]:
    raw = json.loads((Path(drafter) / "config.json").read_text(encoding="utf-8"))
    return Qwen3Config(**{k: v for k, v in raw.items() if k != "architectures"}), raw


def _loaded(module: torch.nn.Module, drafter: str) -> torch.nn.Module:
    """The checkpoint in `module` (every tensor by name and shape: the first missing, extra
    or misshapen one raises, naming it), in float32, for inference."""
    path = Path(drafter) / "model.safetensors"
    state, want = load_file(str(path)), module.state_dict()
    for name, tensor in want.items():
        if name not in state:
            raise ValueError(f"{path}: no tensor {name}, which the training module has")
        if tuple(state[name].shape) != tuple(tensor.shape):
            raise ValueError(f"{path}: tensor {name} has shape {tuple(state[name].shape)}, "
                             f"the training module {tuple(tensor.shape)}")  # fmt: skip
    if extra := sorted(set(state) - set(want)):
        raise ValueError(f"{path}: tensor {extra[0]} has no place in the training module")
    module.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
    return module.float().eval()


@cache
def _dflash(drafter: str, declared: bool = False) -> DFlashDraft:
    cfg, raw = _config(drafter)
    d = raw["dflash_config"]
    draft = DFlashDraft(
        cfg,
        layers=int(raw["num_hidden_layers"]),
        aux_layers=list(d["target_layer_ids"]),  # HF layer indices: vLLM adds 1 itself
        mask_id=int(d["mask_token_id"]),
    )
    if declared:  # the share of each head the config declares, as vLLM reads it
        dims = int(int(raw["head_dim"]) * float(raw.get("partial_rotary_factor", 1.0)))
        for layer in draft.layers:
            layer.self_attn.rotary_dims = dims
    return _loaded(draft, drafter)  # type: ignore[return-value]


@cache
def _eagle3(drafter: str) -> Eagle3Head:
    cfg, raw = _config(drafter)
    ids = raw["eagle_aux_hidden_state_layer_ids"]
    return _loaded(Eagle3Head(cfg, aux_layers=[i - 1 for i in ids]), drafter)  # type: ignore[return-value]


def dflash_logits(step: dict[str, Any], *, declared: bool = False) -> torch.Tensor:
    """DFlash: the block [bonus, mask x K] at positions T .. T+K, non-causal over the
    context's aux states; the target's LM head at the K mask slots."""
    draft, target, k = _dflash(step["drafter"], declared), step["target"], int(step["k"])
    layers, tokens = step["layer_outputs"], step["tokens"]
    t = layers.shape[1]
    aux = torch.cat([layers[i] for i in draft.aux_layers], dim=-1)[None].float()
    pos, mask = block_inputs(torch.tensor([[t]]), k, t)
    block = torch.tensor([[int(tokens[-1])] + [draft.mask_id] * k])
    embeds = target.get_input_embeddings()(block).float()
    hidden = draft(aux, embeds, pos, mask)[0, 1:]
    return target.lm_head(hidden.to(target.lm_head.weight.dtype))


def dflash_declared_logits(step: dict[str, Any]) -> torch.Tensor:
    """`dflash_logits` with rope over the share of each head that config.json declares."""
    return dflash_logits(step, declared=True)


def eagle3_logits(step: dict[str, Any]) -> torch.Tensor:
    """EAGLE-3: K autoregressive steps from the last processed position, each fed the one
    before's proposal (greedy) and its pre-norm output, the head's own LM head."""
    head, target, k = _eagle3(step["drafter"]), step["target"], int(step["k"])
    layers, tokens = step["layer_outputs"], step["tokens"]
    t = layers.shape[1]
    aux = torch.cat([layers[i] for i in head.aux_layers], dim=-1)[None].float()
    ids = [int(x) for x in tokens]
    rows = []
    for j in range(1, k + 1):
        seq = torch.tensor([ids])
        padded = torch.cat((aux, aux.new_zeros(1, seq.shape[1] - t, aux.shape[-1])), dim=1)
        anchor = torch.tensor([[t - 1]])
        prenorm = head.unroll(padded, target.get_input_embeddings(), seq, anchor, j)
        rows.append(head.logits(prenorm[0, 0, -1]))
        ids.append(int(rows[-1].argmax()))
    return torch.stack(rows)


# The protocol's optional check (docs/reference-forward.md): `validate` calls FUNCTION.check
# with the drafter's directory, so a checkpoint the module cannot load is named before a run.
dflash_logits.check = _dflash  # type: ignore[attr-defined]
dflash_declared_logits.check = _dflash  # type: ignore[attr-defined]
eagle3_logits.check = _eagle3  # type: ignore[attr-defined]
# The trace's hook (docs/trace.md): FUNCTION.module(drafter) is the module the forward runs,
# the one whose submodules `specab trace` hooks by its name map (called as the forward calls
# the cached loader, so it is the very instance).
dflash_logits.module = lambda drafter: _dflash(drafter, False)  # type: ignore[attr-defined]
dflash_declared_logits.module = lambda drafter: _dflash(drafter, True)  # type: ignore[attr-defined]
eagle3_logits.module = _eagle3  # type: ignore[attr-defined]
