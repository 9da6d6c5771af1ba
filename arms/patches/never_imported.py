"""Example of a patch that cannot apply: it hooks a module vLLM never imports for a Qwen3
pair. A boot with this patch must fail naming the patch (the anti-vacuity check of
`specab` patches: a "fix" arm that silently equals its baseline is the worst outcome)."""

from specab_patch import report_applied, when_imported

when_imported(
    "vllm.model_executor.models.bloom",
    lambda module: report_applied("never_imported", "unexpected: bloom was imported"),
)
