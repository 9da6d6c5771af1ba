"""The answers of the checks on the method itself: `specab selftest` against the known truth
of synthetic acceptance (what each truth, count and comparison check found), and the
split-arm A/A check (`analyze --split-arm`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bench.stats.schema.strict_json import Frozen, Int, Num

Direction = Literal["same", "higher", "lower"]


class TruthCheck(Frozen):
    arm: str = Field(description="Arm name.")
    quantity: Literal["acceptance", "mean_accepted_length"] = Field(
        description="Cumulative acceptance at a position, or the mean accepted length."
    )
    position: int | None = Field(None, description="Draft position k (acceptance only).")
    truth: float = Field(description="What the synthetic rates make it: r_k, or 1 + sum r_k.")
    estimate: Num = Field(description="specab's estimate from the build's counts.")
    ci_low: Num = Field(description="Lower end of the interval checked (coverage level).")
    ci_high: Num = Field(description="Upper end.")
    covered: bool = Field(description="The truth lies inside specab's (1 - alpha) interval.")


class CountCheck(Frozen):
    arm: str = Field(description="Arm name.")
    position: int = Field(description="Draft position k.")
    steps: int = Field(description="Verify steps that drafted position k (all boots).")
    accepted: int = Field(description="Of those, steps that accepted position k.")
    truth: float = Field(description="The configured unconditional rate r_k.")
    observed: float = Field(description="accepted / steps.")
    p_value: float = Field(description="Exact two-sided binomial p against r_k.")
    ok: bool = Field(description="p_value >= alpha / (arms x positions).")


class ComparisonCheck(Frozen):
    arm: str = Field(description="The arm compared.")
    baseline: str = Field(description="The baseline arm.")
    metric: str = Field(description="acceptance_pos0 or mean_accepted_length.")
    expected: Direction = Field(description="What the configured rates imply.")
    true_difference: float = Field(description="arm - baseline, from the configured rates.")
    difference: Num = Field(description="The estimated difference.")
    verdict: str = Field(description="analyze's verdict at the run's alpha.")
    ok: bool = Field(description="The verdict matches the expected direction.")


class SelftestResult(Frozen):
    passed: bool = Field(description="Every count test and every comparison as expected.")
    alpha: float = Field(description="The run's two-sided level.")
    coverage_level: float = Field(description="Level of the reported intervals: 1 - alpha.")
    false_fail_bound: float = Field(description="P(a truthful build fails) <= this (2 alpha).")
    coverage: float = Field(description="Share of truths inside their interval (reported).")
    truths: list[TruthCheck] = Field(description="Per arm, position and mean length.")
    counts: list[CountCheck] = Field(description="Exact binomial test per arm and position.")
    comparisons: list[ComparisonCheck] = Field(description="Each arm vs the baseline.")
    failures: list[str] = Field(description="One sentence per failed check.")


class SplitCheck(Frozen):
    """`specab analyze --split-arm ARM --json`: the primary pipeline on splits of one arm's
    boots into two pseudo-arms (an A/A check)."""

    arm: str = Field(description="The arm split.")
    boots: Int = Field(description="Its ok boots.")
    splits: Int = Field(description="Splits analyzed.")
    exhaustive: bool = Field(description="Every split enumerated (else a random sample).")
    alpha: float = Field(description="Two-sided level of the families.")
    claimed_rate: dict[str, float] = Field(
        description="Metric -> share of splits where a difference was claimed."
    )
    any_claimed_rate: float = Field(
        description="Share of splits where any primary metric claimed one (Holm across them)."
    )
    note: str = Field(description="How to read the rates.")
