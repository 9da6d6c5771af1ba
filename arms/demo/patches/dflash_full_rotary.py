"""Code fix for the demo's DFlash drafter: build DFlash attention rope with full-head rotary.

The drafter was trained full-head (bench/demo/dflash.py rotates all 64 dims) but its
config.json declares `partial_rotary_factor: 0.25` (seed report 002's checkpoint). vLLM's
DFlash attention (`qwen3_dflash.DFlashQwen3Attention`) builds its rope from the draft
config's `rope_parameters`, so it rotates 16 of 64 dims, for the query block and for the
context K it writes into the cache alike (both read this layer's rotary_emb). This patch
makes that attention ignore a declared factor below 1.0, as training did. The target's
Qwen3 attention is a different class: untouched.
"""

from specab_patch import report_applied, when_imported

PATCH = "dflash_full_rotary"


def _patch(mod):
    original = mod.DFlashQwen3Attention.__init__

    def __init__(self, *args, **kwargs):
        rope = kwargs.get("rope_parameters")
        if isinstance(rope, dict) and rope.get("partial_rotary_factor", 1.0) < 1.0:
            kwargs["rope_parameters"] = {**rope, "partial_rotary_factor": 1.0}
            report_applied(PATCH, f"ignored partial_rotary_factor={rope['partial_rotary_factor']}")
        original(self, *args, **kwargs)

    mod.DFlashQwen3Attention.__init__ = __init__


when_imported("vllm.model_executor.models.qwen3_dflash", _patch)
