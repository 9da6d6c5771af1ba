"""Layer-index overflow (seed report 000): draft layers whose runtime ids run past the end of
a per-layer list in the target's config.

Some drafters run their layers with runtime ids `num_hidden_layers + k` (the target's layer
count plus the draft layer's index) and resolve per-layer settings by that id, in the fork
of seed report 000 even against the TARGET's config: DSpark on DeepSeek-V4 looks its draft
layers up in the target's `compress_ratios`, and ids past its end fall back to yarn-scaled
rope although DSpark drafts are trained with plain rope.
"""

from __future__ import annotations

from typing import Any

from bench.experiment.lint.findings import Finding, id_ranges, overlay, text_config, toml_value

# The one list of drafters whose layers run with runtime ids offset by the target's
# num_hidden_layers, each with the draft-config keys that give its number of draft layers
# (first found wins; a list counts by its length). vLLM's MTP heads (deepseek_mtp,
# qwen3_next_mtp, glm4_moe_mtp, ... and the generic "mtp") all do it: `*_mtp` below.
OFFSET_LAYER_METHODS: dict[str, tuple[str, ...]] = {
    # upstream vLLM: n_mtp_layers; the DeepSeek-V4 DSpark fork: len(dspark_target_layer_ids)
    "dspark": ("n_mtp_layers", "dspark_target_layer_ids", "num_nextn_predict_layers"),
    "mtp": ("num_nextn_predict_layers", "mtp_num_hidden_layers", "n_mtp_layers"),
    "*_mtp": ("num_nextn_predict_layers", "mtp_num_hidden_layers", "n_mtp_layers"),
}

# Draft-layer counts vLLM uses when a checkpoint declares none of the keys above, with where
# the default lives. Lint checks against the default (and says so) rather than skipping.
DEFAULT_DRAFT_LAYERS: dict[str, tuple[int, str]] = {
    "dspark": (
        3,
        "vLLM 0.32's default: no n_mtp_layers declared, and its DeepSeek-V4 DSpark model "
        "runs `getattr(config, 'n_mtp_layers', None) or 3` layers "
        "(vllm/models/deepseek_v4/*/dspark.py)",
    ),
}

# Lists a runtime is known to index by a draft layer's id. Any other per-layer list counts
# only once it reaches past num_hidden_layers (the checkpoint itself then says draft layers
# read it): a list of exactly num_hidden_layers entries, e.g. Qwen3-Next's layer_types, is
# not read for its MTP layer (vLLM builds that one as full attention), and flagging it
# would be a false alarm on every such checkpoint.
DRAFT_INDEXED_LISTS = ("compress_ratios",)
# What falling past the end means, where it is known.
CONSEQUENCE = {
    "compress_ratios": "DeepSeek-V4's resolver then gives them yarn-scaled rope, not the "
    "plain rope DSpark drafts are trained with (seed report 000)",
}
FIX_PATCH = {
    "compress_ratios": "the code patch arms/dspark-v4/dspark_rope_fix.py (DSpark on DeepSeek-V4)"
}
# Lists that name layers or tokens rather than holding one entry per layer.
_NOT_PER_LAYER = ("architectures", "eos_token_id", "bos_token_id", "pad_token_id")


def offset_layer_keys(method: str | None) -> tuple[str, ...] | None:
    """The draft-layer-count keys when `method` runs draft layers at offset ids, else None."""
    if not method:
        return None
    if method in OFFSET_LAYER_METHODS:
        return OFFSET_LAYER_METHODS[method]
    return OFFSET_LAYER_METHODS["*_mtp"] if method.endswith("_mtp") else None


def draft_layer_count(cfg: dict[str, Any], keys: tuple[str, ...]) -> tuple[int, str] | None:
    c = text_config(cfg)
    for key in keys:
        v = c.get(key)
        if isinstance(v, list) and v:
            return len(v), f"len({key})"
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v, key
    return None


def _is_per_layer(key: str, value: Any, n: int) -> bool:
    if not isinstance(value, list) or len(value) < n or key in _NOT_PER_LAYER:
        return False
    if key.endswith("_ids") or any(isinstance(x, dict | list) for x in value):
        return False
    return key in DRAFT_INDEXED_LISTS or len(value) > n


def layer_overflow(
    arm: str, method: str | None, target: dict[str, Any], draft: dict[str, Any] | None
) -> list[Finding]:
    """One finding per per-layer list of the target shorter than num_hidden_layers + the
    draft's layers, naming the ids past its end and what the draft's own list says there."""
    keys = offset_layer_keys(method)
    t = text_config(target)
    n = t.get("num_hidden_layers")
    if keys is None or not isinstance(n, int) or n < 1:
        return []
    source = draft if draft is not None else target  # MTP heads live in the target checkpoint
    which = "draft" if draft is not None else "target"
    lists = [key for key, values in t.items() if _is_per_layer(key, values, n)]
    counted = draft_layer_count(source, keys)
    if counted is not None:
        d, basis = counted[0], f"{counted[1]} of the {which}"
    elif method in DEFAULT_DRAFT_LAYERS:
        d, basis = DEFAULT_DRAFT_LAYERS[method][0], DEFAULT_DRAFT_LAYERS[method][1]
    else:
        return _cannot_count(arm, method, keys, which, lists)
    runtime = list(range(n, n + d))
    out: list[Finding] = []
    for key in lists:
        values = t[key]
        if len(values) >= n + d:
            continue
        past = [i for i in runtime if i >= len(values)]
        own = text_config(draft).get(key) if draft is not None else None
        covered = isinstance(own, list) and len(own) >= n + d
        problem = (
            f"draft layers run as ids {id_ranges(runtime)} (target num_hidden_layers {n} + "
            f"{d} draft layers, {basis}) but the target's {key} has {len(values)} entries: "
            f"ids {id_ranges(past)} fall past its end"
        )
        if key in CONSEQUENCE:
            problem += f"; {CONSEQUENCE[key]}"
        if covered:
            assert isinstance(own, list)
            said = [own[i] for i in past]
            problem += f"; the draft's own {key} ({len(own)} entries) gives them {toml_value(said)}"
            fix = (
                f"{overlay('target', target, {key: [*values, *own[len(values) : n + d]]})} "
                f"(the target's {len(values)} entries + the draft's for ids {id_ranges(past)})"
            )
        else:
            fix = (
                f"a target_config overlay giving {key} {n + d} entries (a merge patch "
                f"replaces the whole list: the target's {len(values)} + the values the draft "
                f"was trained with for ids {id_ranges(past)})"
            )
        alt = FIX_PATCH.get(
            key, "a code patch that resolves draft layers against the draft's config"
        )
        out.append(Finding(arm, key, problem, f"{fix}, or {alt}", "layer_overflow"))
    return out


def _cannot_count(
    arm: str, method: str | None, keys: tuple[str, ...], which: str, lists: list[str]
) -> list[Finding]:
    """A note, not silence, when the draft's layer count is neither declared nor defaulted
    and the target has per-layer lists its ids could run past."""
    if not lists:
        return []
    return [
        Finding(
            arm,
            keys[0],
            f"cannot check the draft layers' ids against the target's {', '.join(lists)}: "
            f"none of {', '.join(keys)} is declared in the {which} config and no default is "
            f"known for method {method!r}",
            f"declare the number of draft layers, e.g. a {which}_config overlay "
            f"{{ {keys[0]} = N }}",
            "layer_overflow",
            severity="note",
        )
    ]
