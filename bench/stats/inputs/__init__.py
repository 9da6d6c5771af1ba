"""From loaded frames to what every statistic works on: per-arm count arrays on the prompts
every boot of every arm has (`dataset`, with the speed, histogram and category cells of
`probe_attributes`; co-run groups of boots measured at once on one host: `co_runs`), and the
analysis settings resolved from options over the manifest (`settings`:
baseline, alpha, margins on each metric's scale, looks, primary family, a prior SD), and
whether a prior's source run fits the run it is lent to (`prior_design`); probe rows cut into
windows along the output from their ordered verify steps (`output_windows`)."""

from bench.stats.inputs.co_runs import corun_groups
from bench.stats.inputs.dataset import ArmData, Dataset, arm_data, boot_values, failed_counts
from bench.stats.inputs.output_windows import STEP_COLUMNS, output_windows
from bench.stats.inputs.prior_design import check_prior_design
from bench.stats.inputs.probe_attributes import PROBE_COLUMNS
from bench.stats.inputs.settings import (
    AnalysisOptions,
    Prior,
    VerdictSettings,
    check_margin,
    effect_scale,
    margin_for,
    resolve_settings,
)

__all__ = [
    "PROBE_COLUMNS", "STEP_COLUMNS", "AnalysisOptions", "ArmData", "Dataset", "Prior",
    "VerdictSettings", "arm_data", "boot_values", "check_margin", "check_prior_design",
    "corun_groups", "effect_scale", "failed_counts", "margin_for", "output_windows",
    "resolve_settings",
]  # fmt: skip
