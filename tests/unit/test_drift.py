"""Drift within a boot ([probes] passes): calibrated by simulation through the product's own
`drift`, and a known drift found with the right sign."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.records import DEFAULT_MARGINS
from bench.stats.describe import drift

MARGINS = dict(DEFAULT_MARGINS)
CLAIMS = {"improved", "regressed", "small_improvement", "small_regression"}


def _frames(
    rng: np.random.Generator, *, boots: int, passes: int, prompts: int, drift_per_pass: float
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """K = 1 counts: per (boot, pass, prompt) D steps, A accepted with a logistic rate that
    has boot and prompt effects and `drift_per_pass` on the logit; speed with boot noise."""
    rows = []
    prompt_fx = rng.normal(0, 0.8, prompts)
    for b in range(boots):
        boot_fx, speed_fx = rng.normal(0, 0.1), rng.normal(0, 0.05)
        for k in range(passes):
            for p in range(prompts):
                d = int(rng.poisson(20)) + 1
                rate = 1 / (1 + np.exp(-(1.0 + boot_fx + prompt_fx[p] + drift_per_pass * k)))
                a = int(rng.binomial(d, rate))
                tokens = d + a
                rows.append(
                    {
                        "arm": "x", "boot_id": f"x__b{b:03d}__a1", "pass_index": k,
                        "num_drafts": d, "num_accepted_tokens": a, "accepted_per_pos": [a],
                        "completion_tokens": tokens,
                        "latency_s": tokens * 0.005 * float(np.exp(speed_fx + rng.normal(0, 0.03))),
                    }
                )  # fmt: skip
    probes = pd.DataFrame(rows)
    ids = sorted(set(probes["boot_id"]))
    return probes, pd.DataFrame({"boot_id": ids, "status": ["ok"] * len(ids)})


@pytest.mark.slow
def test_no_drift_is_claimed_at_most_alpha_of_the_time() -> None:
    rng = np.random.default_rng(11)
    reps, claimed = 300, {m: 0 for m in MARGINS}
    for _ in range(reps):
        probes, boots = _frames(rng, boots=4, passes=2, prompts=12, drift_per_pass=0.0)
        for e in drift(probes, boots, ["x"], MARGINS, 0.05):
            claimed[e.metric] += e.verdict in CLAIMS
    mc = 3 * (0.05 * 0.95 / reps) ** 0.5
    assert all(n / reps <= 0.05 + mc for n in claimed.values()), claimed


def test_a_known_drift_is_found_with_its_sign_and_single_pass_runs_have_none() -> None:
    rng = np.random.default_rng(3)
    probes, boots = _frames(rng, boots=6, passes=3, prompts=20, drift_per_pass=-0.4)
    est = {e.metric: e for e in drift(probes, boots, ["x"], MARGINS, 0.05)}
    pos0 = est["acceptance_pos0"]
    assert (pos0.first_pass, pos0.last_pass, pos0.boots) == (0, 2, 6)
    assert pos0.verdict == "regressed" and pos0.ci_high is not None and pos0.ci_high < 0
    assert est["mean_accepted_length"].change < 0
    assert est["output_tokens_per_s"].scale == "relative"
    one = probes[probes["pass_index"] == 0]
    assert drift(one, boots, ["x"], MARGINS, 0.05) == []
    assert drift(probes.drop(columns="pass_index"), boots, ["x"], MARGINS, 0.05) == []


def test_report_draws_the_drift_figure() -> None:
    from bench.report.figures import plot_drift
    from bench.stats import Analysis

    rng = np.random.default_rng(5)
    probes, boots = _frames(rng, boots=3, passes=3, prompts=8, drift_per_pass=-0.3)
    est = drift(probes, boots, ["x"], MARGINS, 0.05)
    assert all(len(e.by_pass) == 3 for e in est)
    assert est[0].by_pass[0] > est[0].by_pass[-1]  # acceptance fell pass after pass
    fig = plot_drift(Analysis.model_construct(drift=est, arms=[], comparisons=[]))
    assert len(fig.axes) == 3 and all(ax.lines for ax in fig.axes)
