"""Boot-level statistics (STATISTICS.md): pure functions of the frames `bench.store` loads;
no I/O, no printing. `analyze` is the `specab analyze --json` object; `decide` the
sequential decision at a planned look; `split_arm` the A/A split check; `plan_from_results`
the power plan. `bench.stats.simulate` generates results with a known truth for tests."""

from bench.stats._analyze import COMPARISON_KEYS, analyze, decide
from bench.stats._core import VERDICTS
from bench.stats._data import DEFAULT_MARGINS, METRICS
from bench.stats._per_boot import boot_metrics
from bench.stats._plan import plan_from_results
from bench.stats._position import conditional_positions
from bench.stats._sequential import Decision
from bench.stats._split import split_arm

__all__ = [
    "COMPARISON_KEYS", "DEFAULT_MARGINS", "METRICS", "VERDICTS", "Decision", "analyze",
    "boot_metrics", "conditional_positions", "decide", "plan_from_results", "split_arm",
]  # fmt: skip
