"""specab trace's capture (docs/trace.md): a built-in patch, applied as an arm's patches are,
that records what vLLM's DFlash drafter computes for the first N verify steps of the boot's
one request. Each step is one `propose` call of the proposer (a warm-up or profiling run
never proposes), written as `step-NNN.safetensors` into $SPECAB_TRACE_DIR, float32 except
the ids and positions; `engine.json` holds what the engine resolved from the config. The
tensors, in forward order:
- inputs.*: the context rows' token ids and positions (the tokens the target processed this
  step), the bonus token;
- target.aux: the target's aux hidden states handed to the drafter (vLLM's concatenation
  over its aux layers, each made whole: hidden + residual);
- context.fc: `combine_hidden_states` (fc over the aux features);
- context.k_norm, context.k_rope: each draft layer's context K after the grouped k-norm, and
  after the rotary embedding vLLM applies in place before writing the KV cache;
- block.token_ids, block.positions, block.embeds: the query block [bonus, mask x K];
- layers.I.*: input_norm, q_rope, k_rope, attn_out, mlp_out, output (hidden + residual);
- final.norm; draft.logits (`compute_logits`, the K mask slots); draft.token_ids.
Stdlib at import; torch and safetensors only once vLLM runs."""

import functools
import inspect
import json
import os

from specab_patch import report_applied, when_imported

PATCH = "specab_trace_capture"
# Each wrapper keeps its original's signature (functools.wraps): vLLM's torch.compile
# decorator reads a model forward's annotations, subclasses' included.
_DIR = os.environ.get("SPECAB_TRACE_DIR", "")
_STEPS = int(os.environ.get("SPECAB_TRACE_STEPS") or 0)
# A bound on what one trace writes: a long prompt's first step alone holds its aux features
# for every prompt token; past the bound the capture stops and says so.
_MAX_BYTES = int(float(os.environ.get("SPECAB_TRACE_MAX_MB") or 512) * 2**20)
_state = {"step": 0, "current": None, "stash": None, "hooked": False, "bytes": 0}


def _put(name, tensor):
    cur = _state["current"]
    if cur is None or tensor is None:
        return
    t = tensor.detach().to("cpu")
    cur[name] = (t if not t.is_floating_point() else t.float()).contiguous().clone()


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def _hooks(drafter):
    """Forward hooks on the drafter's modules (once: the instances exist by the first step)."""
    for i, layer in enumerate(drafter.model.layers):
        attn = layer.self_attn
        named = (
            (layer.input_layernorm, f"layers.{i}.input_norm", _first),
            (attn, f"layers.{i}.attn_out", _first),
            (layer.mlp, f"layers.{i}.mlp_out", _first),
        )
        for module, name, pick in named:
            module.register_forward_hook(
                lambda _m, _a, out, name=name, pick=pick: _put(name, pick(out))
            )

        def rope(_m, _a, out, i=i):
            _put(f"layers.{i}.q_rope", out[0])
            _put(f"layers.{i}.k_rope", out[1])

        def whole(_m, _a, out, i=i):
            if isinstance(out, tuple) and out[1] is not None:
                _put(f"layers.{i}.output", out[0] + out[1])

        attn.rotary_emb.register_forward_hook(rope)
        layer.register_forward_hook(whole)
    drafter.model.norm.register_forward_hook(lambda _m, _a, out: _put("final.norm", _first(out)))


def _engine(proposer, drafter):
    """What the engine resolved for the fields that decide the drafter's geometry."""
    layers = []
    for layer in drafter.model.layers:
        a, rope = layer.self_attn, layer.self_attn.rotary_emb
        layers.append({
            "head_dim": a.head_dim, "rotary_dim": getattr(rope, "rotary_dim", None),
            "rope_style": "neox" if getattr(rope, "is_neox_style", True) else "interleaved",
            "rope_type": type(rope).__name__, "rope_theta": getattr(rope, "base", None),
            "causal": bool(getattr(a, "causal", False)),
            "sliding_window": getattr(a, "sliding_window", None),
            "rms_norm_eps": getattr(layer.input_layernorm, "variance_epsilon", None),
            "q_norm_eps": getattr(a.q_norm, "variance_epsilon", None),
            "value_scale": float(getattr(a, "v_scale", None) or 1.0),
        })  # fmt: skip
    cfg = drafter.config
    dflash = getattr(cfg, "dflash_config", None) or {}
    return {
        "layers": layers,
        "aux_layer_ids": list(dflash.get("target_layer_ids") or []),
        "mask_token_id": getattr(proposer, "parallel_drafting_token_id", None),
        "final_norm_eps": getattr(drafter.model.norm, "variance_epsilon", None),
        "vocab_mapping": getattr(drafter, "draft_id_to_target_id", None) is not None,
        "num_speculative_tokens": getattr(proposer, "num_speculative_tokens", None),
    }


def _write(step, cur):
    from safetensors.torch import save_file

    size = sum(t.numel() * t.element_size() for t in cur.values())
    if _state["bytes"] + size > _MAX_BYTES:
        with open(os.path.join(_DIR, "stopped.json"), "w", encoding="utf-8") as f:
            json.dump({"step": step, "bytes": _state["bytes"], "max_bytes": _MAX_BYTES}, f)
        _state["step"] = _STEPS  # nothing more
        return
    _state["bytes"] += size
    os.makedirs(_DIR, exist_ok=True)
    tmp = os.path.join(_DIR, f".step-{step:03d}.tmp")
    save_file(cur, tmp)
    os.replace(tmp, os.path.join(_DIR, f"step-{step:03d}.safetensors"))


def _patch_proposer(mod):
    cls = mod.DFlashProposer
    original = cls.propose

    signature = inspect.signature(original)

    @functools.wraps(original)
    def propose(self, *args, **kwargs):
        step = _state["step"]
        if not _DIR or step >= _STEPS:
            return original(self, *args, **kwargs)
        given = signature.bind(self, *args, **kwargs).arguments
        if not _state["hooked"]:
            _hooks(self.model)
            _state["hooked"] = True
        _state["current"] = cur = {}
        _put("inputs.context_token_ids", given["target_token_ids"])
        _put("inputs.context_positions", given["target_positions"])
        _put("inputs.bonus_token_ids", given["next_token_ids"])
        try:
            out = original(self, *args, **kwargs)
            _put("draft.token_ids", out)
        finally:
            _state["current"] = None
        if step == 0:
            os.makedirs(_DIR, exist_ok=True)
            with open(os.path.join(_DIR, "engine.json"), "w", encoding="utf-8") as f:
                json.dump(_engine(self, self.model), f, indent=1, default=str)
        _state["step"] = step + 1
        _write(step, cur)
        return out

    cls.propose = propose
    report_applied(PATCH, f"capturing the first {_STEPS} DFlash steps into the trace directory")


def _patch_model(mod):
    model, lm = mod.DFlashQwen3Model, mod.DFlashQwen3ForCausalLM
    combine, logits = lm.combine_hidden_states, lm.compute_logits
    precompute, normalize = model.precompute_and_store_context_kv, model._normalize_context_k
    forward, embed = model.forward, model.embed_input_ids

    @functools.wraps(combine)
    def combine_hidden_states(self, hidden_states):
        out = combine(self, hidden_states)
        _put("target.aux", hidden_states)
        _put("context.fc", out)
        return out

    @functools.wraps(normalize)
    def _normalize_context_k(self, all_k):
        out = normalize(self, all_k)
        _put("context.k_norm", out)
        _state["stash"] = out  # rotated in place by the caller: read it after
        return out

    @functools.wraps(precompute)
    def precompute_and_store_context_kv(self, *args, **kwargs):
        _state["stash"] = None
        result = precompute(self, *args, **kwargs)
        _put("context.k_rope", _state["stash"])
        return result

    @functools.wraps(forward)
    def model_forward(self, input_ids, positions, *args, **kwargs):
        _put("block.token_ids", input_ids)
        _put("block.positions", positions)
        return forward(self, input_ids, positions, *args, **kwargs)

    @functools.wraps(embed)
    def embed_input_ids(self, input_ids):
        out = embed(self, input_ids)
        _put("block.embeds", out)
        return out

    @functools.wraps(logits)
    def compute_logits(self, hidden_states):
        out = logits(self, hidden_states)
        _put("draft.logits", out)
        return out

    lm.combine_hidden_states, lm.compute_logits = combine_hidden_states, compute_logits
    model.precompute_and_store_context_kv = precompute_and_store_context_kv
    model._normalize_context_k = _normalize_context_k
    model.forward, model.embed_input_ids = model_forward, embed_input_ids


when_imported("vllm.model_executor.models.qwen3_dflash", _patch_model)
when_imported("vllm.v1.spec_decode.dflash", _patch_proposer)
