"""Name maps: which module of a reference forward computes each traced tensor, and which of
its attributes holds each geometry field (docs/trace.md). Built in for the forwards specab
ships for DFlash; a user's own forward brings its map in the experiment file
(`reference.trace_map`), which also extends or overrides a built-in one.

A tensor's entry is a module path in the drafter's module (`FUNCTION.module(drafter)`), a
path in the target's with "target:", and "#N" for the module's N-th call within one step;
"{i}" stands for each draft layer. A config entry (a key "config.FIELD") is an attribute
path, or "=JSON" for what the reference's code fixes (its rope style, its causality)."""

from __future__ import annotations

from collections.abc import Mapping

# What vLLM computes each traced tensor in (the capture's hooks), in forward order.
ENGINE_MODULES: dict[str, str] = {
    "target.aux": "target model: aux hidden states handed to the drafter",
    "context.fc": "DFlashQwen3ForCausalLM.combine_hidden_states (fc)",
    "layers.{i}.context_k_norm": "DFlashQwen3Model._normalize_context_k (grouped k-norm)",
    "layers.{i}.context_k": "DFlashQwen3Model.precompute_and_store_context_kv (K after rope)",
    "block.embeds": "DFlashQwen3Model.embed_input_ids",
    "layers.{i}.input_norm": "layers.{i}.input_layernorm",
    "layers.{i}.q_rope": "layers.{i}.self_attn.rotary_emb (q)",
    "layers.{i}.k_rope": "layers.{i}.self_attn.rotary_emb (k)",
    "layers.{i}.attn_out": "layers.{i}.self_attn",
    "layers.{i}.mlp_out": "layers.{i}.mlp",
    "final.norm": "model.norm",
    "draft.logits": "DFlashQwen3ForCausalLM.compute_logits",
}

_DEMO_DFLASH = {
    "context.fc": "fc",
    "layers.{i}.context_k_norm": "layers.{i}.self_attn.k_norm#0",
    "layers.{i}.context_k": "layers.{i}.self_attn.rotary#0",
    "block.embeds": "target:model.embed_tokens",
    "layers.{i}.input_norm": "layers.{i}.input_layernorm",
    "layers.{i}.q_rope": "layers.{i}.self_attn.rotary#1",
    "layers.{i}.k_rope": "layers.{i}.self_attn.rotary#2",
    "layers.{i}.attn_out": "layers.{i}.self_attn",
    "layers.{i}.mlp_out": "layers.{i}.mlp",
    "final.norm": "norm",
    "config.aux_layer_ids": "aux_layers",
    "config.mask_token_id": "mask_id",
    "config.final_norm_eps": "norm.variance_epsilon",
    "config.layers.{i}.head_dim": "layers.{i}.self_attn.head_dim",
    "config.layers.{i}.rotary_dim": "layers.{i}.self_attn.rotary.dims",
    "config.layers.{i}.rope_theta": "layers.{i}.self_attn.rotary.theta",
    "config.layers.{i}.rope_style": '="neox"',
    "config.layers.{i}.causal": "=false",
    "config.layers.{i}.value_scale": "=1.0",
    "config.layers.{i}.rms_norm_eps": "layers.{i}.input_layernorm.variance_epsilon",
    "config.layers.{i}.q_norm_eps": "layers.{i}.self_attn.q_norm.variance_epsilon",
}

# speculators' DFlashDraftModel: its rope is a function (no q, k or context K after rope to
# hook); its k-norm runs once over [context, block], the context's rows first; its aux
# layers, numbered as HF's hidden_states, are read as decoder layers (one less).
_SPECULATORS_DFLASH = {
    "config.aux_layer_ids": "specab_aux_layers",
    "context.fc": "fc",
    "layers.{i}.context_k_norm": "layers.{i}.self_attn.k_norm",
    "block.embeds": "embed_tokens",
    "layers.{i}.input_norm": "layers.{i}.input_layernorm",
    "layers.{i}.attn_out": "layers.{i}.self_attn",
    "layers.{i}.mlp_out": "layers.{i}.mlp",
    "final.norm": "norm",
    "config.mask_token_id": "config.mask_token_id",
    "config.final_norm_eps": "norm.variance_epsilon",
    "config.layers.{i}.head_dim": "layers.{i}.self_attn.head_dim",
    "config.layers.{i}.rotary_dim": "specab_rotary_dim",
    "config.layers.{i}.rope_style": '="neox"',
    "config.layers.{i}.causal": "=false",
    "config.layers.{i}.value_scale": "=1.0",
    "config.layers.{i}.rms_norm_eps": "layers.{i}.input_layernorm.variance_epsilon",
    "config.layers.{i}.q_norm_eps": "layers.{i}.self_attn.q_norm.variance_epsilon",
}

BUILT_IN: dict[str, dict[str, str]] = {
    "specab_speculators:dflash_logits": _SPECULATORS_DFLASH,
    "bench.demo.training_forward:dflash_logits": _DEMO_DFLASH,
    "bench.demo.training_forward:dflash_declared_logits": _DEMO_DFLASH,
}

# Drafter methods whose served forward the capture hooks.
TRACED_METHODS = ("dflash",)


def name_map(forward: str, extension: Mapping[str, str]) -> dict[str, str] | None:
    """The forward's map (built in, extended by the experiment file's), None without one."""
    base = BUILT_IN.get(forward)
    if base is None and not extension:
        return None
    return {**(base or {}), **extension}


def for_layers(entries: Mapping[str, str], layers: int) -> dict[str, str]:
    """Each "{i}" entry once per draft layer, in the map's order."""
    out: dict[str, str] = {}
    for key, value in entries.items():
        if "{i}" not in key:
            out[key] = value
            continue
        for i in range(layers):
            out[key.replace("{i}", str(i))] = value.replace("{i}", str(i))
    return out


def split(entries: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(tensor entries, config entries without their "config." prefix)."""
    tensors = {k: v for k, v in entries.items() if not k.startswith("config.")}
    config = {k.removeprefix("config."): v for k, v in entries.items() if k.startswith("config.")}
    return tensors, config


def forward_order(layers: int) -> list[str]:
    """Every trace name in the order the engine computes it."""
    head = ["target.aux", "context.fc"]
    context = [f"layers.{i}.{n}" for i in range(layers) for n in ("context_k_norm", "context_k")]
    block = [
        f"layers.{i}.{n}"
        for i in range(layers)
        for n in ("input_norm", "q_rope", "k_rope", "attn_out", "mlp_out")
    ]
    return [*head, *context, "block.embeds", *block, "final.norm", "draft.logits"]


def engine_module(name: str) -> str:
    """Where vLLM computes a trace name."""
    parts = name.split(".")
    if parts[0] == "layers" and len(parts) > 2:
        key = f"layers.{{i}}.{'.'.join(parts[2:])}"
        return ENGINE_MODULES.get(key, name).replace("{i}", parts[1])
    return ENGINE_MODULES.get(name, name)
