"""Tiny DFlash and EAGLE-3 drafters for the demo target, in the checkpoint layouts vLLM loads
(`specab demo-models DIR --drafters`). Random weights (deterministic seed): they exercise
vLLM's real DFlash and EAGLE-3 code paths (aux hidden states of the target, the parallel
masked block, the fused head) on the CPU, but accept almost nothing. `save_dflash` and
`save_eagle3` write the trained ones (bench.demo.distill) in the same layouts.

Layouts (vLLM 0.32, vllm/model_executor/models/):
- DFlash (`qwen3_dflash.py`, architectures ["DFlashDraftModel"]): Qwen3 decoder layers
  `layers.N.*` with separate q/k/v and gate/up projections (vLLM stacks them), `fc`
  [hidden, aux x target hidden] over the aux layers' hidden states, `hidden_norm`, `norm`;
  no embed_tokens / lm_head (shared with the target). `dflash_config.target_layer_ids` count
  from 0 and vLLM adds 1 (`eagle3_utils.get_eagle3_aux_layers_from_config`).
- EAGLE-3, Llama head layout (`llama_eagle3.py`, ["LlamaForCausalLMEagle3"]): one
  `midlayer.*` whose q/k/v take [embeds, hidden] (2 x hidden), `midlayer.hidden_norm`,
  `fc` [hidden, 3 x target hidden], `norm`, its own `lm_head`; aux ids as written
  (`eagle_aux_hidden_state_layer_ids`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from bench.demo.tiny_models import SEED, write_json

DFLASH_BLOCK = 4
DFLASH_TARGET_LAYER_IDS = [1, 3]  # vLLM reads aux layers 2 and 4 of the 4-layer target
EAGLE3_AUX_LAYER_IDS = [1, 2, 3]  # explicit: the default (2, L/2, L-3) repeats 2 at L = 4
MASK_TOKEN = "<|im_start|>"  # a special token the probes never generate


def _target_config(target: Path) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((target / "config.json").read_text(encoding="utf-8"))
    return cfg


def _randn(shape: tuple[int, ...], gen: Any) -> Any:
    import torch

    return (torch.randn(shape, generator=gen) * 0.02).to(torch.bfloat16)


def _qwen3_layer(prefix: str, cfg: dict[str, Any], gen: Any, q_in: int) -> dict[str, Any]:
    """One Qwen3/Llama decoder layer's tensors in HF names (q/k/v input width `q_in`)."""
    import torch

    h, hd = cfg["hidden_size"], cfg["head_dim"]
    heads, kv, ffn = (
        cfg["num_attention_heads"],
        cfg["num_key_value_heads"],
        cfg["intermediate_size"],
    )
    ones = lambda n: torch.ones(n, dtype=torch.bfloat16)  # noqa: E731 - RMSNorm weights
    return {
        f"{prefix}self_attn.q_proj.weight": _randn((heads * hd, q_in), gen),
        f"{prefix}self_attn.k_proj.weight": _randn((kv * hd, q_in), gen),
        f"{prefix}self_attn.v_proj.weight": _randn((kv * hd, q_in), gen),
        f"{prefix}self_attn.o_proj.weight": _randn((h, heads * hd), gen),
        f"{prefix}mlp.gate_proj.weight": _randn((ffn, h), gen),
        f"{prefix}mlp.up_proj.weight": _randn((ffn, h), gen),
        f"{prefix}mlp.down_proj.weight": _randn((h, ffn), gen),
        f"{prefix}input_layernorm.weight": ones(h),
        f"{prefix}post_attention_layernorm.weight": ones(h),
    }


def _save(out: Path, config: dict[str, Any], tensors: dict[str, Any], tok_dir: Path) -> Path:
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "model.safetensors"))
    write_json(out / "config.json", config)
    for f in sorted(tok_dir.iterdir()):
        shutil.copyfile(f, out / f.name)
    return out


def mask_id(tok_dir: Path) -> int:
    added = json.loads((tok_dir / "tokenizer.json").read_text(encoding="utf-8"))["added_tokens"]
    return int(next(t["id"] for t in added if t["content"] == MASK_TOKEN))


def dflash_config(target: Path, tok_dir: Path) -> dict[str, Any]:
    """The DFlash drafter's config.json for `target`: 1 layer, block of 4, aux ids [1, 3]."""
    cfg = _target_config(target)
    return {
        **cfg,
        "architectures": ["DFlashDraftModel"],
        "num_hidden_layers": 1,
        "layer_types": ["full_attention"],
        "block_size": DFLASH_BLOCK,
        "target_hidden_size": cfg["hidden_size"],
        "dflash_config": {
            "mask_token_id": mask_id(tok_dir),
            "target_layer_ids": DFLASH_TARGET_LAYER_IDS,
        },
    }


def build_dflash(target: Path, tok_dir: Path, out: Path) -> Path:
    """A 1-layer DFlash drafter for `target` (random weights)."""
    import torch

    cfg = _target_config(target)
    gen = torch.Generator().manual_seed(SEED + 1)
    h, hd = cfg["hidden_size"], cfg["head_dim"]
    tensors = _qwen3_layer("layers.0.", cfg, gen, h)
    tensors["layers.0.self_attn.q_norm.weight"] = torch.ones(hd, dtype=torch.bfloat16)
    tensors["layers.0.self_attn.k_norm.weight"] = torch.ones(hd, dtype=torch.bfloat16)
    tensors["fc.weight"] = _randn((h, h * len(DFLASH_TARGET_LAYER_IDS)), gen)
    tensors["hidden_norm.weight"] = torch.ones(h, dtype=torch.bfloat16)
    tensors["norm.weight"] = torch.ones(h, dtype=torch.bfloat16)
    return _save(out, dflash_config(target, tok_dir), tensors, tok_dir)


def save_dflash(state: dict[str, Any], target: Path, tok_dir: Path, out: Path) -> Path:
    """A trained drafter's state dict (bench.demo.dflash names = vLLM's) as a checkpoint."""
    return _save(out, dflash_config(target, tok_dir), _bf16(state), tok_dir)


def _bf16(state: dict[str, Any]) -> dict[str, Any]:
    import torch

    return {k: v.detach().to(torch.bfloat16).contiguous() for k, v in state.items()}


def eagle3_config(target: Path) -> dict[str, Any]:
    """The EAGLE-3 head's config.json (Llama head layout) for `target`: aux ids [1, 2, 3]."""
    cfg = _target_config(target)
    keep = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
            "head_dim", "rms_norm_eps", "vocab_size", "max_position_embeddings", "bos_token_id",
            "eos_token_id", "pad_token_id", "rope_parameters", "hidden_act")  # fmt: skip
    return {
        **{k: cfg[k] for k in keep if k in cfg},
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "num_hidden_layers": 1,
        "tie_word_embeddings": False,
        "draft_vocab_size": cfg["vocab_size"],
        "target_hidden_size": cfg["hidden_size"],
        "eagle_aux_hidden_state_layer_ids": EAGLE3_AUX_LAYER_IDS,
        "dtype": "bfloat16",
    }


def build_eagle3(target: Path, tok_dir: Path, out: Path) -> Path:
    """A 1-layer EAGLE-3 head for `target` in the Llama head layout (random weights)."""
    import torch

    cfg = _target_config(target)
    gen = torch.Generator().manual_seed(SEED + 2)
    h = cfg["hidden_size"]
    tensors = _qwen3_layer("midlayer.", cfg, gen, 2 * h)
    tensors["midlayer.hidden_norm.weight"] = torch.ones(h, dtype=torch.bfloat16)
    tensors["fc.weight"] = _randn((h, h * len(EAGLE3_AUX_LAYER_IDS)), gen)
    tensors["norm.weight"] = torch.ones(h, dtype=torch.bfloat16)
    tensors["lm_head.weight"] = _randn((cfg["vocab_size"], h), gen)
    return _save(out, eagle3_config(target), tensors, tok_dir)


def save_eagle3(state: dict[str, Any], target: Path, tok_dir: Path, out: Path) -> Path:
    """A trained head's state dict (bench.demo.eagle3 names = the checkpoint's)."""
    return _save(out, eagle3_config(target), _bf16(state), tok_dir)


def build_mtp_target(tok_dir: Path, out: Path) -> Path:
    """A tiny Qwen3-Next target whose checkpoint carries one MTP layer (`mtp.*`), random
    weights: vLLM's `mtp` method (qwen3_next_mtp.py) on a hybrid linear/full attention model
    with MoE layers (vLLM's Qwen3-Next MTP layer is a MoE layer, so the target needs them)."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM

    cfg = Qwen3NextConfig(
        vocab_size=2048,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=64,
        linear_value_head_dim=64,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=128,
        shared_expert_intermediate_size=128,
        layer_types=["linear_attention", "full_attention"],
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )  # fmt: skip  (EOS is token 0 in the demo tokenizer)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.manual_seed(SEED + 3)
    model = Qwen3NextForCausalLM(cfg)
    with torch.no_grad():  # EOS's logit 0 while 2047 random ones are not: greedy never stops
        model.lm_head.weight[0].zero_()
    model.bfloat16().save_pretrained(out)
    weights = load_file(str(out / "model.safetensors"))
    # the MTP layer: a copy of the full-attention MoE layer 1, in the checkpoint's own names
    last = "model.layers.1."
    mtp = {
        "mtp.layers.0." + k[len(last) :]: v.clone()
        for k, v in weights.items()
        if k.startswith(last)
    }
    h = cfg.hidden_size
    gen = torch.Generator().manual_seed(SEED + 4)
    mtp["mtp.fc.weight"] = _randn((h, 2 * h), gen)
    for norm in ("norm", "pre_fc_norm_hidden", "pre_fc_norm_embedding"):
        mtp[f"mtp.{norm}.weight"] = torch.zeros(h, dtype=torch.bfloat16)  # Qwen3-Next: 1 + w
    save_file({**weights, **mtp}, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = _target_config(out)
    config["num_nextn_predict_layers"] = 1
    write_json(out / "config.json", config)
    for f in sorted(tok_dir.iterdir()):
        shutil.copyfile(f, out / f.name)
    return out
