"""Boot-level statistics (STATISTICS.md): pure functions of the frames `bench.store` loads;
no I/O, no printing. `analyze` returns the typed `specab analyze --json` object (`Analysis`,
`.to_json()`); `decide` the sequential decision at a planned look; `split_arm` the A/A split
check; `plan_from_results` the power plan; `prior_from_results` a between-boot SD with its df
from an A/A run. `bench.stats.simulate` generates results with a known truth for tests."""

from bench.stats._analyze import COMPARISON_KEYS, analyze
from bench.stats._core import VERDICTS
from bench.stats._decide import decide
from bench.stats._gate import GateCheck, boots_for_gate, gate_check
from bench.stats._models import (
    Analysis,
    ArmResult,
    BootMetrics,
    Comparison,
    Decision,
    MetricEstimate,
    PositionEstimate,
)
from bench.stats._parts import pooled_ratios
from bench.stats._plan import plan_from_results, prior_from_results
from bench.stats._select_models import Selection
from bench.stats._selection_out import selection_dropped
from bench.stats._selftest import SelftestResult, check_selftest, count_checks
from bench.stats._settings import Prior
from bench.stats._split import split_arm
from bench.stats._text import level_name

__all__ = [
    "COMPARISON_KEYS",
    "VERDICTS",
    "Analysis",
    "ArmResult",
    "BootMetrics",
    "Comparison",
    "Decision",
    "GateCheck",
    "MetricEstimate",
    "PositionEstimate",
    "Prior",
    "Selection",
    "SelftestResult",
    "analyze",
    "boots_for_gate",
    "check_selftest",
    "count_checks",
    "decide",
    "gate_check",
    "level_name",
    "plan_from_results",
    "pooled_ratios",
    "prior_from_results",
    "selection_dropped",
    "split_arm",
]  # fmt: skip
