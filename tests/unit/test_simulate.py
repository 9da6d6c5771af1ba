"""The generative model of simulated results: schemas, round trip through the store, magnitudes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from bench.records import BOOT_SCHEMA, PROBE_SCHEMA
from bench.simulate import (
    HeldFixed,
    SimParams,
    draw_prompt_set,
    mu_for,
    simulate_boot_totals,
    simulate_counts,
    simulate_frames,
    simulate_results,
)
from bench.store import load_results


def test_results_directory_round_trips_through_the_store(tmp_path: Path) -> None:
    root = simulate_results(
        tmp_path / "r", {"a": 0.0, "b": 0.1}, boots=3, prompts=20, failed_boots={"a": 1, "b": 0}
    )
    r = load_results(root)
    assert r.manifest.baseline == "a" and r.manifest.arm_names() == ["a", "b"]
    assert r.manifest.definition("b") == {"simulated_delta": 0.1}
    assert r.manifest.margins == {
        "acceptance_pos0": 0.005,
        "mean_accepted_length": 0.02,
        "output_tokens_per_s": 0.02,
        "request_mean_accepted_length": 0.02,
    }
    assert r.manifest.experiment_section().alpha == 0.05
    assert len(r.boots) == 7 and (r.boots["status"] == "failed").sum() == 1
    assert len(r.probes) == 6 * 20
    # the stored tables convert to the store schemas without loss
    pa.Table.from_pandas(r.probes[PROBE_SCHEMA.names], schema=PROBE_SCHEMA, preserve_index=False)
    pa.Table.from_pandas(r.boots[BOOT_SCHEMA.names], schema=BOOT_SCHEMA, preserve_index=False)
    # a boot row's /metrics delta equals the sum over its probes (docs/results.md)
    ok = r.boots[r.boots["status"] == "ok"].set_index("boot_id")
    sums = r.probes.groupby("boot_id")[["num_drafts", "num_accepted_tokens"]].sum()
    assert (sums["num_drafts"] == ok.loc[sums.index, "num_drafts"]).all()
    assert (sums["num_accepted_tokens"] == ok.loc[sums.index, "num_accepted_tokens"]).all()
    per_pos = np.stack(r.probes["accepted_per_pos"].to_numpy())
    assert per_pos.shape[1] == 4 and (np.diff(per_pos, axis=1) <= 0).all()  # cumulative
    assert (per_pos.sum(axis=1) == r.probes["num_accepted_tokens"]).all()
    assert (r.probes["num_draft_tokens"] == 4 * r.probes["num_drafts"]).all()


def test_default_parameters_give_the_documented_magnitudes() -> None:
    rng = np.random.default_rng(0)
    drafts, acc = simulate_boot_totals(rng, [0.0], 40, 100, SimParams(), replicates=20)
    pos0 = acc[..., 0] / drafts
    length = 1 + acc.sum(axis=-1) / drafts
    # the model's defaults: pos0 ~0.78, mean length ~3.19, between-boot SD ~0.008 / ~0.038
    assert 0.74 < pos0.mean() < 0.84 and 3.0 < length.mean() < 3.45
    assert 0.004 < pos0.std(axis=-1, ddof=1).mean() < 0.014
    assert 0.02 < length.std(axis=-1, ddof=1).mean() < 0.06


def test_arm_effect_and_prompt_set_are_honoured() -> None:
    rng = np.random.default_rng(1)
    params = SimParams(sigma_boot=0.0)
    ps = draw_prompt_set(rng, 2, 50, params)
    d, a, length = simulate_counts(rng, [0.0, 0.5], 8, 50, params, 3, HeldFixed(ps))
    assert d.shape == (3, 2, 8, 50) and a.shape == (3, 2, 8, 50, 4)
    assert np.allclose(length, ps.length)  # the fixed probe set is reused
    pos0 = a[..., 0].sum(axis=(2, 3)) / d.sum(axis=(2, 3))
    assert (pos0[:, 1] > pos0[:, 0] + 0.03).all()
    assert (d >= 1).all() and (a[..., 0] <= d).all()


def test_positions_and_mu() -> None:
    assert mu_for(2) == (1.65, 1.33) and mu_for(6)[-1] == 1.33
    probes, boots = simulate_frames({"x": 0.0}, boots=2, prompts=5, params=SimParams(mu=mu_for(8)))
    assert {len(x) for x in probes["accepted_per_pos"]} == {8}
    assert set(boots["num_speculative_tokens"]) == {8}


@pytest.mark.parametrize("boots", [{"a": 2, "b": 4}])
def test_unequal_boot_counts(tmp_path: Path, boots: dict[str, int]) -> None:
    r = load_results(simulate_results(tmp_path / "u", {"a": 0.0, "b": 0.0}, boots=boots))
    assert r.boots.groupby("arm").size().to_dict() == boots
    assert list(r.boots["order"]) == sorted(r.boots["order"])


def test_departures_from_the_base_model_are_what_they_say() -> None:
    """Unequal work per boot, one 20x boot, heavy-tailed boot effects, unequal variances."""
    rng = np.random.default_rng(3)
    base, _ = simulate_boot_totals(rng, [0.0], 6, 50, SimParams(), replicates=200)
    out, _ = simulate_boot_totals(rng, [0.0], 6, 50, SimParams(work_outlier=20.0), replicates=200)
    ratio = out[:, 0, 0] / out[:, 0, 1:].mean(axis=1)
    assert 15 < np.median(ratio) < 25  # boot 0 carries ~20x the drafts
    assert np.median(base[:, 0, 0] / base[:, 0, 1:].mean(axis=1)) == pytest.approx(1, abs=0.05)
    spread, _ = simulate_boot_totals(rng, [0.0], 6, 50, SimParams(work_sigma=1.5), replicates=200)
    log_sd = np.log(spread[:, 0]).std(axis=1, ddof=1).mean()
    assert 1.2 < log_sd < 1.8
    # Boot effects: Student t3 keeps the SD but has heavier tails than the normal.
    from scipy import stats as st

    from bench.simulate import boot_effects

    t3 = boot_effects(rng, SimParams(boot_df=3.0), (1, 1, 200_000)).ravel()
    normal = boot_effects(rng, SimParams(), (1, 1, 200_000)).ravel()
    assert t3.std() == pytest.approx(0.03, rel=0.1) and normal.std() == pytest.approx(
        0.03, rel=0.02
    )
    assert st.kurtosis(t3) > 3 and abs(st.kurtosis(normal)) < 0.1
    d, a = simulate_boot_totals(
        rng, [0.0, 0.0], 40, 100, SimParams(arm_boot_scale=(1.0, 4.0)), replicates=20
    )
    sd = (a[..., 0] / d).std(axis=-1, ddof=1).mean(axis=0)
    assert sd[1] > 2 * sd[0]
