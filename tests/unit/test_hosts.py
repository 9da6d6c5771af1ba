"""Hosts that differ (bench/stats/compare/hosts.py), calibrated by simulation on the product's own
code: an A/A run whose arms sit on hosts in unequal proportions (the baseline 5 of 6 boots on
node0, the other arm 5 of 6 on node1) with node1's boots 0.3 logit higher. Unadjusted, the
host effect reads as an arm effect; within hosts, false claims stay at alpha."""

from __future__ import annotations

import numpy as np
import pytest
from stats_calib_helpers import mcse, metric_totals

from bench.records import DEFAULT_MARGINS, Results
from bench.records import PRIMARY_DEFAULT as METRICS
from bench.simulate import (
    HeldFixed,
    SimParams,
    simulate_boot_totals,
    simulate_frames,
    simulated_manifest,
)
from bench.stats import AnalysisOptions, analyze
from bench.stats.compare import adjusted_difference, balanced, host_effect_p, pseudo_pair
from bench.stats.methods import CLAIMS, estimate, family

ALPHA = 0.05
R = 2000
HOSTS = {"a": ["n0"] * 5 + ["n1"], "b": ["n0"] + ["n1"] * 5}
SHIFT = 0.3


def _totals(seed: int, delta_b: float = 0.0, shift: float = SHIFT):
    rng = np.random.default_rng(seed)
    boot_shift = np.array([[shift if h == "n1" else 0.0 for h in HOSTS[a]] for a in ("a", "b")])
    drafts, acc = simulate_boot_totals(
        rng, [0.0, delta_b], 6, 60, SimParams(), R, chunk=500, held=HeldFixed(boot_shift=boot_shift)
    )
    return metric_totals(drafts, acc)


def _families(m, adjust: bool):
    pairs = []
    for k in METRICS:
        num, den = m[k]
        ea, eb = estimate(num[:, 0], den[:, 0]), estimate(num[:, 1], den[:, 1])
        if adjust:
            diff, se, df = adjusted_difference(
                num[:, 0] / den[:, 0], num[:, 1] / den[:, 1], HOSTS["a"], HOSTS["b"]
            )
            ea, eb = pseudo_pair(diff, se, df, eb)
        pairs.append((ea, eb, DEFAULT_MARGINS[k]))
    return family(pairs, ALPHA)


def test_aa_with_host_imbalance_claims_at_alpha_only_within_hosts() -> None:
    m = _totals(1)
    plain = np.isin(_families(m, adjust=False).code, CLAIMS).any(axis=-1).mean()
    within = np.isin(_families(m, adjust=True).code, CLAIMS).any(axis=-1).mean()
    assert plain > 0.3, plain  # the problem is real: the host effect reads as an arm effect
    assert within <= ALPHA + 2 * mcse(ALPHA, R), within


def test_within_host_interval_covers_a_real_difference() -> None:
    m = _totals(2, delta_b=0.1)
    num, den = m["acceptance_pos0"]
    truth_m = _totals(3, delta_b=0.1, shift=0.0)  # no host effect, many replicates: the truth
    tn, td = truth_m["acceptance_pos0"]
    truth = float((tn[:, 1] / td[:, 1]).mean() - (tn[:, 0] / td[:, 0]).mean())
    diff, se, df = adjusted_difference(
        num[:, 0] / den[:, 0], num[:, 1] / den[:, 1], HOSTS["a"], HOSTS["b"]
    )
    from scipy import stats as st

    half = st.t.ppf(1 - ALPHA / 2, df) * se
    cover = float(((diff - half <= truth) & (truth <= diff + half)).mean())
    assert cover >= 1 - ALPHA - 3 * mcse(1 - ALPHA, R), cover


def test_balanced_and_confounded_layouts() -> None:
    assert balanced(["x", "y", "x"], ["y", "x", "x"]) and balanced(["x"] * 3, ["x"] * 5)
    assert not balanced(["x", "x", "y"], ["x", "y", "y"])
    _, se, _ = adjusted_difference(np.ones((3, 2)), np.ones((3, 2)), ["x", "x"], ["y", "y"])
    assert np.isnan(se).all()  # disjoint hosts: arm and host are confounded


@pytest.mark.parametrize("layout", ["one host", "balanced"])
def test_single_host_or_balanced_runs_keep_the_ordinary_comparison(layout: str) -> None:
    hosts = (
        {"a": ["h"] * 6, "b": ["h"] * 6}
        if layout == "one host"
        else {"a": ["n0", "n1"] * 3, "b": ["n1", "n0"] * 3}
    )
    arms = {"a": 0.0, "b": 0.05}
    man = simulated_manifest(arms, boots=6, prompts=40)
    pr, bo = simulate_frames(arms, boots=6, prompts=40, seed=9, hosts=hosts)
    pr0, bo0 = simulate_frames(arms, boots=6, prompts=40, seed=9)
    with_hosts = analyze(
        Results(probes=pr, boots=bo, manifest=man), options=AnalysisOptions(n_resamples=200)
    )
    without = analyze(
        Results(probes=pr0, boots=bo0, manifest=man), options=AnalysisOptions(n_resamples=200)
    )
    for c, c0 in zip(with_hosts.comparisons, without.comparisons, strict=True):
        assert (c.difference, c.ci_low, c.ci_high, c.verdict) == (
            c0.difference,
            c0.ci_low,
            c0.ci_high,
            c0.verdict,
        )
    if layout == "balanced":
        assert with_hosts.hosts is not None and with_hosts.hosts.balanced
    else:
        assert with_hosts.hosts is None


def test_analyze_reports_the_layout_and_adjusts_the_issues_case() -> None:
    arms = {"a": 0.0, "b": 0.0}
    man = simulated_manifest(arms, boots=6, prompts=40)
    claims = 0
    for seed in range(10):
        pr, bo = simulate_frames(arms, boots=6, prompts=40, seed=seed, hosts=HOSTS,
                                 host_effect={"n1": SHIFT})  # fmt: skip
        res = analyze(
            Results(probes=pr, boots=bo, manifest=man), options=AnalysisOptions(n_resamples=200)
        )
        claims += sum(c.family == "primary" and c.verdict in
                      ("improved", "regressed", "small_improvement", "small_regression")
                      for c in res.comparisons)  # fmt: skip
    assert claims <= 3  # unadjusted: about 28 of 40 primary comparisons (issue 19)
    h = res.hosts
    assert h is not None and h.boots == {"a": {"n0": 5, "n1": 1}, "b": {"n0": 1, "n1": 5}}
    assert h.adjusted == ["b"] and not h.balanced and h.confounded == []
    assert any("within hosts" in n for n in res.notes)
    assert set(h.host_effect_p) >= set(METRICS)


def test_disjoint_hosts_claim_nothing_and_say_why() -> None:
    arms = {"a": 0.0, "b": 0.5}
    man = simulated_manifest(arms, boots=4, prompts=40)
    pr, bo = simulate_frames(arms, boots=4, prompts=40, seed=1,
                             hosts={"a": ["n0"] * 4, "b": ["n1"] * 4})  # fmt: skip
    res = analyze(
        Results(probes=pr, boots=bo, manifest=man), options=AnalysisOptions(n_resamples=200)
    )
    assert all(c.verdict == "inconclusive" for c in res.comparisons)
    assert res.hosts is not None and res.hosts.confounded == ["b"]
    assert any("confounded" in n for n in res.notes)


def test_host_effect_test_holds_its_level_and_finds_a_large_effect() -> None:
    rng = np.random.default_rng(4)
    hosts = {"a": ["n0", "n1"] * 4, "b": ["n0", "n1"] * 4}
    null = []
    for _ in range(400):
        vals = {a: rng.normal(0, 1, 8) for a in hosts}
        null.append(host_effect_p(vals, hosts))
    rate = float(np.mean(np.asarray(null) < ALPHA))
    assert rate <= ALPHA + 2 * mcse(ALPHA, 400)
    shifted = {
        a: rng.normal(0, 1, 8) + np.where(np.array(hosts[a]) == "n1", 3.0, 0.0) for a in hosts
    }
    p = host_effect_p(shifted, hosts)
    assert p is not None and p < 0.01


def test_boots_that_ran_at_once_on_one_host_are_said_to_share_it() -> None:
    """Two boots at once (one core each) measure speed under each other's load: the analysis
    says so; boots one after another, or on different hosts, share nothing."""
    import pandas as pd

    from bench.stats.describe import shared_machine

    t = pd.Timestamp("2026-01-01", tz="UTC")

    def boots(rows: list[tuple[str, int, int, int, str]]) -> pd.DataFrame:
        s = pd.Timedelta(seconds=1)
        return pd.DataFrame(
            [
                {"host": h, "started_at": t + a * s, "ready_at": t + r * s,
                 "finished_at": t + f * s, "status": st}
                for h, a, r, f, st in rows
            ]
        )  # fmt: skip

    alone = boots([("h1", 0, 30, 40, "ok"), ("h1", 41, 70, 80, "ok"), ("h2", 0, 30, 40, "ok")])
    assert shared_machine(alone) is None
    # b starts up while a probes; c probes while a failed attempt starts on its host
    two = boots([("h1", 0, 30, 40, "ok"), ("h1", 35, 70, 80, "ok"), ("h2", 0, 30, 40, "ok"),
                 ("h2", 39, 39, 45, "failed"), ("h1", 90, 100, 110, "ok")])  # fmt: skip
    s = shared_machine(two)
    assert s is not None and (s.boots, s.shared, s.most_at_once) == (4, 2, 2)
    assert s.hosts == ["h1", "h2"]
    # a reference boot (no server) loads its host but times no serving: counted as load only
    ref = two.assign(reference_forward=[None, "m:f", None, None, None])
    s = shared_machine(ref)
    assert s is not None and (s.boots, s.shared) == (3, 2), s
    probes, boots_frame = simulate_frames({"a": 0.0, "b": 0.0}, boots=3, prompts=30)
    man = simulated_manifest({"a": 0.0, "b": 0.0})
    results = Results(probes=probes, boots=boots_frame, manifest=man)
    out = analyze(results, AnalysisOptions(n_resamples=0))
    assert out.shared_machine is not None  # simulated boots start 2 min apart and overlap
    assert any(n.startswith("speed: ") and "shared" in n for n in out.notes)
