"""The numerical methods, vectorized: arrays whose last axis is boots (or the comparison
family) with any leading batch axes, so calibration runs thousands of simulated experiments
in one call. They know nothing of arms, metrics or frames.

- `ratio_estimates`: ratio of sums with jackknife (leverage-robust) SEs, Kish effective boots.
- `intervals`: Welch SE and df, t quantiles and intervals, p-values.
- `multiplicity`: Holm, the Holm-compatible level, simultaneous critical values.
- `verdicts`: the six verdicts from an interval, its TOST interval and the margin.
- `power`: detectable effects and boots needed.
- `family`: one Holm family of comparisons (what analyze, decide, split-arm and the
  calibration suites all call, so they cannot disagree).
- `resample`: boot-label permutation, studentized cluster bootstrap, pigeonhole bootstrap.
- `boundaries`: group-sequential O'Brien-Fleming boundaries and look status.
"""

from bench.stats.methods.boundaries import (
    STATUSES,
    design_stops,
    look_index,
    look_status,
    obf_boundaries,
    obf_spent,
)
from bench.stats.methods.family import Est, Family, Margin, estimate, family, log_estimate
from bench.stats.methods.intervals import interval, t_quantile, welch
from bench.stats.methods.multiplicity import holm, simultaneous_critical
from bench.stats.methods.power import boots_needed, detectable, mde
from bench.stats.methods.ratio_estimates import (
    DETERMINISTIC_RTOL,
    F,
    arm_stats,
    effective_boots,
    pseudo_values,
)
from bench.stats.methods.resample import (
    cluster_bootstrap,
    permutation_test,
    pigeonhole_interval,
    pigeonhole_ratios,
    pigeonhole_weights,
)
from bench.stats.methods.verdicts import (
    CLAIMED,
    CLAIMS,
    EQUIVALENT,
    INCONCLUSIVE,
    VERDICTS,
    verdict_codes,
)

__all__ = [
    "CLAIMED", "CLAIMS", "DETERMINISTIC_RTOL", "EQUIVALENT", "INCONCLUSIVE", "STATUSES",
    "VERDICTS", "Est", "F", "Family", "Margin", "arm_stats", "boots_needed",
    "cluster_bootstrap", "design_stops", "detectable", "effective_boots", "estimate", "family",
    "holm", "interval", "log_estimate", "look_index", "look_status", "mde", "obf_boundaries",
    "obf_spent", "permutation_test", "pigeonhole_interval", "pigeonhole_ratios",
    "pigeonhole_weights", "pseudo_values", "simultaneous_critical", "t_quantile",
    "verdict_codes", "welch",
]  # fmt: skip
