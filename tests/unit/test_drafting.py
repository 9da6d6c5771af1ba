"""Variable draft lengths (ngram, dynamic speculation): drafted-per-position from vLLM's
per_step_drafted, both acceptance definitions, draft-length shares and the analysis note,
on simulated rows whose second arm drafts fewer than K tokens in some steps."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench import stats
from bench.errors import BootFailed
from bench.records import Results
from bench.report import draft_length_table
from bench.run.boot import drafted_per_position
from bench.simulate import simulate_run, simulated_manifest


def test_drafted_per_position_counts_steps_that_reached_each_position() -> None:
    assert drafted_per_position({"per_step_drafted": [4, 4, 2, 3]}, 4) == (4, 4, 3, 2)
    assert drafted_per_position({"per_step_drafted": [1]}, 4) == (1, 0, 0, 0)
    assert drafted_per_position({"acceptance_histogram": [1, 0]}, 1) is None  # no detail
    with pytest.raises(BootFailed, match=r"per_step_drafted outside 0\.\.4"):
        drafted_per_position({"per_step_drafted": [5]}, 4)


def _short_drafts(probes: pd.DataFrame, arm: str) -> pd.DataFrame:
    """Arm `arm` drafts only 2 tokens in half of its steps (counts stay consistent: nothing
    is accepted past a position that was not drafted)."""
    out = probes.copy()
    rows = out["arm"] == arm
    d = out.loc[rows, "num_drafts"].to_numpy()
    acc = np.array(out.loc[rows, "accepted_per_pos"].tolist())
    short = d // 2
    drafted = np.stack([d, d, d - short, d - short], axis=1)
    acc = np.minimum(acc, drafted)
    out.loc[rows, "drafted_per_pos"] = pd.Series(drafted.tolist(), index=out.index[rows])
    out.loc[rows, "accepted_per_pos"] = pd.Series(acc.tolist(), index=out.index[rows])
    out.loc[rows, "num_accepted_tokens"] = acc.sum(axis=1)
    out.loc[rows, "num_draft_tokens"] = drafted.sum(axis=1)
    out.loc[rows, "acceptance_histogram"] = None
    return out


def test_analysis_reports_both_definitions_and_notes_the_drafting() -> None:
    arms = {"model": 0.0, "lookup": 0.0}
    run = simulate_run(arms, boots=3, prompts=30, seed=2)
    probes = _short_drafts(run.probes, "lookup")
    a = stats.analyze(
        Results(
            probes=probes,
            boots=run.boots_frame,
            manifest=simulated_manifest(arms, boots=3, prompts=30),
        )
    )
    model, lookup = a.arm("model"), a.arm("lookup")
    assert model is not None and lookup is not None
    assert model.mean_draft_length == pytest.approx(4.0)
    assert all(p.drafted_share == 1 and p.among_drafted == p.estimate for p in model.per_position)
    rows = probes[probes["arm"] == "lookup"]
    acc = np.array(rows["accepted_per_pos"].tolist()).sum(axis=0)
    drafted = np.array(rows["drafted_per_pos"].tolist()).sum(axis=0)
    d = rows["num_drafts"].sum()
    for p in lookup.per_position:
        assert p.estimate == pytest.approx(acc[p.position] / d)
        assert p.among_drafted == pytest.approx(acc[p.position] / drafted[p.position])
        assert p.drafted_share == pytest.approx(drafted[p.position] / d)
    assert lookup.per_position[3].among_drafted > lookup.per_position[3].estimate
    lo, hi = (
        lookup.per_position[3].among_drafted_ci_low,
        lookup.per_position[3].among_drafted_ci_high,
    )
    assert lo is not None and hi is not None and lo <= lookup.per_position[3].among_drafted <= hi
    assert lookup.mean_draft_length == pytest.approx(rows["num_draft_tokens"].sum() / d)
    shares = {s.drafted: s.share for s in lookup.draft_lengths}
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares[4] == pytest.approx(drafted[3] / d) and shares[2] > 0.4
    assert any(n.startswith("lookup drafts") and "among_drafted" in n for n in a.notes), a.notes
    table = draft_length_table(a)
    assert set(table["arm"]) == {"model", "lookup"} and len(table) == 8


def test_arms_that_all_draft_k_get_no_note_and_no_table() -> None:
    arms = {"a": 0.0, "b": 0.1}
    run = simulate_run(arms, boots=3, prompts=20, seed=3)
    a = stats.analyze(
        Results(
            probes=run.probes,
            boots=run.boots_frame,
            manifest=simulated_manifest(arms, boots=3, prompts=20),
        )
    )
    assert not any("tokens per step" in n for n in a.notes)
    assert len(draft_length_table(a)) == 0
    without = run.probes.assign(drafted_per_pos=None)  # /metrics-only counts
    b = stats.analyze(
        Results(
            probes=without,
            boots=run.boots_frame,
            manifest=simulated_manifest(arms, boots=3, prompts=20),
        )
    )
    arm = b.arm("a")
    assert arm is not None and arm.draft_lengths == [] and arm.mean_draft_length == 4
    assert all(p.among_drafted is None and p.drafted_share is None for p in arm.per_position)
