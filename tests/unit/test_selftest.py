"""`specab selftest`'s checks, calibrated by simulation with the product's own code.

Synthetic acceptance is an exact Bernoulli model (no boot, prompt or residual effects): the
simulation's conditional rates are the configured ones, converted as vLLM converts them. A
truthful build must fail the whole selftest at most 2 alpha; the lower arm must be found
lower; a build that counts the bonus token as accepted (arms/patches/miscount_bonus.py) must
fail nearly always.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench import stats
from bench.errors import SpecabError
from bench.experiment import load_spec, synthetic_truth
from bench.records import Results
from bench.simulate import SimParams, simulate_run, simulated_manifest
from bench.stats import AnalysisOptions

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "arms" / "selftest" / "selftest.toml"
RATES = [0.8, 0.6, 0.4, 0.2]
ALPHA = 0.01
LOWER_SHIFT = -1.2  # every conditional rate's logit: 0.8/0.6/0.4/0.2 -> ~0.55/0.26/0.10/0.02


def _conditional(rates: list[float]) -> list[float]:
    return [r / q for r, q in zip(rates, [1.0, *rates[:-1]], strict=True)]


def _logit(p: float) -> float:
    return float(np.log(p / (1 - p)))


PARAMS = SimParams(
    mu=tuple(_logit(c) for c in _conditional(RATES)),
    sigma_boot=0.0,
    sigma_prompt=0.0,
    sigma_res=0.0,
    length_median=64.0,
    length_sigma=0.3,
)
ARMS = {"truth": 0.0, "truth-aa": 0.0, "truth-lower": LOWER_SHIFT}


def _truth(shift: float) -> list[float]:
    cond = [1 / (1 + np.exp(-(m + shift))) for m in PARAMS.mu]
    return [float(x) for x in np.cumprod(cond)]


TRUTH = {a: _truth(s) for a, s in ARMS.items()}


def _miscount(probes: pd.DataFrame, arm: str) -> pd.DataFrame:
    """What miscount_bonus.py does to every verify step of `arm`: accepted -> min(acc + 1, K)
    in both counters; cumulatively A'_k = A_(k-1) with A_(-1) = drafts."""
    out = probes.copy()
    rows = out["arm"] == arm
    acc = np.array(out.loc[rows, "accepted_per_pos"].tolist())
    shifted = np.concatenate([out.loc[rows, "num_drafts"].to_numpy()[:, None], acc[:, :-1]], 1)
    out.loc[rows, "accepted_per_pos"] = pd.Series(shifted.tolist(), index=out.index[rows])
    out.loc[rows, "num_accepted_tokens"] = shifted.sum(axis=1)
    out.loc[rows, "acceptance_histogram"] = None
    return out


def _selftest(seed: int, boots: int = 3, miscounted: str | None = None) -> stats.SelftestResult:
    run = simulate_run(ARMS, boots=boots, prompts=20, seed=seed, params=PARAMS)
    probes = run.probes if miscounted is None else _miscount(run.probes, miscounted)
    man = simulated_manifest(ARMS, boots=boots, prompts=20, alpha=ALPHA)
    results = Results(probes=probes, boots=run.boots_frame, manifest=man)
    analysis = stats.analyze(results, options=AnalysisOptions(alpha=ALPHA, n_resamples=200))
    counts = stats.count_checks(results, TRUTH, ALPHA)
    return stats.check_selftest(analysis, TRUTH, counts)


REPS = 150


@pytest.fixture(scope="module")
def truthful() -> list[stats.SelftestResult]:
    return [_selftest(seed) for seed in range(REPS)]


def test_a_truthful_build_fails_at_most_two_alpha(truthful: list[stats.SelftestResult]) -> None:
    # the lower arm's power is part of the design (a miss is a failure too): count only
    # the failures a truthful build can be blamed for, the count tests and the A/A
    blamed = [
        any(not c.ok for c in r.counts)
        or any(not c.ok for c in r.comparisons if c.expected == "same")
        for r in truthful
    ]
    fails = sum(blamed) / REPS
    mcse = np.sqrt(2 * ALPHA * (1 - 2 * ALPHA) / REPS)
    print(f"\nSELFTEST truthful false-fail {fails:.3f} (bound {2 * ALPHA}, MCSE {mcse:.3f})")
    assert fails <= 2 * ALPHA + 2 * mcse
    assert all(r.false_fail_bound == pytest.approx(2 * ALPHA) for r in truthful)


def test_the_known_difference_is_found_and_the_aa_arm_is_not(
    truthful: list[stats.SelftestResult],
) -> None:
    lower = [c for r in truthful for c in r.comparisons if c.arm == "truth-lower"]
    aa = [c for r in truthful for c in r.comparisons if c.arm == "truth-aa"]
    assert {c.expected for c in lower} == {"lower"} and {c.expected for c in aa} == {"same"}
    found = np.mean([c.ok for c in lower])
    aa_called = 1 - np.mean([c.ok for c in aa])
    print(f"SELFTEST lower found {found:.3f}; A/A called different {aa_called:.3f}")
    assert found >= 0.90  # measured 0.968 at this design
    assert np.mean([c.ok for c in aa]) >= 1 - ALPHA - 0.02


def test_coverage_and_counts_hold_the_truth(truthful: list[stats.SelftestResult]) -> None:
    coverage = np.mean([r.coverage for r in truthful])
    counts_ok = np.mean([all(c.ok for c in r.counts) for r in truthful])
    print(f"SELFTEST coverage {coverage:.4f} (nominal {1 - ALPHA}), counts ok {counts_ok:.3f}")
    assert coverage >= 1 - 2 * ALPHA  # per interval, reported: discreteness costs a little
    assert counts_ok >= 1 - ALPHA - 0.02
    r = truthful[0]
    assert {(t.arm, t.quantity) for t in r.truths} >= {("truth", "mean_accepted_length")}
    assert len(r.counts) == len(ARMS) * len(RATES)


def test_a_build_that_counts_the_bonus_token_fails() -> None:
    results = [_selftest(seed, miscounted="truth-aa") for seed in range(40)]
    assert not any(r.passed for r in results)
    r = results[0]
    assert any("arm 'truth-aa' position 0:" in f for f in r.failures), r.failures
    assert any(c.arm == "truth-aa" and not c.ok for c in r.comparisons)  # called different
    assert all(c.ok for c in r.counts if c.arm != "truth-aa")


def test_the_template_declares_its_truth() -> None:
    spec = load_spec(TEMPLATE)
    rates = synthetic_truth(spec, TEMPLATE)
    assert rates["truth"] == rates["truth-aa"] == RATES
    assert rates["truth-lower"][0] < RATES[0]


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        ({"server": {"per_boot_seed": False}}, "server.per_boot_seed"),
        ({"experiment": {"boots_per_arm": 1}}, "experiment.boots_per_arm"),
        (
            {"arm": {"speculative_config": {"rejection_sample_method": "standard"}}},
            "arms(truth).speculative_config.rejection_sample_method",
        ),
        (
            {"arm": {"speculative_config": {"synthetic_acceptance_rates": [0.5, 0.6, 0.2, 0.1]}}},
            "arms(truth).speculative_config.synthetic_acceptance_rates",
        ),
        (
            {"arm": {"speculative_config": {"synthetic_acceptance_rates": [0.5, 0.2]}}},
            "arms(truth).speculative_config.synthetic_acceptance_rates",
        ),
    ],
)
def test_a_file_without_a_known_truth_is_refused_naming_the_field(
    edit: dict[str, dict[str, object]], field: str
) -> None:
    spec = load_spec(TEMPLATE)
    update: dict[str, object] = {}
    for section in ("server", "experiment"):
        if section in edit:
            update[section] = getattr(spec, section).model_copy(update=edit[section])
    if "arm" in edit:
        first = spec.arms[0]
        cfg = {**(first.speculative_config or {}), **edit["arm"]["speculative_config"]}  # type: ignore[dict-item]
        update["arms"] = [first.model_copy(update={"speculative_config": cfg}), *spec.arms[1:]]
    with pytest.raises(SpecabError) as err:
        synthetic_truth(spec.model_copy(update=update), TEMPLATE)
    assert err.value.field == field
    assert str(TEMPLATE) in err.value.one_line() and "Fix:" in err.value.one_line()
