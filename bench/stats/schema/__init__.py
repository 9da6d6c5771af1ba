"""The statistics' typed answers: the `specab analyze --json` object (docs/results.md, schema
version 1) and the other commands' results, as immutable pydantic models. Schema modules
import no computation: the packages that compute these import them, never the reverse.

- `strict_json`: finite-or-null numbers, numpy-safe ints, the closed frozen base model.
- `arm_result`: one arm: estimates, positions, per-boot values, accepted-length parts.
- `comparison`: arm vs baseline (verdicts), speedups, position differences, `--by` groups.
- `variance_components`, `sequential_decision`, `conditions` (drift within boots, hosts),
  `selection_result` (sweeps), `analysis_result` (the whole object).
- `check_results` (selftest, split-arm A/A), `plan_result` (`specab plan`),
  `gate_check` (`specab gate`), `which_change` (a history's culprit, a screening of
  candidates without an order).
"""

from bench.stats.schema.analysis_result import Analysis, AnalysisSettings, PriorInfo
from bench.stats.schema.arm_result import (
    AcceptedShare,
    ArmResult,
    BootMetrics,
    BootModes,
    DraftLengthShare,
    LowDraftingBoot,
    MetricEstimate,
    PeerLengths,
    PositionEstimate,
)
from bench.stats.schema.check_results import (
    ComparisonCheck,
    CountCheck,
    Direction,
    SelftestResult,
    SplitCheck,
    TruthCheck,
)
from bench.stats.schema.comparison import (
    AcrossGroups,
    Breakdown,
    Comparison,
    Group,
    GroupArm,
    PositionComparison,
    Speedup,
    Verdict,
)
from bench.stats.schema.conditions import (
    DriftEstimate,
    HostSummary,
    OutputParity,
    SharedMachine,
)
from bench.stats.schema.gate_check import GateCheck, GateResult, GateVerdict
from bench.stats.schema.plan_result import Plan, ScreenPlan
from bench.stats.schema.selection_result import Selection, SelectionConfig, SelectionGroup
from bench.stats.schema.sequential_decision import Decision, SequentialRow
from bench.stats.schema.variance_components import (
    ArmComponents,
    PooledComponents,
    VarianceComponents,
)
from bench.stats.schema.which_change import (
    BisectConfirmation,
    Bisection,
    BisectPoint,
    ScreenCandidate,
    Screening,
)

__all__ = [
    "AcceptedShare",
    "AcrossGroups",
    "Analysis",
    "AnalysisSettings",
    "ArmComponents",
    "ArmResult",
    "BisectConfirmation",
    "BisectPoint",
    "Bisection",
    "BootMetrics",
    "BootModes",
    "Breakdown",
    "Comparison",
    "ComparisonCheck",
    "CountCheck",
    "Decision",
    "Direction",
    "DraftLengthShare",
    "DriftEstimate",
    "GateCheck",
    "GateResult",
    "GateVerdict",
    "Group",
    "GroupArm",
    "HostSummary",
    "LowDraftingBoot",
    "MetricEstimate",
    "OutputParity",
    "PeerLengths",
    "Plan",
    "PooledComponents",
    "PositionComparison",
    "PositionEstimate",
    "PriorInfo",
    "ScreenCandidate",
    "ScreenPlan",
    "Screening",
    "Selection",
    "SelectionConfig",
    "SelectionGroup",
    "SelftestResult",
    "SequentialRow",
    "SharedMachine",
    "Speedup",
    "SplitCheck",
    "TruthCheck",
    "VarianceComponents",
    "Verdict",
]  # fmt: skip
