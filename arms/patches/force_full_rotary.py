"""Example patch: force full-head-dim rotary embeddings in Qwen3 attention (vLLM >= 0.11).

The DSpark/DFlash Qwen3 draft bug (seed report 002): a draft whose config.json declares
`partial_rotary_factor: 0.25` was trained with full-dim rope, but vLLM honours the field and
rotates only a quarter of each head. This patch changes the computation instead of the
config: every `get_rope` call made by `vllm.model_executor.models.qwen3` gets
`partial_rotary_factor` 1.0. Targets that already rotate the full head are unaffected, so
in a target+draft pair only the draft changes. (The config-side fix is a `draft_config`
overlay; see arms/patches/README.md.)

Wrapping `get_rope` changes nothing by itself, so it is reported with `changed=False`; only
a rope actually built full-dim instead of partial reports a change. On a draft that already
rotates the full head the patch is therefore a no-op, and the boot fails naming it unless
the arm sets `allow_noop_patches = true` (tests/integration/test_arms_real.py).
"""

from specab_patch import report_applied, when_imported

PATCH_NAME = "force_full_rotary"
MODULE = "vllm.model_executor.models.qwen3"


def apply(module):
    original = getattr(module, "get_rope", None)
    if not callable(original):
        raise AttributeError(f"{MODULE}.get_rope not found: this vLLM builds rope elsewhere")

    def get_rope(head_size, *args, **kwargs):
        params = kwargs.get("rope_parameters")
        if isinstance(params, dict) and params.get("partial_rotary_factor", 1.0) != 1.0:
            factor = params["partial_rotary_factor"]
            kwargs["rope_parameters"] = {
                k: v for k, v in params.items() if k not in ("partial_rotary_factor", "rope_dim")
            }
            report_applied(PATCH_NAME, f"rope of head {head_size}: factor {factor} -> 1.0")
        return original(head_size, *args, **kwargs)

    module.get_rope = get_rope
    report_applied(PATCH_NAME, f"wrapped {MODULE}.get_rope", changed=False)


when_imported(MODULE, apply)
