"""Code fix for the demo's draft: build Qwen3 attention rope with full-head rotary.

The draft was trained by a modeling that ignores `partial_rotary_factor` (full-head RoPE) but
its config.json declares 0.25; vLLM honors the field and rotates only 16 of 64 dims. This
patch makes vLLM's Qwen3 attention ignore a declared factor below 1.0, as training did (the
engine-side analogue of setting the field to 1.0 in the checkpoint). The target declares no
factor, so only the draft changes.
"""

from specab_patch import report_applied, when_imported

PATCH = "qwen3_full_rotary"


def _patch(mod):
    original = mod.Qwen3Attention.__init__

    def __init__(self, *args, **kwargs):
        rope = kwargs.get("rope_parameters")
        if isinstance(rope, dict) and rope.get("partial_rotary_factor", 1.0) < 1.0:
            kwargs["rope_parameters"] = {**rope, "partial_rotary_factor": 1.0}
            report_applied(PATCH, f"ignored partial_rotary_factor={rope['partial_rotary_factor']}")
        original(self, *args, **kwargs)

    mod.Qwen3Attention.__init__ = __init__


when_imported("vllm.model_executor.models.qwen3", _patch)
