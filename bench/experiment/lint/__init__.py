"""`specab lint`: known draft/target mismatch classes found in config.json files before any
boot (configs only, never weights): per arm, the effective configs after its overlays
(`arm_configs`, hub ids read from the local cache by `hub_cache`), the checks on two configs
(`mismatches`: rotary geometry, block size, speculation length, vocabulary), aux hidden-state
layers (`aux_layers`), layer-index overflow (`layer_overflow`), and how findings are written
(`findings`)."""

from bench.experiment.lint.arm_configs import LintReport, lint_arm, lint_file
from bench.experiment.lint.aux_layers import block_rejection_note
from bench.experiment.lint.findings import Finding, id_ranges, toml_value
from bench.experiment.lint.hub_cache import cached_config, hub_cache_dir, is_hub_id
from bench.experiment.lint.layer_overflow import offset_layer_keys
from bench.experiment.lint.mismatches import PairContext, check_pair, rope_of

__all__ = [
    "Finding",
    "LintReport",
    "PairContext",
    "block_rejection_note",
    "cached_config",
    "check_pair",
    "hub_cache_dir",
    "id_ranges",
    "is_hub_id",
    "lint_arm",
    "lint_file",
    "offset_layer_keys",
    "rope_of",
    "toml_value",
]
