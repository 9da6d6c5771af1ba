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
from bench.records import SPEED_METRIC, Results, boot_file_stem
from bench.simulate import (
    SimRun,
    simulate_frames,
    simulate_results,
    simulate_run,
    simulated_manifest,
    write_run,
)
from bench.stats import AnalysisOptions
from bench.stats.methods import (
    VERDICTS,
    boots_needed,
    estimate,
    family,
    holm,
    mde,
    obf_boundaries,
    permutation_test,
    verdict_codes,
)
from bench.store import load_results

DESIGN_TOP = {"schema_version", "experiment", "alpha", "arms", "comparisons", "variance_components"}
DESIGN_ARM = {"arm", "boots", "failed_boots", "metrics", "per_position"}
DESIGN_METRIC = {"estimate", "ci_low", "ci_high", "between_boot_sd"}
DESIGN_POSITION = {"position", "estimate", "ci_low", "ci_high"}
# The contract's comparison keys, in the order docs/results.md gives them (other tools read
# them first); written out here, not taken from the model, so a change to the model fails.
DESIGN_ORDER = (
    "arm", "baseline", "metric", "difference", "ci_low", "ci_high", "p_value", "p_adjusted",
    "method", "margin", "verdict", "mde", "boots_needed",
)  # fmt: skip
DESIGN_COMPARISON = set(DESIGN_ORDER)


def _analyze(root: Path, **opts: object) -> dict:  # type: ignore[type-arg]
    """The analysis as `analyze --json` prints it."""
    r = load_results(root)
    out = stats.analyze(r, AnalysisOptions(n_resamples=2000, **opts))  # type: ignore[arg-type]
    return out.to_json()


def _primary(out: dict) -> list[dict]:  # type: ignore[type-arg]
    return [c for c in out["comparisons"] if c["family"] == "primary"]


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
        assert list(a["metrics"]) == [
            "acceptance_pos0", "mean_accepted_length", SPEED_METRIC, "request_mean_accepted_length"
        ]  # fmt: skip
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
    # the primary family first (arm-major), then speed: secondary, its own family
    assert [(c["arm"], c["metric"], c["family"]) for c in out["comparisons"]] == [
        ("fix", "acceptance_pos0", "primary"),
        ("fix", "mean_accepted_length", "primary"),
        ("same", "acceptance_pos0", "primary"),
        ("same", "mean_accepted_length", "primary"),
        ("fix", SPEED_METRIC, "secondary"),
        ("same", SPEED_METRIC, "secondary"),
        ("fix", "request_mean_accepted_length", "secondary"),
        ("same", "request_mean_accepted_length", "secondary"),
    ]
    assert out["primary_metrics"] == ["acceptance_pos0", "mean_accepted_length"]
    for c in out["comparisons"]:
        assert set(c) >= DESIGN_COMPARISON
        assert tuple(c)[: len(DESIGN_ORDER)] == DESIGN_ORDER
        assert c["verdict"] in VERDICTS and c["why"]
        assert c["p_adjusted"] >= c["p_value"]
    fix = [c for c in out["comparisons"] if c["arm"] == "fix" and c["family"] == "primary"]
    assert {c["verdict"] for c in fix} == {"improved"}  # a large true effect


def _boot_sums(root: Path) -> pd.DataFrame:
    r = load_results(root)
    pr = r.probes.assign(a0=r.probes["accepted_per_pos"].map(lambda x: float(x[0])))
    return pr.groupby(["arm", "boot"])[["a0", "num_drafts", "num_accepted_tokens"]].sum()


def _jackknife(num: np.ndarray, den: np.ndarray) -> tuple[float, float, float]:
    """Ratio of sums, delete-one-boot jackknife SE and min(B, B_eff) - 1, by loops."""
    b = len(num)
    loo = [(num.sum() - num[i]) / (den.sum() - den[i]) for i in range(b)]
    mean = sum(loo) / b
    se = np.sqrt((b - 1) / b * sum((x - mean) ** 2 for x in loo))
    b_eff = den.sum() ** 2 / (den**2).sum()
    return num.sum() / den.sum(), float(se), min(b, b_eff) - 1


def test_estimates_are_ratio_of_sums_and_welch(three_arms: Path) -> None:
    """Recomputed by hand: ratio of sums, jackknife SE per arm, Welch-Satterthwaite df."""
    out = _analyze(three_arms)
    sums = _boot_sums(three_arms)
    base, fix = sums.loc["base"], sums.loc["fix"]
    pos0 = out["arms"][0]["metrics"]["acceptance_pos0"]
    assert pos0["estimate"] == pytest.approx(base["a0"].sum() / base["num_drafts"].sum())
    length = out["arms"][0]["metrics"]["mean_accepted_length"]
    assert length["estimate"] == pytest.approx(
        1 + base["num_accepted_tokens"].sum() / base["num_drafts"].sum()
    )
    ri, sei, dfi = _jackknife(base["a0"].to_numpy(), base["num_drafts"].to_numpy())
    rj, sej, dfj = _jackknife(fix["a0"].to_numpy(), fix["num_drafts"].to_numpy())
    assert pos0["se"] == pytest.approx(sei, rel=1e-9) and pos0["df"] == pytest.approx(dfi)
    c = out["comparisons"][0]
    assert (c["arm"], c["metric"]) == ("fix", "acceptance_pos0")
    se = np.hypot(sei, sej)
    df = se**4 / (sei**4 / dfi + sej**4 / dfj)
    assert c["difference"] == pytest.approx(rj - ri)
    assert c["se"] == pytest.approx(se, rel=1e-9) and c["df"] == pytest.approx(df, rel=1e-9)
    assert c["p_value"] == pytest.approx(2 * st.t.sf(abs(rj - ri) / se, df), rel=1e-9)
    half = st.t.ppf(0.975, df) * se
    assert [c["ci_low"], c["ci_high"]] == pytest.approx([rj - ri - half, rj - ri + half])


def test_jackknife_equals_linearized_se_with_equal_work() -> None:
    """With equal drafts per boot the jackknife SE is the linearized one (docs/statistics.md)."""
    den = np.full(4, 1000.0)
    num = np.array([700.0, 712, 695, 705])
    ratio = num.sum() / den.sum()
    z = (num - ratio * den) / den.mean()
    e = estimate(num, den)
    assert float(e.se) == pytest.approx(z.std(ddof=1) / 2, rel=1e-12)
    assert float(e.df) == pytest.approx(3.0) and float(e.b_eff) == pytest.approx(4.0)


def test_analyze_agrees_with_vectorized_core(three_arms: Path) -> None:
    """Calibration runs estimate + family on arrays; analyze must give identical numbers."""
    out = _analyze(three_arms)
    s = _boot_sums(three_arms)
    est = {
        a: {
            "acceptance_pos0": estimate(
                s.loc[a, "a0"].to_numpy(), s.loc[a, "num_drafts"].to_numpy()
            ),
            "mean_accepted_length": estimate(
                s.loc[a, "num_accepted_tokens"].to_numpy(), s.loc[a, "num_drafts"].to_numpy()
            ),
        }
        for a in ("base", "fix", "same")
    }
    margins = {"acceptance_pos0": 0.005, "mean_accepted_length": 0.02}
    pairs = [(est["base"][m], est[a][m], margins[m]) for a in ("fix", "same") for m in margins]
    f = family(pairs, 0.05)
    for i, c in enumerate(_primary(out)):
        assert (c["ci_low"], c["ci_high"]) == pytest.approx((float(f.lo[i]), float(f.hi[i])))
        assert c["tost_ci"] == pytest.approx([float(f.lo2[i]), float(f.hi2[i])])
        assert c["verdict_ci"] == pytest.approx([float(f.v_lo[i]), float(f.v_hi[i])])
        assert c["p_adjusted"] == pytest.approx(float(f.p_adj[i]))
        assert c["verdict"] == VERDICTS[int(f.code[i])]


def test_unreplicated_is_inconclusive_unless_prior(tmp_path: Path) -> None:
    root = simulate_results(tmp_path / "b1", {"a": 0.0, "b": 0.5}, boots=1)
    out = _analyze(root)
    for c in out["comparisons"]:
        assert c["verdict"] == "inconclusive" and c["method"] == "unreplicated"
        assert c["ci_low"] is None and c["p_value"] is None
        assert "unreplicated" in c["why"]
    assert out["arms"][0]["metrics"]["acceptance_pos0"]["between_boot_sd"] is None
    prior = {"acceptance_pos0": 0.008, "mean_accepted_length": 0.038}
    out = _analyze(root, prior=stats.Prior.from_values(prior, df=4))
    for c in _primary(out):
        assert c["method"] == "welch_prior_sd" and c["ci_low"] is not None
        se = np.hypot(prior[c["metric"]], prior[c["metric"]])
        # One SD estimate on 4 df serves both sides: 4 df (Welch would claim 8 from two
        # independent estimates), a t quantile, not the normal one.
        assert c["df"] == pytest.approx(4.0)
        assert c["ci_high"] - c["ci_low"] == pytest.approx(2 * st.t.ppf(0.975, 4) * se)
    # delta 0.5 on the logit scale is a big effect: the prior makes it decidable
    assert {c["verdict"] for c in _primary(out)} == {"improved"}
    # speed has no prior: still unreplicated
    assert {c["method"] for c in out["comparisons"] if c["metric"] == SPEED_METRIC} == {
        "unreplicated"
    }


def _identical_boots(tmp_path: Path, shift: int, boots: int = 3) -> Path:
    """Greedy, deterministic kernels: every boot of an arm has identical counts."""
    run = simulate_run({"a": 0.0, "b": 0.0}, boots=boots, prompts=50, seed=3)
    first = run.probes[run.probes["boot"] == 0]
    rows = []
    for arm in ("a", "b"):
        for b in range(boots):
            rows.append(
                first[first["arm"] == "a"].assign(
                    arm=arm, boot=b, boot_id=boot_file_stem(arm, b, 1)
                )
            )
    probes = pd.concat(rows, ignore_index=True)
    # +shift accepted at position 0 wherever a probe has room for it (A_0 < drafts)
    first_pos = np.array([x[0] for x in probes["accepted_per_pos"]])
    room = first_pos < probes["num_drafts"].to_numpy()
    bmask = (probes["arm"] == "b").to_numpy() & room
    probes.loc[bmask, "accepted_per_pos"] = probes.loc[bmask, "accepted_per_pos"].map(
        lambda x: [x[0] + shift, *x[1:]]
    )
    probes.loc[bmask, "num_accepted_tokens"] += shift
    from bench.store import ResultsWriter

    root = tmp_path / f"det{shift}-{boots}"
    write_run(
        SimRun(probes, run.boots), ResultsWriter.create(root, simulated_manifest({"a": 0, "b": 0}))
    )
    return root


def test_identical_boots_are_deterministic_not_infinitely_significant(tmp_path: Path) -> None:
    out = _analyze(_identical_boots(tmp_path, 0))
    c = out["comparisons"][0]
    assert c["deterministic"] and c["difference"] == 0 and c["p_value"] is None
    assert c["verdict"] == "equivalent" and "deterministic" in c["why"]
    assert any("deterministic" in n for n in out["notes"])
    out = _analyze(_identical_boots(tmp_path, 1))  # +1 accepted at pos0 where there is room
    c = out["comparisons"][0]
    r = load_results(tmp_path / "det1-3")
    b0 = r.probes[r.probes["boot_id"] == "b__b000__a1"]
    a0 = r.probes[r.probes["boot_id"] == "a__b000__a1"]
    shifted = int(
        (b0["num_accepted_tokens"].to_numpy() - a0["num_accepted_tokens"].to_numpy()).sum()
    )
    assert shifted > 30
    drafts = b0["num_drafts"].sum()
    assert c["difference"] == pytest.approx(shifted / drafts)  # the exact difference
    assert c["ci_low"] == c["ci_high"] == c["difference"] and c["p_value"] is None
    assert c["verdict"] == ("improved" if shifted / drafts > 0.005 else "equivalent")
    json.dumps(out, allow_nan=False)


def test_a_zero_draft_boot_is_left_out_of_acceptance(tmp_path: Path) -> None:
    root = simulate_results(tmp_path / "z", {"a": 0.0, "b": 0.0}, boots=2)
    probes = load_results(root).probes
    probes.loc[probes["boot_id"] == "b__b001__a1", "num_drafts"] = 0
    r = load_results(root)
    out = stats.analyze(Results(probes=probes, boots=r.boots, manifest=r.manifest))
    b = next(e for e in out.arms if e.arm == "b")
    assert b.boots == 1 and [x.boot_id for x in b.low_drafting] == ["b__b001__a1"]


@pytest.mark.parametrize(
    "opts,field",
    [
        ({"baseline": "nope"}, "baseline"),
        ({"alpha": 0.6}, "alpha"),
        ({"alpha": 0.0}, "alpha"),
        ({"margins": {"acceptance_pos0": -1.0}}, "margins.acceptance_pos0"),
        ({"looks": [6, 3]}, "looks"),
    ],
)
def test_bad_options_are_user_errors_with_neutral_names(
    three_arms: Path,
    opts: dict,  # type: ignore[type-arg]
    field: str,
) -> None:
    """Statistics name the setting, not a command-line flag (bench.commands maps them)."""
    with pytest.raises(SpecabError) as exc:
        _analyze(three_arms, **opts)
    assert exc.value.field == field and exc.value.fix and "--" not in exc.value.one_line()


def test_bad_manifest_settings_name_the_manifest_field(three_arms: Path) -> None:
    r = load_results(three_arms)
    manifest = r.manifest.model_copy(update={"baseline": "gone"})
    with pytest.raises(SpecabError) as exc:
        stats.analyze(
            Results(probes=r.probes, boots=r.boots, manifest=manifest),
            options=AnalysisOptions(n_resamples=0),
            source=str(three_arms),
        )
    assert exc.value.field == "experiment.baseline"
    assert exc.value.file is not None and exc.value.file.endswith("manifest.json")


@pytest.mark.parametrize(
    "sd,df,field",
    [(-0.1, 4, "prior.between_boot_sd"), (0.008, None, "prior.df"), (0.008, 0, "prior.df")],
)
def test_prior_needs_a_valid_sd_and_its_df(sd: float, df: float | None, field: str) -> None:
    with pytest.raises(SpecabError) as exc:
        stats.Prior.from_values(sd, df)
    assert exc.value.field == field


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
    # Monte Carlo when relabelings outnumber the resamples: it estimates the exact p.
    num_i, num_j = rng.normal(700, 5, 6), rng.normal(705, 5, 6)
    den = np.full(6, 1e3)
    exact_p, _, is_exact = permutation_test(num_i, den, num_j, den, 10_000, rng)
    p, pmin, exact = permutation_test(num_i, den, num_j, den, 500, rng)  # C(12, 6) = 924
    assert is_exact and not exact and pmin == pytest.approx(1 / 501)
    assert abs(p - exact_p) <= 4 * np.sqrt(exact_p * (1 - exact_p) / 500) + 1 / 501
    assert 0.001 < exact_p < 0.5  # a case where the estimate has something to estimate


def test_obrien_fleming_boundaries_are_exact() -> None:
    """Closed form at the first look; every look spends exactly alpha(t_i) - alpha(t_{i-1}),
    checked with scipy's multivariate normal CDF (an independent method)."""
    from scipy.stats import multivariate_normal

    z, nominal = obf_boundaries((2, 4, 6, 8), 0.05)
    assert z[0] == pytest.approx(st.norm.ppf(0.975) / np.sqrt(0.25), abs=1e-9)  # 3.920
    assert round(z[0], 3) == 3.920
    assert z[0] > z[1] > z[2] > z[3] > 1.96 and all(a < 0.05 for a in nominal)
    t = np.array([0.25, 0.5, 0.75, 1.0])
    spent = 2 - 2 * st.norm.cdf(st.norm.ppf(0.975) / np.sqrt(t))
    for i in range(2, 5):
        cov = np.sqrt(np.minimum.outer(t[:i], t[:i]) / np.maximum.outer(t[:i], t[:i]))
        inside = multivariate_normal(np.zeros(i), cov).cdf(
            np.array(z[:i]), lower_limit=-np.array(z[:i]), rng=np.random.default_rng(0)
        )
        assert 1 - inside == pytest.approx(spent[i - 1], abs=5e-5)
    assert 1 - inside == pytest.approx(0.05, abs=5e-5)


def test_decide_reports_stop_or_continue(tmp_path: Path) -> None:
    root = simulate_results(tmp_path / "s", {"a": 0.0, "b": 1.0}, boots=4, looks=[3, 6, 10])
    r = load_results(root)
    d = stats.decide(r)  # looks from the manifest
    assert d.look == 1 and d.boots_per_arm == 4 and d.looks == (3, 6, 10)
    assert d.action == "stop" and {c.status for c in d.comparisons} == {"difference"}
    close = simulate_results(tmp_path / "c", {"a": 0.0, "b": 0.0}, boots=2)
    r = load_results(close)
    d = stats.decide(r, AnalysisOptions(looks=[3, 6, 10]))
    assert d.action == "continue" and d.next_look == 3 and d.look is None
    out = _analyze(root)
    assert out["sequential"]["action"] == "stop"


def test_split_arm_finds_drift_and_not_identical_boots(tmp_path: Path) -> None:
    """Boots 0-2 and 3-5 of one arm differ a lot (drift): the one split that separates them
    claims a difference, so at least 1 of the 10 splits does; identical boots never claim."""
    run = simulate_run({"a": 0.0, "b": 0.6}, boots=3, prompts=40, seed=4)
    moved = run.probes[run.probes["arm"] == "b"].assign(arm="a", boot=lambda d: d["boot"] + 3)
    moved["boot_id"] = [boot_file_stem("a", b, 1) for b in moved["boot"]]
    probes = pd.concat([run.probes[run.probes["arm"] == "a"], moved], ignore_index=True)
    boots = simulate_frames({"a": 0.0}, boots=6, prompts=40)[1]
    drift = stats.split_arm(
        Results(probes=probes, boots=boots, manifest=simulated_manifest({"a": 0.0})), "a"
    )
    assert drift.splits == comb(6, 3) // 2 and drift.exhaustive
    assert drift.any_claimed_rate >= 0.1
    r = load_results(_identical_boots(tmp_path, 0, boots=4))
    same = stats.split_arm(r, "a")
    assert same.any_claimed_rate == 0.0
    with pytest.raises(SpecabError, match="at least 4"):
        small = simulate_results(tmp_path / "small", {"a": 0.0}, boots=3)
        rs = load_results(small)
        stats.split_arm(rs, "a")


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
    res = stats.analyze(
        Results(probes=probes, boots=boots, manifest=simulated_manifest({"a": 0.0, "b": 0.0})),
        options=AnalysisOptions(n_resamples=200),
    )
    out = res.to_json()
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
    p = plan_from_results(r, effect=0.01)
    assert p.between_boot_sd == 0 and p.boots_per_arm == 2
    assert p.components is not None and p.components.sigma2_boot == 0
    assert p.note is not None and "deterministic" in p.note


@pytest.mark.parametrize("p_star", [20.6, 20.4, 35.0, 12.0])
def test_the_optimum_allocation_never_costs_more_than_todays(p_star: float) -> None:
    """Whole boots and a rounded P* can make the 'optimum' dearer than today's allocation
    (the issue saw it): today's is then reported as the optimum."""
    from bench.stats.describe import plan_boots_and_prompts
    from bench.stats.schema import PooledComponents

    boot_s, prompt_s = 30.0, 1.0
    ratio = p_star**2 / (boot_s / prompt_s)  # sigma2_res / sigma2_boot giving that P*
    pooled = PooledComponents(
        between_boot_sd=0.02, df=10.0, sigma2_boot=1e-4, sigma2_prompt=0.0,
        sigma2_res=1e-4 * ratio,
    )  # fmt: skip
    p = plan_boots_and_prompts(
        pooled, effect=0.01, alpha=0.025, power=0.8, prompts_now=20,
        boot_cost_s=boot_s, prompt_cost_s=prompt_s,
    )  # fmt: skip
    assert p.seconds_per_arm_now is not None and p.seconds_per_arm_at_optimum is not None
    assert p.seconds_per_arm_at_optimum <= p.seconds_per_arm_now
    if p.prompts_per_boot == 20:
        assert p.boots_per_arm_at_optimum == p.boots_per_arm
    if p.prompts_per_boot is not None and p.prompts_per_boot > 20:
        assert (
            p.note is not None and "add prompts to the probe sets or raise probes.passes" in p.note
        )


def test_resampling_weights_drawn_in_blocks_are_the_stream_of_one_draw() -> None:
    """The pigeonhole weights are drawn a block at a time to bound memory; they are the
    counts one int64 draw of every index gives, and the arms' draws follow in order."""
    from bench.stats.methods import pigeonhole_weights

    n_p, boots, m = 1100, [5, 7], 600  # more than one block of rows, odd sizes
    wp, wb = pigeonhole_weights(n_p, boots, m, np.random.default_rng(3))
    ref = np.random.default_rng(3)

    def counts(n: int) -> np.ndarray:
        idx = ref.integers(0, n, (m, n))
        return np.stack([np.bincount(row, minlength=n) for row in idx])

    assert np.array_equal(wp, counts(n_p)) and wp.dtype == np.float32
    assert all(np.array_equal(w, counts(b)) for w, b in zip(wb, boots, strict=True))
