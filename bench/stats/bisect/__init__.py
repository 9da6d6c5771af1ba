"""Which change did it: the first point of an ordered history (commits, a patch stack, a list
of builds) where a metric changes, with a stated error rate. The posterior over the first
changed point from every boot so far (`changepoint`), and the search built on it
(`search`, its settings in `search_settings`: the ends first (`ends`), then the points that
split the posterior, until fresh boots confirm a proposed culprit (`confirm`) or a range is
all the boots can say), and a results directory read as a history (`history`: the driver's
next step, the `bisection` of `analyze --json`)."""

from bench.stats.bisect.changepoint import between_levels, credible_range, culprit_posterior
from bench.stats.bisect.confirm import attempt_level, pair_test
from bench.stats.bisect.history import bisection, history_step
from bench.stats.bisect.search import Why, next_step, run_search
from bench.stats.bisect.search_settings import BisectSettings

__all__ = [
    "BisectSettings", "Why", "attempt_level", "between_levels", "bisection", "credible_range",
    "culprit_posterior", "history_step", "next_step", "pair_test", "run_search",
]  # fmt: skip
