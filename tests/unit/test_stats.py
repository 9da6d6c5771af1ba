"""Exact and degenerate-case tests of bench.stats (real Parquet via the results writer)."""

from __future__ import annotations

import json
from math import comb
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from bench import stats
from bench.errors import SpecabError
from bench.records import boot_file_stem
from bench.stats._core import (
    VERDICTS,
    arm_stats,
    boots_needed,
    compare,
    holm,
    mde,
    verdict_codes,
)
from bench.stats._resample import permutation_test
from bench.stats._sequential import obf_boundaries
from bench.stats.simulate import (
    SimRun,
    simulate_frames,
    simulate_results,
    simulate_run,
    simulated_manifest,
)
from bench.store import load_results

DESIGN_TOP = {"schema_version", "experiment", "alpha", "arms", "comparisons", "variance_components"}
DESIGN_ARM = {"arm", "boots", "failed_boots", "metrics", "per_position"}
DESIGN_METRIC = {"estimate", "ci_low", "ci_high", "between_boot_sd"}
DESIGN_POSITION = {"position", "estimate", "ci_low", "ci_high"}
DESIGN_COMPARISON = {
    "arm", "baseline", "metric", "difference", "ci_low", "ci_high", "p_value", "p_adjusted",
    "method", "margin", "verdict", "mde", "boots_needed",
}  # fmt: skip


def _analyze(root: Path, **opts: object) -> dict:  # type: ignore[type-arg]
    r = load_results(root)
    return stats.analyze(r.probes, r.boots, r.manifest, n_resamples=2000, **opts)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def three_arms(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sim") / "three"
    return simulate_results(
        root,
        {"base": 0.0, "fix": 0.15, "same": 0.0},
        boots=6,
        failed_boots={"base": 1, "fix": 0, "same": 0},
    )


def test_json_follows_design_contract(three_arms: Path) -> None:
    out = _analyze(three_arms)
    json.dumps(out, allow_nan=False)  # strict JSON: no NaN / Infinity anywhere
    assert set(out) >= DESIGN_TOP
    assert out["schema_version"] == 1 and out["experiment"] == "sim" and out["alpha"] == 0.05
    assert [a["arm"] for a in out["arms"]] == ["base", "fix", "same"]
    for a in out["arms"]:
        assert set(a) >= DESIGN_ARM
        assert set(a["metrics"]) == {"acceptance_pos0", "mean_accepted_length"}
        for m in a["metrics"].values():
            assert set(m) >= DESIGN_METRIC
            assert m["ci_low"] < m["estimate"] < m["ci_high"]
        assert [p["position"] for p in a["per_position"]] == [0, 1, 2, 3]
        assert all(set(p) >= DESIGN_POSITION for p in a["per_position"])
    assert {a["arm"]: (a["boots"], a["failed_boots"]) for a in out["arms"]} == {
        "base": (6, 1),
        "fix": (6, 0),
        "same": (6, 0),
    }
    assert len(out["comparisons"]) == 4
    for c in out["comparisons"]:
        assert set(c) >= DESIGN_COMPARISON
        assert list(c)[:13] == list(stats.COMPARISON_KEYS)
        assert c["verdict"] in VERDICTS and c["why"]
        assert c["p_adjusted"] >= c["p_value"]
    fix = [c for c in out["comparisons"] if c["arm"] == "fix"]
    assert {c["verdict"] for c in fix} == {"improved"}  # a large true effect


def test_estimates_are_ratio_of_sums_and_welch(three_arms: Path) -> None:
    r = load_results(three_arms)
    out = _analyze(three_arms)
    pr = r.probes.assign(a0=r.probes["accepted_per_pos"].map(lambda x: int(x[0])))
    sums = pr.groupby(["arm", "boot"])[["a0", "num_drafts", "num_accepted_tokens"]].sum()
    base, fix = sums.loc["base"], sums.loc["fix"]
    pos0 = out["arms"][0]["metrics"]["acceptance_pos0"]
    assert pos0["estimate"] == pytest.approx(base["a0"].sum() / base["num_drafts"].sum())
    length = out["arms"][0]["metrics"]["mean_accepted_length"]
    assert length["estimate"] == pytest.approx(
        1 + base["num_accepted_tokens"].sum() / base["num_drafts"].sum()
    )

    # Welch on linearized boot values, checked against scipy's Welch t-test on z-values.
    def z(s: pd.DataFrame) -> np.ndarray:
        ratio = s["a0"].sum() / s["num_drafts"].sum()
        lin = (s["a0"] - ratio * s["num_drafts"]) / s["num_drafts"].mean()
        return (ratio + lin).to_numpy()  # z-values are centred; add the arm's estimate

    c = out["comparisons"][0]
    assert (c["arm"], c["metric"]) == ("fix", "acceptance_pos0")
    diff = fix["a0"].sum() / fix["num_drafts"].sum() - base["a0"].sum() / base["num_drafts"].sum()
    assert c["difference"] == pytest.approx(diff)
    t = st.ttest_ind(z(fix), z(base), equal_var=False)
    assert c["p_value"] == pytest.approx(t.pvalue, rel=1e-9)


def test_analyze_agrees_with_vectorized_core(three_arms: Path) -> None:
    """Calibration runs the core on arrays; analyze must give identical numbers."""
    out = _analyze(three_arms)
    r = load_results(three_arms)
    pr = r.probes.assign(a0=r.probes["accepted_per_pos"].map(lambda x: float(x[0])))
    s = pr.groupby(["arm", "boot"])[["a0", "num_drafts"]].sum()
    ri, sei, _, dfi = arm_stats(
        s.loc["base", "a0"].to_numpy(), s.loc["base", "num_drafts"].to_numpy()
    )
    rj, sej, _, dfj = arm_stats(
        s.loc["same", "a0"].to_numpy(), s.loc["same", "num_drafts"].to_numpy()
    )
    core = compare(ri, sei, dfi, rj, sej, dfj, 0.05)
    c = next(
        c for c in out["comparisons"] if c["arm"] == "same" and c["metric"] == "acceptance_pos0"
    )
    assert (c["ci_low"], c["ci_high"]) == pytest.approx((float(core["lo"]), float(core["hi"])))
    assert c["tost_ci"] == pytest.approx([float(core["lo2"]), float(core["hi2"])])


def test_unreplicated_is_inconclusive_unless_prior(tmp_path: Path) -> None:
    root = simulate_results(tmp_path / "b1", {"a": 0.0, "b": 0.5}, boots=1)
    out = _analyze(root)
    for c in out["comparisons"]:
        assert c["verdict"] == "inconclusive" and c["method"] == "unreplicated"
        assert c["ci_low"] is None and c["p_value"] is None
        assert "unreplicated" in c["why"]
    assert out["arms"][0]["metrics"]["acceptance_pos0"]["between_boot_sd"] is None
    prior = {"acceptance_pos0": 0.008, "mean_accepted_length": 0.038}
    out = _analyze(root, prior_between_boot_sd=prior)
    for c in out["comparisons"]:
        assert c["method"] == "welch_prior_sd" and c["ci_low"] is not None
        se = np.hypot(prior[c["metric"]], prior[c["metric"]])
        assert c["ci_high"] - c["ci_low"] == pytest.approx(2 * st.norm.ppf(0.975) * se)
    # delta 0.5 on the logit scale is a big effect: the prior makes it decidable
    assert {c["verdict"] for c in out["comparisons"]} == {"improved"}


def _identical_boots(tmp_path: Path, shift: int) -> Path:
    """Greedy, deterministic kernels: every boot of an arm has identical counts."""
    run = simulate_run({"a": 0.0, "b": 0.0}, boots=3, prompts=50, seed=3)
    first = run.probes[run.probes["boot"] == 0]
    rows = []
    for arm in ("a", "b"):
        for b in range(3):
            rows.append(
                first[first["arm"] == "a"].assign(
                    arm=arm, boot=b, boot_id=boot_file_stem(arm, b, 1)
                )
            )
    probes = pd.concat(rows, ignore_index=True)
    bmask = probes["arm"] == "b"
    probes.loc[bmask, "accepted_per_pos"] = probes.loc[bmask, "accepted_per_pos"].map(
        lambda x: [x[0] + shift, *x[1:]]
    )
    probes.loc[bmask, "num_accepted_tokens"] += shift
    from bench.store import ResultsWriter

    w = ResultsWriter.create(tmp_path / f"det{shift}", simulated_manifest({"a": 0, "b": 0}))
    SimRun(probes, run.boots).write(w)
    return tmp_path / f"det{shift}"


def test_identical_boots_are_deterministic_not_infinitely_significant(tmp_path: Path) -> None:
    out = _analyze(_identical_boots(tmp_path, 0))
    c = out["comparisons"][0]
    assert c["deterministic"] and c["difference"] == 0 and c["p_value"] is None
    assert c["verdict"] == "equivalent" and "deterministic" in c["why"]
    assert any("deterministic" in n for n in out["notes"])
    out = _analyze(_identical_boots(tmp_path, 1))  # +1 accepted at pos0 on each of 50 prompts
    c = out["comparisons"][0]
    r = load_results(tmp_path / "det1")
    drafts = r.probes[r.probes["boot_id"] == "b__b000__a1"]["num_drafts"].sum()
    assert c["difference"] == pytest.approx(50 / drafts)  # the exact difference
    assert c["ci_low"] == c["ci_high"] == c["difference"] and c["p_value"] is None
    assert c["verdict"] == ("improved" if 50 / drafts > 0.005 else "equivalent")
    json.dumps(out, allow_nan=False)


def test_zero_draft_boot_is_an_error(tmp_path: Path) -> None:
    root = simulate_results(tmp_path / "z", {"a": 0.0, "b": 0.0}, boots=2)
    probes = load_results(root).probes
    probes.loc[probes["boot_id"] == "b__b001__a1", "num_drafts"] = 0
    r = load_results(root)
    with pytest.raises(SpecabError, match=r"b__b001__a1.*zero drafts.*Fix:"):
        stats.analyze(probes, r.boots, r.manifest, source=str(root))


@pytest.mark.parametrize(
    "opts,field",
    [
        ({"baseline": "nope"}, "--baseline"),
        ({"alpha": 0.6}, "--alpha"),
        ({"alpha": 0.0}, "--alpha"),
        ({"margin_pos0": -1.0}, "--margin-pos0"),
        ({"looks": [6, 3]}, "--looks"),
        ({"prior_between_boot_sd": -0.1}, "--prior-between-boot-sd"),
    ],
)
def test_bad_options_are_user_errors(three_arms: Path, opts: dict, field: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(SpecabError) as exc:
        _analyze(three_arms, **opts)
    assert exc.value.field == field and exc.value.fix


def test_verdict_rules() -> None:
    m = 0.01
    cases = [  # (diff, lo, hi, lo2, hi2) -> verdict
        ((0.05, 0.02, 0.08, 0.025, 0.075), "improved"),
        ((-0.05, -0.08, -0.02, -0.075, -0.025), "regressed"),
        ((0.02, 0.005, 0.035, 0.007, 0.03), "small_improvement"),
        ((-0.02, -0.035, -0.005, -0.03, -0.007), "small_regression"),
        ((0.001, -0.008, 0.009, -0.006, 0.008), "equivalent"),
        ((0.004, 0.001, 0.007, 0.002, 0.006), "equivalent"),  # real but inside the margin
        ((0.003, -0.02, 0.026, -0.015, 0.02), "inconclusive"),
        ((np.nan, np.nan, np.nan, np.nan, np.nan), "inconclusive"),
    ]
    arr = np.array([c for c, _ in cases]).T
    got = verdict_codes(*arr, m)
    assert [VERDICTS[i] for i in got] == [v for _, v in cases]


def test_holm_matches_hand_computation() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.005])
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    with_nan = holm(np.array([0.01, np.nan, 0.04]))
    assert with_nan[0] == pytest.approx(0.02) and np.isnan(with_nan[1])
    assert with_nan[2] == pytest.approx(0.04)


def test_power_helpers_are_consistent() -> None:
    sd, alpha = 0.008, 0.05
    n = boots_needed(sd, 0.006, alpha)
    assert n is not None and mde(sd, n, alpha) <= 0.006 < mde(sd, n - 1, alpha)
    nu = 2 * 10 - 2
    expect = (st.t.ppf(0.975, nu) + st.t.ppf(0.8, nu)) * sd * np.sqrt(2 / 10)
    assert float(mde(sd, 10, alpha)) == pytest.approx(expect)
    assert boots_needed(0.0, 0.01, alpha) == 2 and boots_needed(np.nan, 0.01, alpha) is None


def test_permutation_minimum_p_is_stated() -> None:
    rng = np.random.default_rng(0)
    den = np.full(4, 1000.0)
    p, pmin, exact = permutation_test(
        np.array([700.0, 702, 701, 699]), den, np.array([800.0, 801, 799, 802]), den, 10_000, rng
    )
    assert exact and pmin == pytest.approx(2 / comb(8, 4)) and p == pytest.approx(pmin)
    p, pmin, exact = permutation_test(
        rng.normal(700, 5, 10),
        np.full(10, 1e3),
        rng.normal(700, 5, 10),
        np.full(10, 1e3),
        5000,
        rng,
    )
    assert not exact and pmin == pytest.approx(1 / 5001) and 0 < p <= 1


def test_obrien_fleming_boundaries() -> None:
    z, nominal = obf_boundaries((3, 6, 10), 0.05)
    assert z[0] > z[1] > z[2] > 1.96
    # the first look spends alpha(t) = 2 - 2 Phi(z_{.975}/sqrt t) exactly
    spent = 2 - 2 * st.norm.cdf(st.norm.ppf(0.975) / np.sqrt(0.3))
    assert z[0] == pytest.approx(st.norm.isf(spent / 2), abs=0.03)
    # total crossing probability under H0 (fresh simulation) equals alpha
    rng = np.random.default_rng(99)
    t = np.array([0.3, 0.6, 1.0])
    w = np.cumsum(rng.standard_normal((400_000, 3)) * np.sqrt(np.diff(t, prepend=0)), axis=1)
    crossed = (np.abs(w / np.sqrt(t)) >= np.array(z)).any(axis=1).mean()
    assert crossed == pytest.approx(0.05, abs=0.002)
    assert all(a < 0.05 for a in nominal)


def test_decide_reports_stop_or_continue(tmp_path: Path) -> None:
    root = simulate_results(tmp_path / "s", {"a": 0.0, "b": 1.0}, boots=4, looks=[3, 6, 10])
    r = load_results(root)
    d = stats.decide(r.probes, r.boots, r.manifest)  # looks from the manifest
    assert d.look == 1 and d.boots_per_arm == 4 and d.looks == (3, 6, 10)
    assert d.action == "stop" and {c["status"] for c in d.comparisons} == {"difference"}
    close = simulate_results(tmp_path / "c", {"a": 0.0, "b": 0.0}, boots=2)
    r = load_results(close)
    d = stats.decide(r.probes, r.boots, r.manifest, [3, 6, 10])
    assert d.action == "continue" and d.next_look == 3 and d.look is None
    out = _analyze(root)
    assert out["sequential"]["action"] == "stop"


def test_split_arm_counts_false_claims(three_arms: Path) -> None:
    r = load_results(three_arms)
    res = stats.split_arm(r.probes, r.boots, r.manifest, "base")
    assert res["splits"] == comb(6, 3) // 2 and res["exhaustive"]
    assert 0.0 <= res["any_claimed_rate"] <= 1.0
    with pytest.raises(SpecabError, match="at least 4"):
        small = simulate_results(three_arms.parent / "small", {"a": 0.0}, boots=3)
        rs = load_results(small)
        stats.split_arm(rs.probes, rs.boots, rs.manifest, "a")


def test_variance_components_recover_the_model(tmp_path: Path) -> None:
    root = simulate_results(
        tmp_path / "v", {"a": 0.0, "b": 0.0}, boots=20, prompts=200, sigma_boot=0.0
    )
    vc = _analyze(root)["variance_components"]
    pos0 = vc["per_arm"]["a"]["acceptance_pos0"]
    # sigma_boot = 0: the boot component is near zero, prompts dominate, and the between-boot
    # SD is close to the binomial + residual floor (overdispersion ~ 1-3).
    assert pos0["icc_prompt"] > 0.7 and pos0["icc_boot"] < 0.02
    assert 0.5 < pos0["overdispersion"] < 4
    assert pos0["design_effect"] is not None and pos0["design_effect"] < 1  # prompts cancel
    assert vc["pooled"]["acceptance_pos0"]["df"] == 38


def test_arm_without_ok_boots_is_reported_not_crashed(tmp_path: Path) -> None:
    probes, boots = simulate_frames({"a": 0.0, "b": 0.0}, boots=3, prompts=30)
    boots.loc[boots["arm"] == "b", ["status", "error"]] = ["failed", "server died"]
    out = stats.analyze(probes, boots, simulated_manifest({"a": 0.0, "b": 0.0}), n_resamples=200)
    json.dumps(out, allow_nan=False)
    b = out["arms"][1]
    assert b["boots"] == 0 and b["failed_boots"] == 3 and b["per_position"] == []
    assert b["metrics"]["acceptance_pos0"]["estimate"] is None
    assert {c["verdict"] for c in out["comparisons"]} == {"inconclusive"}
    assert all("no ok boots" in c["why"] for c in out["comparisons"])


def test_unreplicated_arm_intervals_are_null_not_zero(tmp_path: Path) -> None:
    out = _analyze(simulate_results(tmp_path / "one", {"a": 0.0}, boots=1))
    arm = out["arms"][0]
    assert arm["metrics"]["acceptance_pos0"]["ci_low"] is None
    assert all(p["ci_low"] is None and p["ci_high"] is None for p in arm["per_position"])
    assert out["comparisons"] == []


def test_plan_on_deterministic_boots_says_so(tmp_path: Path) -> None:
    from bench.stats import plan_from_results

    r = load_results(_identical_boots(tmp_path, 0))
    p = plan_from_results(r.probes, r.boots, r.manifest, effect=0.01)
    assert p["between_boot_sd"] == 0 and p["boots_per_arm"] == 2
    assert p["components"]["sigma2_boot"] == 0 and "deterministic" in p["note"]
