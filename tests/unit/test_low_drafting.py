"""Boots that drafted on too few of their requests: kept out of the acceptance verdicts,
counted in tokens/s, and said; an arm all of whose boots draft rarely is said, not emptied."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench import stats
from bench.cli import run
from bench.records import SPEED_METRIC, Results
from bench.simulate import simulate_results, simulate_run, simulated_manifest
from bench.store import load_results

ARMS = {"a": 0.0, "b": 0.2}


def _silenced(probes: pd.DataFrame, boot_id: str, share_kept: float) -> pd.DataFrame:
    """`boot_id`'s rows with no drafts on all but `share_kept` of its requests (a drafter that
    proposes only sometimes); every other row as it was."""
    out = probes.copy()
    rows = np.flatnonzero((out["boot_id"] == boot_id).to_numpy())
    silent = rows[round(share_kept * rows.size) :]
    k = len(out.at[rows[0], "accepted_per_pos"])
    for i in silent:
        for col in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
            out.at[i, col] = 0
        out.at[i, "accepted_per_pos"] = [0] * k
        out.at[i, "acceptance_histogram"] = [0] * (k + 1)
        out.at[i, "drafted_per_pos"] = [0] * k
    return out


def _results(share_kept: float, boot_ids: list[str]) -> Results:
    sim = simulate_run(ARMS, boots=5, prompts=40, seed=3)
    probes = sim.probes
    for b in boot_ids:
        probes = _silenced(probes, b, share_kept)
    return Results(simulated_manifest(ARMS, boots=5, prompts=40), sim.boots_frame, probes)


def _analysis(res: Results, share: float = 0.5) -> stats.Analysis:
    return stats.analyze(res, stats.AnalysisOptions(n_resamples=0, min_drafting_share=share))


def test_a_boot_drafting_on_few_requests_leaves_acceptance_and_stays_in_speed() -> None:
    low_id = "b__b002__a1"
    res = _results(0.3, [low_id])
    out = _analysis(res)
    b = next(e for e in out.arms if e.arm == "b")
    assert [x.boot_id for x in b.low_drafting] == [low_id] and b.low_drafting[0].share == 0.3
    assert b.boots == 4 and low_id not in [p.boot_id for p in b.per_boot]
    # acceptance: exactly the analysis without that boot; speed: exactly the one with it
    without = stats.analyze(res, stats.AnalysisOptions(n_resamples=0, exclude_boots=(low_id,)))
    every = _analysis(res, share=0.0)
    key = ("b", "acceptance_pos0")
    pick = {(c.arm, c.metric): c for c in out.comparisons}
    assert pick[key].difference == pytest.approx(
        next(c.difference for c in without.comparisons if (c.arm, c.metric) == key)
    )
    speed = next(c for c in every.comparisons if (c.arm, c.metric) == ("b", SPEED_METRIC))
    assert pick["b", SPEED_METRIC].difference == pytest.approx(speed.difference)
    assert (
        b.metrics[SPEED_METRIC] == next(e for e in every.arms if e.arm == "b").metrics[SPEED_METRIC]
    )
    assert any(low_id in n and "kept out of the acceptance" in n for n in out.notes)
    assert not next(e for e in every.arms if e.arm == "b").low_drafting  # 0: never


def test_an_arm_whose_every_boot_drafts_rarely_is_said_not_emptied() -> None:
    ids = [f"b__b{i:03d}__a1" for i in range(5)]
    out = _analysis(_results(0.25, ids))
    b = next(e for e in out.arms if e.arm == "b")
    assert b.boots == 5 and not b.low_drafting
    assert any("every boot of b drafted on fewer than 50%" in n for n in out.notes)


def test_the_cli_takes_the_share_and_refuses_a_bad_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = simulate_results(tmp_path / "exp", ARMS, boots=3, prompts=10)
    assert load_results(root).probes["num_drafts"].gt(0).all()
    assert run(["analyze", str(root), "--json", "--resamples", "0"]) == 0
    assert all(not a["low_drafting"] for a in json.loads(capsys.readouterr().out)["arms"])
    assert run(["analyze", str(root), "--min-drafting-share", "1.5"]) == 2
    err = capsys.readouterr().err
    assert "--min-drafting-share" in err and len(err.strip().splitlines()) == 1


def test_a_boot_that_drafted_nothing_is_left_out_of_acceptance_and_timed() -> None:
    none_id = "b__b001__a1"
    res = _results(0.0, [none_id])
    out = _analysis(res, share=0.0)  # left out at any share: it has no acceptance at all
    b = next(e for e in out.arms if e.arm == "b")
    assert [(x.boot_id, x.share) for x in b.low_drafting] == [(none_id, 0.0)] and b.boots == 4
    timed = stats.analyze(res.with_frames(res.boots, res.probes), stats.AnalysisOptions(
        n_resamples=0, exclude_boots=(none_id,)))  # fmt: skip
    assert (
        b.metrics[SPEED_METRIC].estimate
        != next(e for e in timed.arms if e.arm == "b").metrics[SPEED_METRIC].estimate
    )  # its speed counts
    # an arm whose every boot drafted nothing: no acceptance verdict, its speed still timed
    out = _analysis(_results(0.0, [f"b__b{i:03d}__a1" for i in range(5)]))
    b = next(e for e in out.arms if e.arm == "b")
    assert b.boots == 0 and len(b.low_drafting) == 5
    assert b.metrics[SPEED_METRIC].estimate is not None
    assert {c.verdict for c in out.comparisons if c.metric != SPEED_METRIC} == {"inconclusive"}
    json.dumps(out.to_json(), allow_nan=False)


def test_the_boot_is_named_in_the_tracker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking import MlflowClient

    from bench.simulate import SimRun, write_run
    from bench.store import ResultsWriter

    monkeypatch.chdir(tmp_path)  # a sqlite store keeps its artifacts in ./mlruns
    res = _results(0.0, ["b__b001__a1"])
    sim = simulate_run(ARMS, boots=5, prompts=40, seed=3)
    write_run(SimRun(res.probes, sim.boots), ResultsWriter.create(tmp_path / "r", res.manifest))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert run(["export", "mlflow", str(tmp_path / "r"), "--tracking-uri", uri]) == 0
    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    b = next(r for r in runs if r.data.tags.get("mlflow.runName") == "b")
    assert b.data.tags["boots_low_drafting"] == "b__b001__a1 (0%)"
    capsys.readouterr()


def test_the_reports_answer_says_it_beside_the_verdicts() -> None:
    from bench.report.tables import headlines

    res = _results(0.0, ["b__b001__a1"])
    said = headlines(res, _analysis(res))
    assert said[-1].startswith("**b**: 1 boot(s) drafted on fewer than 50%")
    assert "b__b001__a1 (0% of 40)" in said[-1]
    assert sum("**b**" in x for x in said) == 1 + 2  # the flag, and b's 2 primary verdicts
