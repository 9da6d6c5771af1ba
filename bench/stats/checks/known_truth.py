"""The selftest's checks against known truth (`specab selftest`): vLLM's synthetic acceptance
makes position k accept with a configured unconditional rate r_k, so every count a build
reports can be checked against the truth it was told.

Checks, on the product's own `analyze` of the run at its alpha:
- comparisons (Holm, as `analyze` reports them): an arm with the baseline's rates must not
  be called different (family-wise <= alpha), an arm with other rates must be found
  different in the right direction (power: the caller's design);
- counts, exact: under synthetic acceptance each verify step that drafted position k accepts
  it with probability r_k independently of every other step, so an arm's steps accepting
  >= k + 1 tokens are Binomial(steps that drafted k, r_k); two-sided exact binomial tests,
  Bonferroni over arms x positions at alpha. Unlike the intervals (t with B - 1 df, wide at
  B = 3) this uses the known truth directly, so it sees a miscount of a few percent.
So a truthful build fails the selftest with probability <= 2 alpha (stated in the output).
Reported, not a pass/fail check: how many truths specab's own (1 - alpha) intervals hold
(per-position simultaneous bands and the mean accepted length), i.e. their coverage. At
B = 3 a t interval's extreme tail is not reliable on integer counts (ties between boots
make a tiny SE, measured 3 % misses at a Bonferroni level meant for 1 %), while the exact
test needs no variance estimate."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
from scipy.stats import binomtest

from bench.records import Results
from bench.stats.schema import (
    Analysis,
    ComparisonCheck,
    CountCheck,
    Direction,
    SelftestResult,
    TruthCheck,
)

_CALLED = {
    "same": {"equivalent", "inconclusive"},
    "higher": {"improved", "small_improvement"},
    "lower": {"regressed", "small_regression"},
}


RATE_TOLERANCE = 1e-9  # rates equal to this are "the same configuration"


def direction(true_difference: float) -> Direction:
    """What the configured rates imply for one metric: the same, higher or lower."""
    if abs(true_difference) <= RATE_TOLERANCE:
        return "same"
    return "higher" if true_difference > 0 else "lower"


# The metrics whose true value follows from the configured per-position rates alone, by
# design named here: pos0 is the first rate, the mean accepted length 1 + their sum (the
# per-request mean has no closed form: a ratio per request is biased at few steps).
_LENGTH = "mean_accepted_length"
_TRUE: dict[str, Callable[[Sequence[float]], float]] = {
    "acceptance_pos0": lambda r: float(r[0]),
    _LENGTH: lambda r: 1.0 + float(sum(r)),
}


def _truths(coverage: Analysis, rates: Mapping[str, Sequence[float]]) -> list[TruthCheck]:
    out = []
    for arm in coverage.arms:
        r = rates[arm.arm]
        for p in arm.per_position:
            truth = float(r[p.position])
            out.append(
                _truth(arm.arm, "acceptance", p.position, truth, p.estimate, p.ci_low, p.ci_high)
            )
        m = arm.metrics.get(_LENGTH)
        if m is not None:
            truth = _TRUE[_LENGTH](r)
            out.append(_truth(arm.arm, _LENGTH, None, truth, m.estimate, m.ci_low, m.ci_high))
    return out


def _truth(
    arm: str,
    quantity: str,
    pos: int | None,
    truth: float,
    est: float | None,
    low: float | None,
    high: float | None,
) -> TruthCheck:
    covered = low is not None and high is not None and low <= truth <= high
    return TruthCheck(
        arm=arm, quantity=quantity, position=pos, truth=truth, estimate=est,
        ci_low=low, ci_high=high, covered=covered,
    )  # fmt: skip


def _comparisons(analysis: Analysis, rates: Mapping[str, Sequence[float]]) -> list[ComparisonCheck]:
    base = rates[analysis.baseline]
    out = []
    for c in analysis.comparisons:
        if c.metric not in _TRUE or c.family != "primary":
            continue
        true_diff = _TRUE[c.metric](rates[c.arm]) - _TRUE[c.metric](base)
        want = direction(true_diff)
        out.append(
            ComparisonCheck(
                arm=c.arm,
                baseline=c.baseline,
                metric=c.metric,
                expected=want,
                true_difference=true_diff,
                difference=c.difference,
                verdict=c.verdict,
                ok=c.verdict in _CALLED[want],
            )
        )
    return out


def count_checks(
    results: Results, rates: Mapping[str, Sequence[float]], alpha: float
) -> list[CountCheck]:
    """Exact binomial tests of every arm's pooled counts against its configured rates."""
    probes, boots = results.probes, results.boots
    ok = set(boots.loc[boots["status"] == "ok", "boot_id"])
    rows = probes[probes["boot_id"].isin(ok)]
    tests = []
    for arm, r in rates.items():
        mine = rows[rows["arm"] == arm]
        if not len(mine):
            continue
        acc = np.array(mine["accepted_per_pos"].tolist(), dtype=np.int64).sum(axis=0)
        has = "drafted_per_pos" in mine.columns and mine["drafted_per_pos"].notna().all()
        drafted = (
            np.array(mine["drafted_per_pos"].tolist(), dtype=np.int64).sum(axis=0)
            if has
            else np.full(len(r), int(mine["num_drafts"].sum()))
        )
        tests += [(arm, k, int(drafted[k]), int(acc[k]), float(r[k])) for k in range(len(r))]
    level = alpha / max(1, len(tests))
    out = []
    for arm, k, n, x, truth in tests:
        p = float(binomtest(x, n, truth).pvalue) if n else 1.0
        out.append(
            CountCheck(
                arm=arm,
                position=k,
                steps=n,
                accepted=x,
                truth=truth,
                observed=x / n if n else float("nan"),
                p_value=p,
                ok=p >= level,
            )
        )
    return out


def check_selftest(
    analysis: Analysis, rates: Mapping[str, Sequence[float]], counts: list[CountCheck]
) -> SelftestResult:
    """`analysis`: analyze at the run's alpha; `counts`: `count_checks` at the same alpha."""
    truths = _truths(analysis, rates)
    comps = _comparisons(analysis, rates)
    failures = [] if counts else ["no arm had counts to check"]
    failures += [
        f"arm {c.arm!r} position {c.position}: {c.accepted} of {c.steps} steps accepted "
        f"({c.observed:.4f}), configured {c.truth:.4f}: exact binomial p = {c.p_value:.2g}"
        for c in counts
        if not c.ok
    ]
    failures += [
        f"arm {c.arm!r} vs {c.baseline!r} on {c.metric}: expected {c.expected} "
        f"(true difference {c.true_difference:+.4f}), analyze says {c.verdict} "
        f"({c.difference if c.difference is None else f'{c.difference:+.4f}'})"
        for c in comps
        if not c.ok
    ]
    covered = sum(t.covered for t in truths)
    return SelftestResult(
        passed=not failures,
        alpha=analysis.alpha,
        coverage_level=1 - analysis.alpha,
        false_fail_bound=min(1.0, 2 * analysis.alpha),
        coverage=covered / len(truths) if truths else 0.0,
        truths=truths,
        counts=counts,
        comparisons=comps,
        failures=failures,
    )
