"""speculators' DFlash as a built-in reference forward:
`forward = "specab_speculators:dflash_logits"` (docs/reference-forward.md). The drafter is
converted as speculators converts an external DFlash checkpoint (its `DFlashConverter`'s
config and weight remapping, in memory, nothing written) and loaded into speculators' own
`DFlashDraftModel`: its decoder layers, `fc`, `hidden_norm`, `norm`, rotary embedding, and
the embedding and LM head it takes from the verifier. A tensor the model has and the
checkpoint lacks (or the reverse, or another shape) is refused in one line.

speculators' `forward` is training-shaped (random anchors over a packed sequence, a loss), so
specab drives the model's modules with a proposal of its own, one verify step as the
training mask sees one anchor block: the block [bonus, mask x K] at positions T .. T+K, each
of its slots attending to every context feature before T and to the whole block
(non-causal), the context's features `hidden_norm(fc(aux))`, the draft layers, `norm`, the
LM head at the K mask slots.

Aux layers: speculators numbers them as HF's `hidden_states` (0 the embeddings, i the
output of decoder layer i - 1) and takes them raw, as vLLM hands them over; a z-lab
checkpoint's `target_layer_ids` are decoder layers, so each is one more. Every one of the
checkpoint's layers is passed to the converter: its default drops the verifier's last layer
(speculators trains with the last one split off as the target), which for a drafter whose
`fc` spans it (the demo's: layers 1 and 3 of 4) would leave `fc` the wrong width.

Needs `speculators` in the reference interpreter (`make reference-venv`)."""

from functools import cache


def _quiet():
    """speculators logs through loguru at INFO; the runner's stderr is the boot's log."""
    try:
        from loguru import logger

        logger.remove()
    except ImportError:
        pass


@cache
def _model(drafter, verifier):
    """The drafter in speculators' class, with the verifier's embedding and LM head."""
    model = _converted(drafter, verifier)
    model.load_verifier_weights()
    # The target's decoder layers it reads, numbered as vLLM and z-lab number them (the
    # trace's name map compares them with what vLLM resolved).
    model.specab_aux_layers = [int(i) - 1 for i in model.target_layer_ids]
    model.specab_rotary_dim = 2 * int(model.rotary_emb.inv_freq.numel())  # dims it rotates
    return model.float().eval()


def _converted(drafter, verifier):
    """speculators' DFlashDraftModel holding the checkpoint's own tensors, each checked."""
    import json
    from pathlib import Path

    from safetensors.torch import load_file
    from speculators.convert.dflash import DFlashConverter
    from speculators.models.dflash import DFlashDraftModel

    _quiet()
    source = json.loads((Path(drafter) / "config.json").read_text(encoding="utf-8"))
    ids = (source.get("dflash_config") or {}).get("target_layer_ids")
    if ids is None:
        raise ValueError(f"{drafter}/config.json: no dflash_config.target_layer_ids")
    converter = DFlashConverter()
    config = converter._build_config(source, verifier, [int(i) + 1 for i in ids])
    config.transformer_layer_config._attn_implementation = "eager"  # no mask: the whole block
    model = DFlashDraftModel(config=config)
    weights = {}
    for path in sorted(Path(drafter).glob("*.safetensors")):
        weights.update(load_file(str(path)))
    body = converter._remap_weights(
        {k: v for k, v in weights.items() if k not in ("t2d", "d2t")}, config, model
    )
    want = model.state_dict()
    filled = {"embed_tokens.weight", "lm_head.weight", "verifier_lm_head.weight",
              "verifier_norm.weight", "t2d", "d2t"}  # fmt: skip
    for name, tensor in body.items():
        if name not in want:
            raise ValueError(f"{drafter}: tensor {name} has no place in speculators' "
                             "DFlashDraftModel")  # fmt: skip
        if tuple(tensor.shape) != tuple(want[name].shape):
            shapes = f"{tuple(tensor.shape)}, speculators' {tuple(want[name].shape)}"
            raise ValueError(f"{drafter}: tensor {name} has shape {shapes}")
    if missing := sorted(set(want) - set(body) - filled):
        raise ValueError(f"{drafter}: no tensor {missing[0]}, which speculators' "
                         "DFlashDraftModel has")  # fmt: skip
    model.load_state_dict(body, strict=False)
    return model


def dflash_logits(step):
    """The K drafted slots' logits [K, vocab] (the reference protocol)."""
    import torch

    layers, k = step["layer_outputs"], int(step["k"])
    model = _model(step["drafter"], str(step["target"].name_or_path))
    t = int(layers.shape[1])
    aux = torch.cat([layers[i - 1] for i in model.target_layer_ids], dim=-1)[None].float()
    context = model.hidden_norm(model.fc(aux))
    block = torch.tensor([[int(step["tokens"][-1])] + [int(model.mask_token_id)] * k])
    hidden = model.embed_tokens(block)
    positions = torch.arange(t + k + 1)[None]
    rope = model.rotary_emb(hidden, positions)
    for layer in model.layers:
        hidden = layer(hidden_states=hidden, target_hidden=context, attention_mask=None,
                       position_ids=positions, position_embeddings=rope)  # fmt: skip
    return model.lm_head(model.norm(hidden))[0, 1:]


def _check(drafter):
    """The protocol's check: the checkpoint converts and loads into speculators' class (the
    drafter's own config sizes the conversion in the verifier's place: only its hidden size
    is read; the embedding and LM head wait for the run)."""
    _converted(drafter, drafter)


dflash_logits.check = _check
# The trace's hook (docs/trace.md): the very instance `dflash_logits` runs for this target.
dflash_logits.module = lambda drafter, target: _model(drafter, str(target.name_or_path))
