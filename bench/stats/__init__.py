"""Boot-level statistics (docs/statistics.md): pure functions of a loaded run
(`bench.records.Results`: manifest, boots and probes, as `bench.store` loads them or a test
builds them); no I/O, no printing. Every entry point takes the run whole.

The layers, each importing only the ones before it: `schema` (the typed answers), `methods`
(vectorized numerics), `inputs` (frames to per-arm arrays, settings), `describe` (each arm),
`compare` (each arm vs the baseline), `select` (a sweep's choice), `checks` (selftest,
split-arm), `gate` (non-inferiority against a stored reference), then `plan` and
`analysis` at the top.

`analyze` returns the typed `specab analyze --json` object (`Analysis`, `.to_json()`);
`decide` the sequential decision at a planned look; `split_arm` the A/A split check;
`plan_from_results` the power plan; `prior_from_results` a between-boot SD with its df from
an A/A run. Simulated results with a known truth for tests: `bench.simulate`."""

from bench.stats.analysis import analyze, per_boot, probe_columns
from bench.stats.checks import check_selftest, count_checks, split_arm
from bench.stats.compare import check_by, decide, level_name
from bench.stats.describe import (
    groups_clause,
    low_drafting_note,
    modes_note,
    pooled_ratios,
    two_modes,
)
from bench.stats.gate import boots_for_gate, gate_check
from bench.stats.inputs import PROBE_COLUMNS, AnalysisOptions, Prior
from bench.stats.methods import CLAIMED, VERDICTS
from bench.stats.plan import plan_from_results, prior_from_results
from bench.stats.schema import (
    Analysis,
    ArmResult,
    Bisection,
    BootMetrics,
    Breakdown,
    Comparison,
    Decision,
    GateCheck,
    GateResult,
    MetricEstimate,
    OutputParity,
    Plan,
    Selection,
    SelftestResult,
    SplitCheck,
)
from bench.stats.screen import screen_dropped
from bench.stats.select import selection_dropped

__all__ = [
    "CLAIMED",
    "PROBE_COLUMNS",
    "VERDICTS",
    "Analysis",
    "AnalysisOptions",
    "ArmResult",
    "Bisection",
    "BootMetrics",
    "Breakdown",
    "Comparison",
    "Decision",
    "GateCheck",
    "GateResult",
    "MetricEstimate",
    "OutputParity",
    "Plan",
    "Prior",
    "Selection",
    "SelftestResult",
    "SplitCheck",
    "analyze",
    "boots_for_gate",
    "check_by",
    "check_selftest",
    "count_checks",
    "decide",
    "gate_check",
    "groups_clause",
    "level_name",
    "low_drafting_note",
    "modes_note",
    "per_boot",
    "plan_from_results",
    "pooled_ratios",
    "prior_from_results",
    "probe_columns",
    "screen_dropped",
    "selection_dropped",
    "split_arm",
    "two_modes",
]  # fmt: skip
