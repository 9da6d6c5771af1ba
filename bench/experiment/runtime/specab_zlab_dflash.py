"""z-lab's DFlash as a built-in reference forward: `forward = "specab_zlab_dflash:dflash_logits"`
(docs/reference-forward.md). The drafter is loaded into z-lab's own model class
(`dflash.model.DFlashDraftModel`, PyPI `dflash`) and run as z-lab's `dflash_generate` runs it
for one verify step: the block [bonus, mask x K] at positions T .. T+K over the context's
features at positions 0 .. T-1, the target's raw input embeddings (times the config's
`input_embedding_scale`), the target's LM head through the model's `compute_logits`. z-lab
reads each aux layer from HF's `output_hidden_states` (its `extract_context_feature`, offset
one), which holds the *final-normed* output for the target's last layer; this forward hands
it the same, so a drafter trained by z-lab's code is driven as it was trained
(`dflash_logits_raw`: the raw last layer, as vLLM hands it over). specab's
runner drives the steps (its own loop: vLLM's acceptance rule and counts); z-lab's loop
itself is not run. Needs the reference interpreter to have `dflash` (with its torch and
transformers): `make reference-venv`."""

from functools import cache


@cache
def _model(drafter, target_layers):
    import torch
    from dflash.model import DFlashDraftModel
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(drafter)
    if getattr(config, "num_target_layers", None) is None:  # z-lab's default needs it
        config.num_target_layers = target_layers
    model, info = DFlashDraftModel.from_pretrained(
        drafter, config=config, dtype=torch.float32, output_loading_info=True
    )
    # from_pretrained initializes a missing tensor at random and only warns: a reference
    # that loaded part of the checkpoint would measure a drafter nobody trained
    problems = (
        ("missing_keys", "no tensor {}, which z-lab's DFlashDraftModel has"),
        ("unexpected_keys", "tensor {} has no place in z-lab's DFlashDraftModel"),
        ("mismatched_keys", "tensor {} has another shape than z-lab's"),
    )
    for kind, said in problems:
        names = sorted(str(x[0] if isinstance(x, tuple) else x) for x in info.get(kind) or ())
        if names:
            raise ValueError(f"{drafter}: " + said.format(names[0]))
    return model.eval()


def _features(layers, ids, target, normed_last):
    """z-lab's context features from specab's raw layer outputs [L, T, H]: the last layer's
    through the target's final norm, as HF's hidden_states hold it (`normed_last`)."""
    import torch

    last = layers.shape[0] - 1
    rows = [target.model.norm(layers[i]) if normed_last and i == last else layers[i] for i in ids]
    return torch.cat(rows, dim=-1)[None].float()


def dflash_logits(step, *, normed_last=True):
    """The K drafted slots' logits [K, vocab] (the reference protocol)."""
    import torch
    from dflash.model import _draft_value, _output_head, _raw_input_embeddings

    target, k, layers = step["target"], int(step["k"]), step["layer_outputs"]
    model = _model(step["drafter"], int(layers.shape[0]))
    t = int(layers.shape[1])
    block = torch.tensor([[int(step["tokens"][-1])] + [int(model.mask_token_id)] * k])
    scale = float(_draft_value(model.config, "input_embedding_scale", 1.0))
    noise = _raw_input_embeddings(target, block, scale).float()
    hidden = model(
        position_ids=torch.arange(t + k + 1)[None],
        noise_embedding=noise,
        target_hidden=_features(layers, model.target_layer_ids, target, normed_last),
    )[:, 1:, :]
    head = _output_head(target)
    return model.compute_logits(hidden.to(head.weight.dtype), head)[0]


def dflash_logits_raw(step):
    """`dflash_logits` with the target's last layer raw (before its final norm), as vLLM
    hands it to the drafter: for a drafter trained on those features, or to tell whether the
    norm is where serving departs."""
    return dflash_logits(step, normed_last=False)


def _check(drafter):
    """The protocol's check: the checkpoint loads into z-lab's class (the target's depth is
    only a default of z-lab's; any will do for loading)."""
    _model(drafter, 1)


dflash_logits.check = _check
dflash_logits_raw.check = _check
