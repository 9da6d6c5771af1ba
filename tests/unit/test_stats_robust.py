"""Inputs a real run produces that once broke the statistics (issue: "a correct answer on every
input"): one speculative token, identical boots with rounding residue, very unequal work per
boot, B = 2, requested power, small-B simultaneous intervals, a prior SD with its df, Holm vs
the printed interval, sequential looks vs the table, arms on different probes. Each test
uses a hand-made case or a simulation with known truth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from bench import stats
from bench.errors import SpecabError
from bench.records import Results, boot_file_stem
from bench.simulate import (
    SimParams,
    simulate_boot_totals,
    simulate_frames,
    simulate_results,
    simulated_manifest,
)
from bench.stats import AnalysisOptions
from bench.stats.methods import CLAIMS, INCONCLUSIVE, Est, estimate, family
from bench.store import load_results


def _analyze(root: Path, **opts: Any) -> dict[str, Any]:
    r = load_results(root)
    return stats.analyze(r, AnalysisOptions(n_resamples=300, **opts)).to_json()


def test_one_speculative_token_works(tmp_path: Path) -> None:
    """K = 1 (MTP k=1) once crashed analyze with a 0-d covariance."""
    out = _analyze(simulate_results(tmp_path / "k1", {"a": 0.0, "b": 0.3}, boots=4, positions=1))
    for arm in out["arms"]:
        (pos,) = arm["per_position"]
        assert pos["method"] == "t" and pos["ci_low"] < pos["estimate"] < pos["ci_high"]
        pos0 = arm["metrics"]["acceptance_pos0"]
        # one position: the simultaneous interval is the plain t interval of pos0
        assert (pos["ci_low"], pos["ci_high"]) == pytest.approx((pos0["ci_low"], pos0["ci_high"]))
        length = arm["metrics"]["mean_accepted_length"]
        assert 1.0 <= length["ci_low"] < length["ci_high"] <= 2.0  # K = 1: at most 2 tokens
    assert out["per_position_comparisons"] == []
    assert {c["verdict"] for c in out["comparisons"] if c["family"] == "primary"} == {"improved"}


def test_identical_boots_are_deterministic_despite_rounding() -> None:
    """The linearization of identical boots leaves ~1e-17 in some data sets; `se == 0` then
    failed and a Welch test gave p = 0. Determinism is a relative tolerance."""
    rng = np.random.default_rng(5)
    residue = 0
    for _ in range(400):
        b = int(rng.integers(3, 8))
        d = float(rng.integers(1_000, 200_000))
        num, den = np.full(b, float(rng.integers(0, d))), np.full(b, d)
        ratio = num.sum() / den.sum()
        residue += bool(((num - ratio * den) / den.mean()).std(ddof=1) != 0)  # old test
        e = estimate(num, den)
        assert float(e.se) == 0.0
        f = family([(e, estimate(num.copy(), den.copy()), 0.005)], 0.05)
        assert bool(f.deterministic[0]) and np.isnan(f.p[0]) and int(f.code[0]) not in CLAIMS
    assert residue > 0  # the data really holds the rounding that fooled `se == 0`


def _residue(b: int, d: float, a0: float) -> float:
    """The first release's determinism test statistic: SD of linearized identical boots."""
    num, den = np.full(b, a0), np.full(b, d)
    return float(((num - num.sum() / den.sum() * den) / den.mean()).std(ddof=1))


def test_identical_boots_with_rounding_through_analyze() -> None:
    rng = np.random.default_rng(5)
    draws = (
        (int(rng.integers(3, 8)), float(d), float(rng.integers(d // 2, d)))
        for d in rng.integers(1_000, 200_000, 1_000)
    )
    b, d, a0 = next(x for x in draws if _residue(*x) != 0)  # ~3 % of data sets have one
    probes, boots = simulate_frames({"a": 0.0, "b": 0.0}, boots=b, prompts=1, seed=2)
    probes["num_drafts"] = int(d)
    per_pos = [int(a0) // 2**k for k in range(4)]
    probes["accepted_per_pos"] = [per_pos] * len(probes)
    probes["num_accepted_tokens"] = sum(per_pos)
    out = stats.analyze(
        Results(probes=probes, boots=boots, manifest=simulated_manifest({"a": 0.0, "b": 0.0})),
        options=AnalysisOptions(n_resamples=0),
    )
    for c in (c for c in out.comparisons if c.family == "primary"):
        assert c.deterministic and c.p_value is None and c.verdict == "equivalent"
        assert "deterministic" in c.why


def _old_linearized_fpr(num: np.ndarray, den: np.ndarray) -> float:
    """The first release's interval (linearized SE, B - 1 df), written out for comparison."""
    parts = []
    for arm in (0, 1):
        n, d = num[:, arm], den[:, arm]
        r = n.sum(-1) / d.sum(-1)
        z = (n - r[:, None] * d) / d.mean(-1, keepdims=True)
        parts.append((r, z.var(-1, ddof=1) / n.shape[-1]))
    (ri, vi), (rj, vj) = parts
    b = num.shape[-1]
    df = (vi + vj) ** 2 / (vi**2 / (b - 1) + vj**2 / (b - 1))
    return float(np.mean(np.abs(rj - ri) / np.sqrt(vi + vj) > st.t.ppf(0.975, df)))


def test_a_boot_with_most_of_the_work_cannot_hide_its_deviation() -> None:
    """A/A where boot 0 of each arm ran 20x the drafts: the old SE claimed a difference in
    about half the replicates; the jackknife SE with B_eff - 1 df stays below alpha."""
    reps, boots = 600, 5
    drafts, acc = simulate_boot_totals(
        np.random.default_rng(9), [0.0, 0.0], boots, 100, SimParams(work_outlier=20.0), reps
    )
    num, den = acc[..., 0].astype(float), drafts.astype(float)
    old = _old_linearized_fpr(num, den)
    f = family([(estimate(num[:, 0], den[:, 0]), estimate(num[:, 1], den[:, 1]), 0.005)], 0.05)
    new = float(np.mean((f.lo > 0) | (f.hi < 0)))
    limit = 0.05 + 2 * np.sqrt(0.05 * 0.95 / reps)
    print(f"one boot 20x work, B={boots}: old FPR {old:.3f}, jackknife + B_eff df {new:.3f}")
    assert old > 0.3 and new <= limit


def test_unequal_work_is_reported_and_widens_the_interval(tmp_path: Path) -> None:
    root = simulate_results(tmp_path / "w", {"a": 0.0, "b": 0.0}, boots=5, prompts=30)
    r = load_results(root)
    probes = r.probes.copy()
    big = probes["boot_id"] == boot_file_stem("a", 0, 1)
    for col in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
        probes.loc[big, col] *= 20  # the same work 20 times over, as one boot
    probes.loc[big, "accepted_per_pos"] = probes.loc[big, "accepted_per_pos"].map(
        lambda x: [20 * v for v in x]
    )
    out = stats.analyze(
        Results(probes=probes, boots=r.boots, manifest=r.manifest),
        options=AnalysisOptions(n_resamples=0),
    ).to_json()
    a = out["arms"][0]
    d = probes[probes["arm"] == "a"].groupby("boot")["num_drafts"].sum().to_numpy(float)
    b_eff = d.sum() ** 2 / (d**2).sum()
    assert a["effective_boots"] == pytest.approx(b_eff) and b_eff < 2
    assert a["metrics"]["acceptance_pos0"]["df"] == pytest.approx(b_eff - 1)
    assert any("unequal work per boot" in n and "arm a" in n for n in out["notes"])
    assert out["arms"][1]["metrics"]["acceptance_pos0"]["df"] == pytest.approx(4, abs=0.05)


def test_mde_exists_at_two_boots(tmp_path: Path) -> None:
    """Welch df < 2 at B = 2 once made mde null; it is (t_{1-a/2,df} + t_{power,df}) SE."""
    out = _analyze(simulate_results(tmp_path / "b2", {"a": 0.0, "b": 0.0}, boots=2))
    for c in out["comparisons"]:
        assert c["df"] < 2 and c["mde"] is not None
        want = (st.t.ppf(0.975, c["df"]) + st.t.ppf(0.8, c["df"])) * c["se"]
        # speed: computed on the log ratio, reported relative (ratio - 1)
        relative = c["scale"] == "relative"
        assert (np.log1p(c["mde"]) if relative else c["mde"]) == pytest.approx(want)


def test_boots_needed_honours_the_requested_power(tmp_path: Path) -> None:
    root = simulate_results(tmp_path / "p", {"a": 0.0, "b": 0.02}, boots=4)
    low, high = _analyze(root, power=0.8), _analyze(root, power=0.95)
    for c8, c95 in zip(low["comparisons"], high["comparisons"], strict=True):
        assert c95["boots_needed"] > c8["boots_needed"] and c95["mde"] > c8["mde"]
        sd, effect, n = (
            c95["between_boot_sd"],
            max(abs(c95["difference"]), c95["margin"]),
            c95["boots_needed"],
        )
        if c95["scale"] == "relative":  # speed: planned on the log scale of its SD
            effect = max(abs(np.log1p(c95["difference"])), np.log1p(c95["margin"]))

        # planned at Holm's first step: alpha over the comparisons of its family
        family = [
            c
            for c in high["comparisons"]
            if c["family"] == c95["family"]
            and (c["family"] == "primary" or c["metric"] == c95["metric"])
        ]
        q = 1 - 0.05 / len(family) / 2

        def planned(b: int, sd: float = sd, q: float = q) -> float:  # v = 2B - 2
            nu = 2 * b - 2
            return float((st.t.ppf(q, nu) + st.t.ppf(0.95, nu)) * sd * np.sqrt(2 / b))

        assert planned(n) <= effect < planned(n - 1)
    assert high["settings"]["power"] == 0.95


def test_small_b_positions_use_bonferroni_t(tmp_path: Path) -> None:
    """B - 1 < K: the correlation matrix is rank-deficient and max-|t| under-covers; the
    interval is then t_{1 - alpha/(2K), df} times the position's jackknife SE."""
    root = simulate_results(tmp_path / "s", {"a": 0.0}, boots=3, positions=4)
    out = _analyze(root)
    r = load_results(root)
    acc = np.stack(r.probes["accepted_per_pos"].to_numpy())
    per_boot = pd.DataFrame(acc).assign(boot=r.probes["boot"], d=r.probes["num_drafts"])
    sums = per_boot.groupby("boot").sum()
    d = sums["d"].to_numpy(float)
    df = min(3, d.sum() ** 2 / (d**2).sum()) - 1
    for k, pos in enumerate(out["arms"][0]["per_position"]):
        n = sums[k].to_numpy(float)
        loo = [(n.sum() - n[i]) / (d.sum() - d[i]) for i in range(3)]
        se = np.sqrt(2 / 3 * np.sum((np.array(loo) - np.mean(loo)) ** 2))
        assert pos["method"] == "bonferroni_t"
        assert (pos["ci_high"] - pos["ci_low"]) / 2 == pytest.approx(
            st.t.ppf(1 - 0.05 / 8, df) * se
        )


def test_prior_carries_its_df_and_can_come_from_an_aa_run(tmp_path: Path) -> None:
    aa = load_results(simulate_results(tmp_path / "aa", {"x": 0.0, "y": 0.0}, boots=5, seed=4))
    prior = stats.prior_from_results(aa, source="aa")
    aa_out = stats.analyze(aa, options=AnalysisOptions(n_resamples=0)).to_json()
    for m in ("acceptance_pos0", "mean_accepted_length"):
        sds = [a["metrics"][m]["between_boot_sd"] for a in aa_out["arms"]]
        dfs = [a["metrics"][m]["df"] for a in aa_out["arms"]]
        assert prior.df[m] == pytest.approx(sum(dfs)) and 7.9 < prior.df[m] <= 8
        pooled = np.sqrt(sum(d * s * s for s, d in zip(sds, dfs, strict=True)) / sum(dfs))
        assert prior.sd[m] == pytest.approx(pooled)
    one = simulate_results(tmp_path / "one", {"a": 0.0, "b": 0.0}, boots=1)
    out = _analyze(one, prior=prior)
    for c in (c for c in out["comparisons"] if c["family"] == "primary"):
        assert c["method"] == "welch_prior_sd"
        # both sides' SE is the one prior SD: its df, not Welch's doubling of two estimates
        assert c["df"] == pytest.approx(prior.df[c["metric"]])
    assert out["settings"]["prior"]["source"] == "aa"


@pytest.mark.slow
@pytest.mark.parametrize(("boots", "replicates"), [(1, 300), (2, 200)])
def test_a_matched_prior_keeps_false_claims_at_alpha(boots: int, replicates: int) -> None:
    """A/A runs of 1 and 2 boots per arm, each analyzed with a prior taken by
    `prior_from_results` from a fresh A/A run of the same design (which the design check
    lets through): any primary claim is false. The rate stays within alpha + 2 MCSE (sized
    so that alpha + 3 MCSE fails below 2 alpha); the 1,000-replicate measurement is
    benchmarks/bench_prior.py's."""
    arms = {"a": 0.0, "b": 0.0}

    def run_of(b: int, seed: int) -> Results:
        probes, frame = simulate_frames(arms, boots=b, prompts=40, seed=seed)
        return Results(manifest=simulated_manifest(arms, boots=b), boots=frame, probes=probes)

    hits = 0
    for i in range(replicates):
        target = run_of(boots, 2 * i + 1)
        prior = stats.prior_from_results(run_of(4, 2 * i), source="aa", target=target)
        result = stats.analyze(target, AnalysisOptions(n_resamples=0, prior=prior))
        hits += any(c.verdict in CLAIMS for c in result.comparisons if c.family == "primary")
    alpha = 0.05
    assert hits / replicates <= alpha + 2 * np.sqrt(alpha * (1 - alpha) / replicates)


def _est(ratio: float, se: float, df: float) -> Est:
    a = np.asarray
    return Est(a(ratio), a(se), a(se), a(df), a(df + 1.0), int(df) + 1, False)


def _with_p(p: float, se: float = 0.01, df: float = 10.0) -> tuple[Est, Est, float]:
    """A (baseline, arm, margin) pair whose Welch p is exactly p."""
    t = st.t.isf(p / 2, (2 * df))  # two equal sides: Welch df = 2 df
    return _est(0.5, se, df), _est(0.5 + t * se * np.sqrt(2), se, df), 0.001


def test_verdict_interval_is_holm_compatible() -> None:
    """Raw intervals can exclude 0 where Holm does not reject; the interval a verdict rests
    on (level alpha / (m - s)) excludes 0 exactly for the rejected comparisons."""
    f = family([_with_p(0.03), _with_p(0.04)], 0.05)
    assert f.p == pytest.approx([0.03, 0.04]) and f.p_adj == pytest.approx([0.06, 0.06])
    assert ((f.lo > 0) | (f.hi < 0)).all()  # raw: both "significant"
    assert f.level == pytest.approx([0.025, 0.025])
    assert ((f.v_lo <= 0) & (f.v_hi >= 0)).all() and (f.code == INCONCLUSIVE).all()
    f = family([_with_p(0.001), _with_p(0.03), _with_p(0.04)], 0.05)
    assert f.p_adj == pytest.approx([0.003, 0.06, 0.06])  # one rejected: s = 1, m = 3
    assert f.level == pytest.approx([0.025] * 3)
    assert list((f.v_lo > 0) | (f.v_hi < 0)) == [True, False, False]
    f = family([_with_p(0.001), _with_p(0.04)], 0.05)  # both rejected: level alpha
    assert f.level == pytest.approx([0.05, 0.05]) and ((f.v_lo > 0) | (f.v_hi < 0)).all()


def test_analyze_prints_the_interval_its_verdict_used(tmp_path: Path) -> None:
    out = _analyze(simulate_results(tmp_path / "h", {"a": 0.0, "b": 0.15, "c": 0.0}, boots=5))
    for c in out["comparisons"]:
        lo, hi = c["verdict_ci"]
        if c["verdict"] == "equivalent":
            assert c["verdict_ci_kind"] == "tost" and [lo, hi] == pytest.approx(c["tost_ci"])
            continue
        assert c["verdict_ci_kind"] == "holm" and lo <= c["ci_low"] and hi >= c["ci_high"]
        assert (lo > 0 or hi < 0) == (c["p_adjusted"] < 0.05)
        assert (c["verdict"] in ("improved", "regressed", "small_improvement",
                                 "small_regression")) == (lo > 0 or hi < 0)  # fmt: skip
        shown = f"{100 * lo:+.1f} %" if c["scale"] == "relative" else f"{lo:+.3f}"
        assert "Holm interval" in c["why"] and shown in c["why"]


def test_with_looks_the_table_is_the_sequential_decision(tmp_path: Path) -> None:
    root = simulate_results(tmp_path / "seq", {"a": 0.0, "b": 0.08}, boots=7)
    r = load_results(root)
    out = stats.analyze(
        r,
        options=AnalysisOptions(looks=[3, 6, 10], n_resamples=0),
    )
    seq = out.sequential
    assert seq is not None and seq.look == 2 and seq.nominal_alpha is not None
    first6 = r.probes[r.probes["boot"] < 6]
    sums = (
        first6.assign(a0=first6["accepted_per_pos"].map(lambda x: x[0]))
        .groupby("arm")[["a0", "num_drafts"]]
        .sum()
    )
    diff = sums.loc["b", "a0"] / sums.loc["b", "num_drafts"] - (
        sums.loc["a", "a0"] / sums.loc["a", "num_drafts"]
    )
    status = {"difference": CLAIMS, "equivalent": (4,), "undecided": (5,)}
    primary = [c for c in out.comparisons if c.family == "primary"]
    for c, row in zip(primary, seq.comparisons, strict=True):
        assert (c.arm, c.metric, c.verdict) == (row.arm, row.metric, row.verdict)
        from bench.stats import VERDICTS

        assert VERDICTS.index(c.verdict) in status[row.status]
        assert c.verdict_ci_kind == "holm_sequential" and c.verdict_ci_level is not None
        assert c.verdict_ci_level <= seq.nominal_alpha
    assert out.comparisons[0].difference == pytest.approx(diff)  # the look's 6 boots, not 7
    first_two = r.with_frames(r.boots[r.boots["boot"] < 2], r.probes[r.probes["boot"] < 2])
    early = stats.analyze(first_two, AnalysisOptions(looks=[3, 6], n_resamples=0))
    assert early.sequential is not None and early.sequential.action == "continue"
    assert {c.verdict for c in early.comparisons} == {"inconclusive"}
    assert all("first look" in c.why for c in early.comparisons)


def _two_sets(arms: dict[str, float], sets: dict[str, str], extra: dict[str, int] | None = None):  # type: ignore[no-untyped-def]
    probes, boots = simulate_frames(arms, boots=3, prompts=20, seed=1)
    probes["probe_set"] = probes["arm"].map(lambda a: sets.get(a, "sim"))
    for arm, n in (extra or {}).items():  # this arm's boots ran n more probes
        more = probes[
            (probes["arm"] == arm) & probes["probe_id"].isin([f"p{i:04d}" for i in range(n)])
        ]
        probes = pd.concat(
            [probes, more.assign(probe_id=more["probe_id"] + "x")], ignore_index=True
        )
    return probes, boots, simulated_manifest(arms)


def test_arms_on_different_probe_sets_are_refused() -> None:
    probes, boots, manifest = _two_sets({"a": 0.0, "b": 0.0}, {"a": "code", "b": "chat"})
    with pytest.raises(SpecabError) as exc:
        stats.analyze(
            Results(probes=probes, boots=boots, manifest=manifest),
            options=AnalysisOptions(n_resamples=0),
            source="r",
        )
    msg = exc.value.one_line()
    assert exc.value.field == "probes.probe_set" and "a: code" in msg and "b: chat" in msg


def test_boots_of_one_arm_on_different_sets_are_refused() -> None:
    probes, boots, manifest = _two_sets({"a": 0.0, "b": 0.0}, {})
    probes.loc[probes["boot_id"] == boot_file_stem("b", 2, 1), "probe_set"] = "other"
    with pytest.raises(
        SpecabError, match="boots of arm 'b' ran different probe sets: other vs sim"
    ):
        stats.analyze(
            Results(probes=probes, boots=boots, manifest=manifest),
            options=AnalysisOptions(n_resamples=0),
        )


def test_only_probes_every_boot_has_are_compared() -> None:
    probes, boots, manifest = _two_sets({"a": 0.0, "b": 0.0}, {}, extra={"b": 3})
    out = stats.analyze(
        Results(probes=probes, boots=boots, manifest=manifest),
        options=AnalysisOptions(n_resamples=0),
    )
    assert out.compared_probes == 20
    assert any("left out 3" in n and "3 of sim" in n for n in out.notes)
    common = probes[~probes["probe_id"].str.endswith("x")]
    base = stats.analyze(
        Results(probes=common, boots=boots, manifest=manifest),
        options=AnalysisOptions(n_resamples=0),
    )
    assert out.comparisons[0].difference == pytest.approx(base.comparisons[0].difference)
    assert base.notes == [] and base.compared_probes == 20
