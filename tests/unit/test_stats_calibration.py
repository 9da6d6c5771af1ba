"""Calibration of the boot-level statistics by simulation with known truth (docs/statistics.md,
"The method in detail"). Thousands of simulated experiments go through the product's own
`estimate` and `family`, and a sequential design through `primary`, the decision the driver
takes at a look (`test_stats.py` checks `analyze` agrees with them).
The suite runs each on its share of replicates (`replicates`) and fails it beyond alpha +
3 MCSE (false claims) or below 1 - alpha - 3 MCSE (coverage); each count written here is
the full one, which `benchmarks/bench_calibration.py` runs and holds to 2 MCSE."""

from __future__ import annotations

import numpy as np
import pytest
from stats_calib_helpers import Totals as CalibTotals
from stats_calib_helpers import (
    at_least,
    at_most,
    compare_one,
    mcse,
    primary_family,
    replicates,
    sequential_run,
    simulate,
    simulate_cells,
)

from bench.simulate import HeldFixed, PromptSet, SimParams, draw_prompt_set
from bench.stats.methods import CLAIMS, EQUIVALENT

ALPHA = 0.05
MARGINS = {"acceptance_pos0": 0.005, "mean_accepted_length": 0.02}

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("boots", [2, 3, 5, 10, 20])
def test_aa_false_positive_rate_within_alpha(boots: int) -> None:
    reps = replicates(1500)
    m = simulate(np.random.default_rng(100 + boots), [0.0, 0.0], boots, reps)
    limit = at_most(ALPHA, reps)
    for metric in m:
        f = compare_one(m, metric, 0, 1, ALPHA)
        claimed = ((f.v_lo > 0) | (f.v_hi < 0))[:, 0]  # a difference declared
        fpr = float(claimed.mean())
        print(f"A/A B={boots} {metric}: FPR {fpr:.4f} (limit {limit:.4f}, {reps} replicates)")
        assert fpr <= limit
        # The p-value, the interval and the verdicts tell the same story.
        assert np.array_equal(f.p[:, 0] < ALPHA, claimed)
        assert np.isin(f.code[:, 0][claimed], [*CLAIMS, EQUIVALENT]).all()
        assert not np.isin(f.code[:, 0][~claimed], CLAIMS).any()


def _truth(
    rng: np.random.Generator, deltas: list[float], params: SimParams, ps: PromptSet
) -> dict[str, float]:
    """Ratio of sums over 5,000 boots per arm on the fixed prompt set: the estimand."""
    m = simulate(rng, deltas, 5000, 1, params=params, prompt_set=ps)
    return {
        k: n[0, 1].sum() / d[0, 1].sum() - n[0, 0].sum() / d[0, 0].sum() for k, (n, d) in m.items()
    }


@pytest.mark.parametrize(
    "label,params",
    [
        ("default", SimParams()),
        ("sigma_boot=0", SimParams(sigma_boot=0.0)),
        ("arm x prompt interaction", SimParams(sigma_interaction=0.3)),
        ("K=1", SimParams(mu=(1.65,))),
    ],
)
def test_coverage_of_true_difference(label: str, params: SimParams) -> None:
    rng = np.random.default_rng(7)
    deltas = [0.0, 0.1]
    ps = draw_prompt_set(rng, 2, 100, params)
    truth = _truth(rng, deltas, params, ps)
    reps = replicates(1000)
    limit = at_least(1 - ALPHA, reps)
    for boots in (3, 10):
        m = simulate(rng, deltas, boots, reps, params=params, prompt_set=ps)
        for metric in m:
            f = compare_one(m, metric, 0, 1, ALPHA)
            cover = float(np.mean((f.lo <= truth[metric]) & (f.hi >= truth[metric])))
            print(f"{label} B={boots} {metric}: coverage {cover:.4f} (limit {limit:.4f})")
            assert cover >= limit


# Realistic departures from the base model (README calibration table). Unequal work: boots
# ran lognormal multiples of the drafts (sigma 0.5, 1.5) or one boot per arm ran 20x.
ROBUST = [
    ("work lognormal sigma 0.5", SimParams(work_sigma=0.5)),
    ("work lognormal sigma 1.5", SimParams(work_sigma=1.5)),
    ("one boot per arm 20x work", SimParams(work_outlier=20.0)),
    ("heavy-tailed boot effects (t3)", SimParams(boot_df=3.0, sigma_boot=0.05)),
    ("unequal variances (3x sigma_boot)", SimParams(arm_boot_scale=(1.0, 3.0))),
    ("K=1", SimParams(mu=(1.65,))),
]


@pytest.mark.parametrize("case", range(len(ROBUST)), ids=[r[0] for r in ROBUST])
@pytest.mark.parametrize("boots", [3, 5, 10])
def test_aa_false_positive_rate_on_realistic_departures(case: int, boots: int) -> None:
    """A/A: how often does the product's verdict family (both metrics, Holm) claim a
    difference? Per-metric raw rates are printed for the README table."""
    label, params = ROBUST[case]
    reps = replicates(2000)
    limit = at_most(ALPHA, reps)
    m = simulate(np.random.default_rng([300, case, boots]), [0.0, 0.0], boots, reps, params=params)
    for metric in m:
        f = compare_one(m, metric, 0, 1, ALPHA)
        raw = float(np.mean((f.v_lo > 0) | (f.v_hi < 0)))
        print(f"{label} B={boots} {metric}: raw FPR {raw:.4f} ± {mcse(raw, reps):.4f}")
    fam = primary_family(m, 2, ALPHA, MARGINS)
    fwer = float(np.mean(((fam.v_lo > 0) | (fam.v_hi < 0)).any(axis=-1)))
    err = mcse(fwer, reps)
    print(f"{label} B={boots} family (Holm): FPR {fwer:.4f} ± {err:.4f} (limit {limit:.4f})")
    assert fwer <= limit


def test_holm_controls_familywise_error_with_four_arms() -> None:
    reps = replicates(2000)
    m = simulate(np.random.default_rng(11), [0.0, 0.0, 0.0, 0.0], 5, reps)
    f = primary_family(m, 4, ALPHA, MARGINS)
    raw = float(np.mean((f.p < ALPHA).any(axis=-1)))
    claimed = float(np.mean(np.isin(f.code, CLAIMS).any(axis=-1)))
    limit = at_most(ALPHA, reps)
    print(f"4 arms, 6 primary tests, B=5: FWER raw {raw:.4f}, verdicts (Holm) {claimed:.4f}")
    assert claimed <= limit
    assert raw > limit  # without the correction the family error really is inflated
    # The interval each verdict rests on excludes 0 exactly when Holm rejects.
    assert np.array_equal((f.v_lo > 0) | (f.v_hi < 0), np.nan_to_num(f.p_adj, nan=1) < ALPHA)


def test_sequential_design_error_rate_and_average_boots() -> None:
    looks = (3, 6, 10)
    # one `primary` call per replicate and look (~2 ms each), as the driver decides: fewer
    # replicates than the batched checks, the limit's MCSE says how many
    reps = replicates(1000)
    limit = at_most(ALPHA, reps)
    aa = simulate(np.random.default_rng(21), [0.0, 0.0], 10, reps)
    claimed, used = sequential_run(aa, looks, ALPHA, MARGINS)
    print(
        f"sequential A/A: error {claimed.mean():.4f} (limit {limit:.4f}), boots {used.mean():.2f}"
    )
    assert claimed.mean() <= limit
    # Naive re-testing at every look without spending: the error the design prevents.
    naive = np.zeros(reps, dtype=bool)
    for n in looks:
        cut = {k: (x[..., :n], d[..., :n]) for k, (x, d) in aa.items()}
        naive |= np.isin(primary_family(cut, 2, ALPHA, MARGINS).code, CLAIMS).any(axis=-1)
    print(f"naive re-testing at each look: error {naive.mean():.4f}")
    assert naive.mean() > claimed.mean()

    ab = simulate(np.random.default_rng(22), [0.0, 0.1], 10, replicates(500))
    claimed, used = sequential_run(ab, looks, ALPHA, MARGINS)
    fixed = primary_family(ab, 2, ALPHA, MARGINS)
    fixed_power = float(np.mean(np.isin(fixed.code, CLAIMS).any(axis=-1)))
    print(
        f"sequential, real effect: power {claimed.mean():.4f} with {used.mean():.2f} boots/arm "
        f"on average; fixed design: power {fixed_power:.4f} with 10 boots/arm"
    )
    assert used.mean() < 9.0
    assert claimed.mean() >= fixed_power - 0.03


@pytest.mark.parametrize("positions,boots", [(4, 3), (4, 5), (4, 10), (8, 10), (1, 3)])
def test_simultaneous_position_intervals_cover(positions: int, boots: int) -> None:
    """Per-arm intervals over draft positions hold jointly (Bonferroni-t where the boots
    cannot estimate the K x K correlation, max-|t| where they can)."""
    from bench.simulate import mu_for, simulate_boot_totals
    from bench.stats.describe import simultaneous_band

    rng = np.random.default_rng(400 + positions + boots)
    params = SimParams(mu=mu_for(positions))
    ps = draw_prompt_set(rng, 1, 100, params)
    d, a = simulate_boot_totals(rng, [0.0], 4000, 100, params, 1, held=HeldFixed(ps))
    truth = a[0, 0].sum(axis=0) / d[0, 0].sum()
    reps = replicates(1000)
    d, a = simulate_boot_totals(rng, [0.0], boots, 100, params, reps, held=HeldFixed(ps))
    hits, methods = 0, set()
    for r in range(reps):
        den = np.repeat(d[r, 0][:, None], positions, axis=1).astype(np.float64)
        band = simultaneous_band(a[r, 0].astype(np.float64), den, ALPHA)
        hits += bool(np.all((band.ci_low <= truth) & (truth <= band.ci_high)))
        methods.add(band.method)
    cover = hits / reps
    limit = at_least(1 - ALPHA, reps)
    print(f"K={positions} B={boots} ({', '.join(sorted(methods))}): coverage {cover:.4f}")
    assert cover >= limit


def test_permutation_test_false_positive_rate() -> None:
    from bench.stats.methods import permutation_test

    reps = replicates(500)
    rng = np.random.default_rng(31)
    num, den = simulate(rng, [0.0, 0.0], 5, reps)["acceptance_pos0"]
    p = np.array(
        [
            permutation_test(num[r, 0], den[r, 0], num[r, 1], den[r, 1], 10_000, rng)[0]
            for r in range(reps)
        ]
    )
    fpr = float(np.mean(p < ALPHA))
    limit = at_most(ALPHA, reps)
    print(f"permutation test A/A B=5 (exact, 252 relabelings): FPR {fpr:.4f} (limit {limit:.4f})")
    assert fpr <= limit


@pytest.mark.parametrize("boots", [10, 20])
def test_studentized_cluster_bootstrap_coverage(boots: int) -> None:
    from bench.stats.methods import cluster_bootstrap

    rng = np.random.default_rng(41)
    ps = draw_prompt_set(rng, 2, 100, SimParams())
    truth = _truth(rng, [0.0, 0.1], SimParams(), ps)["acceptance_pos0"]
    reps = replicates(500)
    num, den = simulate(rng, [0.0, 0.1], boots, reps, prompt_set=ps)["acceptance_pos0"]
    ci = np.array(
        [
            cluster_bootstrap(num[r, 0], den[r, 0], num[r, 1], den[r, 1], ALPHA, 2000, rng)
            for r in range(reps)
        ]
    )
    cover = float(np.mean((ci[:, 0] <= truth) & (ci[:, 1] >= truth)))
    limit = at_least(1 - ALPHA, reps)
    print(f"studentized cluster bootstrap B={boots}: coverage {cover:.4f} (limit {limit:.4f})")
    assert cover >= limit


def test_pigeonhole_interval_covers_the_new_prompts_difference() -> None:
    """With an arm x prompt interaction the effect depends on the prompts: the primary
    interval (this probe set) does not cover the difference over the prompt population,
    the pigeonhole interval ("would it hold on new prompts?") does."""
    from bench.simulate import simulate_counts
    from bench.stats.methods import (
        estimate,
        family,
        pigeonhole_interval,
        pigeonhole_ratios,
        pigeonhole_weights,
    )

    rng = np.random.default_rng(8)
    params = SimParams(sigma_interaction=0.3)
    d_pop, a_pop, _ = simulate_counts(rng, [0.0, 0.1], 4, 50_000, params)
    pos0 = a_pop[0, ..., 0].sum(axis=(1, 2)) / d_pop[0].sum(axis=(1, 2))
    truth = pos0[1] - pos0[0]
    reps, primary, pigeon = replicates(200), 0, 0
    for _ in range(reps):
        d_all, a_all, _ = simulate_counts(rng, [0.0, 0.1], 5, 100, params)
        d, a = d_all[0].astype(float), a_all[0, ..., 0].astype(float)
        ei = estimate(a[0].sum(axis=1), d[0].sum(axis=1))
        ej = estimate(a[1].sum(axis=1), d[1].sum(axis=1))
        f = family([(ei, ej, 0.005)], ALPHA)
        wp, wb = pigeonhole_weights(100, [5, 5], 1000, rng)
        si = pigeonhole_ratios([a[0]], d[0], wp, next(wb))[0]
        sj = pigeonhole_ratios([a[1]], d[1], wp, next(wb))[0]
        lo, hi = pigeonhole_interval(float(f.diff[0]), sj - si, float(f.df[0]), ALPHA)
        primary += bool(f.lo[0] <= truth <= f.hi[0])
        pigeon += bool(lo <= truth <= hi)
    limit = at_least(1 - ALPHA, reps)
    print(
        f"new-prompts truth {truth:.4f}: pigeonhole coverage {pigeon / reps:.3f} "
        f"(limit {limit:.3f}); primary interval {primary / reps:.3f}"
    )
    assert pigeon / reps >= limit
    assert primary / reps < pigeon / reps


def test_power_table_matches_the_planning_formula() -> None:
    """Empirical power of the product's comparison vs the planning formula that `mde`,
    `boots_needed` and `specab plan` use (noncentral t with v = 2B - 2)."""
    from scipy import stats as st

    from bench.stats.methods import boots_needed, mde

    rng = np.random.default_rng(51)
    ps = draw_prompt_set(rng, 2, 100, SimParams())
    num0, den0 = simulate(rng, [0.0, 0.0], 20, 300, prompt_set=ps)["acceptance_pos0"]
    se0 = compare_one({"m": (num0, den0)}, "m", 0, 1, ALPHA).se
    sd = float(np.sqrt(np.mean(se0**2) / (2 / 20)))  # pooled between-boot SD, 300 x 2 x 20 boots
    reps = replicates(600)
    print(f"pos0 between-boot SD (simulated model) {sd:.4f}")
    print("  B  delta  true diff  power(sim)  power(formula)  MDE(80%)")
    for delta in (0.05, 0.1):
        truth = _truth(rng, [0.0, delta], SimParams(), ps)["acceptance_pos0"]
        for boots in (3, 5, 10):
            num, den = simulate(rng, [0.0, delta], boots, reps, prompt_set=ps)["acceptance_pos0"]
            f = compare_one({"m": (num, den)}, "m", 0, 1, ALPHA)
            power = float(np.mean(f.lo > 0))
            nu = 2 * boots - 2
            se = sd * np.sqrt(2 / boots)
            theory = float(st.nct.sf(st.t.ppf(1 - ALPHA / 2, nu), nu, truth / se))
            m = float(mde(sd, boots, ALPHA))
            print(
                f"{boots:3d}  {delta:5.2f}  {truth:9.4f}  {power:10.3f}  {theory:14.3f}  {m:8.4f}"
            )
            # Welch df <= 2B - 2 makes the real test a little more conservative than the plan.
            assert theory - 0.12 <= power <= theory + 3 * mcse(theory, reps) + 0.02
    for target_power in (0.8, 0.95):
        need = boots_needed(sd, 0.006, ALPHA, target_power)
        print(f"boots per arm for {target_power:.0%} power at 0.006: {need}")
        assert need is not None and mde(sd, need, ALPHA, target_power) <= 0.006
    assert boots_needed(sd, 0.006, ALPHA, 0.95) > boots_needed(sd, 0.006, ALPHA, 0.8)  # type: ignore[operator]


@pytest.mark.parametrize("boots", [3, 10])
def test_the_per_request_length_holds_alpha_and_covers_its_truth(boots: int) -> None:
    """The registry's per-request mean accepted length, simulated request by request: an
    A/A claims a difference at most alpha (+ 2 MCSE) of the time, and an A/B's interval
    covers the true difference (the per-request mean over 5,000 boots per arm) at 1 - alpha
    (- 2 MCSE)."""
    metric, reps = "request_mean_accepted_length", replicates(1000)
    aa = simulate_cells(np.random.default_rng(300 + boots), [0.0, 0.0], boots, reps, prompts=40)
    f = compare_one(aa, metric, 0, 1, ALPHA)
    fpr = float(((f.v_lo > 0) | (f.v_hi < 0))[:, 0].mean())
    print(f"A/A B={boots} {metric}: FPR {fpr:.4f}")
    assert fpr <= at_most(ALPHA, reps)
    ps = draw_prompt_set(np.random.default_rng(8), 2, 40, SimParams())
    truth_cells = simulate_cells(
        np.random.default_rng(9), [0.0, 0.3], 5000, 1, prompts=40, prompt_set=ps
    )
    n, d = truth_cells[metric]
    truth = n[0, 1].sum() / d[0, 1].sum() - n[0, 0].sum() / d[0, 0].sum()
    ab = simulate_cells(
        np.random.default_rng(400 + boots), [0.0, 0.3], boots, reps, prompts=40, prompt_set=ps
    )
    f = compare_one(ab, metric, 0, 1, ALPHA)
    covered = float(((f.lo[:, 0] <= truth) & (truth <= f.hi[:, 0])).mean())
    print(f"A/B B={boots} {metric}: coverage {covered:.4f} of {truth:+.4f}")
    assert covered >= at_least(1 - ALPHA, reps)
    assert truth > 0.05  # the shift moved it: a coverage test of a real difference


def _values(rng: np.random.Generator, ps: PromptSet) -> dict[str, float]:
    """One arm's true value of every metric on the prompt set (5,000 boots)."""
    m = simulate(rng, [0.0], 5000, 1, prompt_set=ps)
    return {k: float(n[0, 0].sum() / d[0, 0].sum()) for k, (n, d) in m.items()}


def _against_a_fixed_reference(m: CalibTotals, value: dict[str, float]) -> CalibTotals:
    """Arm 0 made a reference arm at temperature 0: every boot the same counts, its ratio
    `value` (its boots repeat exactly: spread 0); arm 1 the served arm as simulated."""
    out = {}
    for k, (num, den) in m.items():
        d0 = np.broadcast_to(den[:, 1:2].mean(axis=2, keepdims=True), den[:, 1:2].shape)
        out[k] = (np.concatenate((d0 * value[k], num[:, 1:2]), 1),
                  np.concatenate((d0, den[:, 1:2]), 1))  # fmt: skip
    return out


@pytest.mark.parametrize("boots", [3, 5, 10])
def test_a_served_arm_against_a_zero_spread_reference_keeps_alpha_and_finds_a_departure(
    boots: int,
) -> None:
    """Served against trained: a reference arm's boots repeat exactly (spread 0), so Welch's
    interval rests on the served arm's spread alone (df = B - 1). A served arm equal to the
    reference is called different at most alpha (+ MCSE) of the time, and one 0.02 below it
    in pos0 is found as often as the plan's two-arm formula promises at these boots, within
    3 MCSE (full counts: 0.638 against 0.676 at B = 3, where B - 1 df cost what half the
    spread gains; 0.992 against 0.969 at B = 5; 1.000 at 10)."""
    from scipy import stats as st

    rng = np.random.default_rng(600 + boots)
    ps = draw_prompt_set(rng, 1, 100, SimParams())
    served = _values(rng, ps)
    reps = replicates(1000)
    runs = simulate(rng, [0.0, 0.0], boots, reps, prompt_set=ps)
    f = compare_one(_against_a_fixed_reference(runs, served), "acceptance_pos0", 0, 1, ALPHA)
    fpr = float(((f.v_lo > 0) | (f.v_hi < 0))[:, 0].mean())
    print(f"served = reference (spread 0), B={boots}: FPR {fpr:.4f} ({reps} replicates)")
    assert fpr <= at_most(ALPHA, reps)
    assert np.allclose(f.df[:, 0], boots - 1, atol=0.01)  # the served arm's spread alone
    higher = {**served, "acceptance_pos0": served["acceptance_pos0"] + 0.02}
    f = compare_one(_against_a_fixed_reference(runs, higher), "acceptance_pos0", 0, 1, ALPHA)
    found = float((f.hi[:, 0] < 0).mean())
    se = float(np.sqrt(np.mean(f.se[:, 0] ** 2)))  # one arm's SE; the plan counts two
    nu = 2 * boots - 2
    plan = float(st.nct.sf(st.t.ppf(1 - ALPHA / 2, nu), nu, 0.02 / (se * np.sqrt(2))))
    print(f"served 0.02 below, B={boots}: found {found:.3f}, the plan's formula {plan:.3f}")
    assert found >= plan - 3 * mcse(plan, reps)
