"""Arms whose boots are not one population: the rule's false flags and power by simulation
through the product's code (`mode_split`, which `analyze` runs per arm and metric), an arm
with one broken boot found and named in `analyze --json`, its note and figure, and
`--exclude-boot`."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from stats_calib_helpers import at_most, replicates

from bench.cli import run
from bench.report import analyze_results
from bench.report.figures import plot_boot_strip
from bench.simulate import simulate_results, simulate_run
from bench.stats.describe import boot_modes, mode_split
from bench.stats.inputs import ArmData, arm_data
from bench.store import load_results


@pytest.mark.parametrize("boots", [4, 6, 10])
def test_one_population_is_flagged_at_most_alpha_of_the_time(boots: int) -> None:
    rng, reps = np.random.default_rng(boots), replicates(4000)
    flagged = np.mean([mode_split(rng.standard_normal(boots), 0.05)[0].any() for _ in range(reps)])
    print(f"one normal population, B={boots}: flagged {flagged:.4f} ({reps} replicates)")
    assert flagged <= at_most(0.05, reps)


# 200 runs each: a rate of alpha + 3 MCSE (0.096) fails, and stays below 2 alpha
@pytest.mark.parametrize(("boots", "reps"), [(4, 200), (6, 200), (10, 200), (30, 200)])
def test_well_behaved_simulated_arms_are_flagged_at_most_alpha_per_arm(
    boots: int, reps: int
) -> None:
    """The generative model's boot values (ratios of sums over probes), every metric the
    arm is tested on: one population is flagged at most α per arm (+ 2 MCSE)."""
    flagged = 0
    for seed in range(reps):
        run_ = simulate_run({"a": 0.0}, boots=boots, prompts=40, seed=1000 * boots + seed)
        ad = arm_data(run_.probes, run_.boots_frame, ["a"], None).arms["a"]
        flagged += any(m.modes > 1 for m in boot_modes(ad, 0.05))
    assert flagged / reps <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / reps)


def _exact_arm(boots: int, accepted: np.ndarray | None = None) -> ArmData:
    """Deterministic boots: every boot the same counts on 20 probes (K = 2)."""
    drafts = np.tile(np.arange(10.0, 30.0), (boots, 1))
    acc = np.tile(np.round(np.arange(10.0, 30.0) * 1.3), (boots, 1))
    if accepted is not None:
        acc = accepted
    pos = np.stack([np.minimum(acc, drafts), np.maximum(acc - drafts, 0)], axis=2)
    return ArmData("a", [f"a-b{i:03d}" for i in range(boots)], drafts, acc, pos)


def test_a_one_token_difference_among_exact_boots_is_no_mode() -> None:
    """Six identical boots and one that accepted one token less on one probe, or skipped
    drafting on one request: rounding, not a mode. A boot at half the acceptance is one."""
    arm = _exact_arm(7)
    one_token = arm.accepted.copy()
    one_token[-1, 3] -= 1
    assert not any(m.modes > 1 for m in boot_modes(_exact_arm(7, one_token), 0.05))
    no_draft = _exact_arm(7)
    no_draft.drafts[-1, 5] = 0.0
    no_draft.accepted[-1, 5] = 0.0
    no_draft.per_pos[-1, 5] = 0.0
    assert not any(m.modes > 1 for m in boot_modes(no_draft, 0.05))
    half = arm.accepted.copy()
    half[-1] = np.round(half[-1] / 2)
    modes = [m for m in boot_modes(_exact_arm(7, half), 0.05) if m.modes > 1]
    assert modes and all(m.other_boots == ["a-b006"] for m in modes)


def test_one_boot_in_a_second_mode_is_found_at_six_boots() -> None:
    rng = np.random.default_rng(7)
    hits = [
        mode_split(np.concatenate([rng.standard_normal(5), [10 + rng.standard_normal()]]), 0.05)
        for _ in range(2000)
    ]
    assert np.mean([f[-1] for f, _ in hits]) >= 0.95  # the apart boot, named
    assert np.mean([f[:-1].any() for f, _ in hits]) <= 0.05  # the others stay in


def test_a_broken_boot_is_named_in_the_analysis_and_can_be_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hosts = {"base": ["h"] * 6, "fix": ["h"] * 5 + ["broken"]}
    root = simulate_results(
        tmp_path / "r", {"base": 0.0, "fix": 0.0}, boots=6, prompts=60, hosts=hosts,
        host_effect={"broken": -3.0},
    )  # fmt: skip
    assert run(["analyze", str(root), "--json", "--resamples", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    fix = next(a for a in out["arms"] if a["arm"] == "fix")
    pos0 = next(m for m in fix["modes"] if m["metric"] == "acceptance_pos0")
    assert pos0["modes"] == 2 and len(pos0["other_boots"]) == 1
    broken = pos0["other_boots"][0]
    assert broken.startswith("fix__b005")
    assert any(n.startswith("arm fix: 2 modes across boots") and broken in n for n in out["notes"])
    base = next(a for a in out["arms"] if a["arm"] == "base")
    assert all(m["modes"] == 1 for m in base["modes"])
    strip = plot_boot_strip(analyze_results(load_results(root)))
    rings = [ln for ax in strip.axes for ln in ax.get_lines() if ln.get_gid() == "apart"]
    assert sum(len(ln.get_xdata()) for ln in rings) >= 1  # the boot apart, ringed
    assert run(["report", str(root)]) == 0  # the report's answer says it beside the verdicts
    answer = (root / "report" / "report.md").read_text().split("## Verdicts")[0]
    assert "**fix**: 2 modes across boots" in answer and broken in answer
    capsys.readouterr()
    assert run(["analyze", str(root), "--json", "--resamples", "0", "--exclude-boot", broken]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["excluded_boots"] == [broken] and broken in out["notes"][0]
    fix = next(a for a in out["arms"] if a["arm"] == "fix")
    assert fix["boots"] == 5 and all(m["modes"] == 1 for m in fix["modes"])
    assert run(["report", str(root), "--exclude-boot", broken]) == 0
    md = (root / "report" / "report.md").read_text()
    assert f"boots left out by --exclude-boot: {broken}" in md


def test_a_boot_whose_drafter_proposes_on_few_requests_lies_apart() -> None:
    run_ = simulate_run({"a": 0.0}, boots=6, prompts=40, seed=3)
    ad = arm_data(run_.probes, run_.boots_frame, ["a"], None).arms["a"]
    drafts = ad.drafts.copy()
    drafts[2, ::3] = 0  # boot 2 drafted on two thirds of its requests only
    modes = {m.metric: m for m in boot_modes(replace(ad, drafts=drafts), 0.05)}
    share = modes["requests_drafted"]
    assert share.modes == 2 and share.other_boots == [ad.boot_ids[2]]
    assert all(m.modes == 1 for m in boot_modes(ad, 0.05))  # untouched: one population
