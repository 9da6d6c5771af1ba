"""Every arm against the baseline: which comparisons form which Holm family (`families`),
the primary family and the sequential decision at a look (`primary`), the typed comparisons
with power, resampling extras and the one-sentence why (`comparisons`, `resampling`, `why`),
comparisons within hosts when hosts differ (`hosts`), speed within co-run groups of boots
measured at once (`duets`), speedups over no-speculation arms
(`speedups`), per-position differences (`position_differences`) and the `--by` breakdown
(Holm within and across its groups)."""

from bench.stats.compare.breakdown import breakdown, check_by, edges, windowed
from bench.stats.compare.comparisons import comparisons
from bench.stats.compare.duets import (
    MIN_DF,
    blocked_contrasts,
    duet_pairs,
    group_share,
    pairwise_contrasts,
    slot_note,
)
from bench.stats.compare.families import arm_metrics, comparison_keys
from bench.stats.compare.hosts import (
    adjusted_difference,
    balanced,
    host_effect_p,
    host_summary,
    pseudo_pair,
)
from bench.stats.compare.parity import output_parity, parity_at
from bench.stats.compare.position_differences import position_comparisons
from bench.stats.compare.primary import decide, prepare, primary
from bench.stats.compare.speedups import order_notes, speed_notes, speedups
from bench.stats.compare.why import level_name

__all__ = [
    "MIN_DF", "adjusted_difference", "arm_metrics", "balanced", "blocked_contrasts",
    "breakdown", "check_by", "comparison_keys", "comparisons", "decide", "duet_pairs", "edges",
    "group_share",
    "host_effect_p", "host_summary", "level_name", "order_notes",
    "output_parity", "pairwise_contrasts", "parity_at",
    "position_comparisons", "prepare", "primary", "pseudo_pair",
    "slot_note", "speed_notes", "speedups", "windowed",
]  # fmt: skip
