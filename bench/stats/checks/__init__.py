"""Checks of the method itself on a run: the selftest against the known truth of synthetic
acceptance (`known_truth`), and the split-arm A/A check (`split_arm`: how often the primary
pipeline claims a difference between two halves of one arm's boots)."""

from bench.stats.checks.known_truth import check_selftest, count_checks
from bench.stats.checks.split_arm import split_arm

__all__ = ["check_selftest", "count_checks", "split_arm"]
