"""Screening candidates without an order (which of these patches lowered acceptance?): each
candidate against the baseline, one-sided, cleared or lowered at a look and then booted no
more (`design`: the rule on boot values, vectorized for calibration; `spread`: one boot
spread pooled over every arm, with its guards), and a results directory's screening
(`screening_replay`: `Analysis.screening`, what `run-ab` stops booting)."""

from bench.stats.screen.design import (
    ScreenDesign,
    boots_one_harmful,
    boots_spent,
    decide_candidates,
    screen_boots,
)
from bench.stats.screen.screening_replay import (
    same_code_candidates,
    screen_dropped,
    screening,
)

__all__ = [
    "ScreenDesign", "boots_one_harmful", "boots_spent", "decide_candidates",
    "same_code_candidates", "screen_boots", "screen_dropped", "screening",
]  # fmt: skip
