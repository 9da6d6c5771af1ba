"""`analyze --by output_position`: probe rows cut into windows along the output from their
ordered verify steps, checked on a hand-made request, against a known acceptance along the
output (simulated steps through the product's analysis), and through the CLI on a stored run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench import stats
from bench.cli import run
from bench.records import Results
from bench.simulate import SimRun, simulate_run, simulated_manifest, with_steps, write_run
from bench.stats.inputs import output_windows
from bench.store import ResultsWriter

K = 3  # the hand-made request's
K_SIM = 4  # the simulated runs' (bench.simulate's default)


def _row(steps: list[int], completion: int) -> dict[str, object]:
    a = np.array(steps)
    return {
        "arm": "a", "boot": 0, "boot_id": "a__b000__a1", "probe_set": "s", "probe_id": "p1",
        "category": None, "pass_index": None, "num_drafts": a.size, "num_draft_tokens": K * a.size,
        "num_accepted_tokens": int(a.sum()),
        "accepted_per_pos": [int((a > p).sum()) for p in range(K)],
        "acceptance_histogram": [int((a == j).sum()) for j in range(K + 1)],
        "drafted_per_pos": [a.size] * K, "completion_tokens": completion, "latency_s": 1.0,
        "prompt_tokens": 10, "step_accepted": steps, "step_drafted": [K] * a.size,
    }  # fmt: skip


def test_a_request_is_cut_by_the_token_each_step_starts_at() -> None:
    # steps accept 2, 0, 3, 1: they start at output tokens 1, 4, 5 and 9 (each emits a + 1)
    frame, notes = output_windows(pd.DataFrame([_row([2, 0, 3, 1], 11)]), [4, 8], None)
    assert list(frame["category"]) == ["1: tokens 1–1", "2: tokens 4–5", "3: tokens 9–9"]
    assert list(frame["probe_id"]) == ["p1@w1", "p1@w2", "p1@w3"]
    assert list(frame["num_drafts"]) == [1, 2, 1]
    assert list(frame["num_accepted_tokens"]) == [2, 3, 1]
    assert [list(x) for x in frame["accepted_per_pos"]] == [[1, 1, 0], [1, 1, 1], [1, 0, 0]]
    assert [list(x) for x in frame["acceptance_histogram"]] == [
        [0, 0, 1, 0], [1, 0, 0, 1], [0, 1, 0, 0]
    ]  # fmt: skip
    assert frame["latency_s"].isna().all() and notes == []  # 1 + 3 + 1 + 4 + 2 = 11 tokens
    # steps that do not add up to the completion (an ngram step without drafts) are said
    _, notes = output_windows(pd.DataFrame([_row([2, 0, 3, 1], 30)]), [4, 8], None)
    assert len(notes) == 1 and "1 of 1 requests" in notes[0]


def _run(seed: int, late_b: float, boots: int = 4, prompts: int = 12) -> Results:
    """Arms a and b: acceptance 0.7 per draft position everywhere for a; for b 0.7 before
    output token 48 and `late_b` from it on."""
    arms = {"a": 0.0, "b": 0.0}
    sim = simulate_run(arms, boots=boots, prompts=prompts, seed=seed)
    rng = np.random.default_rng(seed)
    probes = sim.probes.assign(completion_tokens=96)
    parts = [
        with_steps(probes[probes["arm"] == "a"], K_SIM, lambda t: np.full_like(t, 0.7), rng),
        with_steps(
            probes[probes["arm"] == "b"], K_SIM, lambda t: np.where(t < 48, 0.7, late_b), rng
        ),
    ]
    manifest = simulated_manifest(arms, boots=boots, prompts=prompts)
    return Results(manifest, sim.boots_frame, pd.concat(parts, ignore_index=True))


def _by_windows(res: Results) -> stats.Breakdown:
    options = stats.AnalysisOptions(by="output_position:48", n_resamples=0)
    out = stats.analyze(res, options).breakdown
    assert out is not None
    return out


def test_a_late_regression_is_found_in_its_window_and_not_before_it() -> None:
    """Known truth: b's acceptance falls from 0.7 to 0.45 at output token 48. Over 30
    simulated runs the late window's pos0 differs after Holm across the windows in >= 90 %
    and the early window (no difference) in <= 10 %."""
    late = early = 0
    runs = 30
    for seed in range(runs):
        b = _by_windows(_run(seed, 0.45))
        x = next(x for x in b.across_groups if (x.arm, x.metric) == ("b", "acceptance_pos0"))
        late += x.groups[1] in x.differ
        early += x.groups[0] in x.differ
        assert [g.group[:2] for g in b.groups] == ["1:", "2:"]
        assert all("output_tokens_per_s" not in a.metrics for g in b.groups for a in g.arms)
    assert late / runs >= 0.9 and early / runs <= 0.1


def test_equal_arms_differ_in_no_window_beyond_alpha() -> None:
    """Known truth: a and b the same everywhere. Over 200 runs, any window differing on
    pos0 after Holm across the windows stays within alpha + 2 MCSE (family-wise rate): a
    rate of alpha + 3 MCSE (0.096) fails, below 2 alpha (at 120 runs it took 0.11)."""
    runs, alpha = 200, 0.05
    claimed = 0
    for seed in range(runs):
        b = _by_windows(_run(1000 + seed, 0.7, boots=3, prompts=6))
        x = next(x for x in b.across_groups if (x.arm, x.metric) == ("b", "acceptance_pos0"))
        claimed += bool(x.differ)
    assert claimed / runs <= alpha + 2 * np.sqrt(alpha * (1 - alpha) / runs)


def test_the_cli_prints_and_serializes_windows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = _run(7, 0.45, boots=3, prompts=6)
    sim = simulate_run({"a": 0.0, "b": 0.0}, boots=3, prompts=6, seed=7)
    root = tmp_path / "exp"
    write_run(SimRun(res.probes, sim.boots), ResultsWriter.create(root, res.manifest))
    assert run(["analyze", str(root), "--json", "--resamples", "0", "--by", "output_position"]) == 0
    b = json.loads(capsys.readouterr().out)["breakdown"]
    assert b["by"] == "output_position" and len(b["groups"]) == 4  # quartiles of the steps
    assert {x["metric"] for x in b["across_groups"]} >= {"acceptance_pos0"}
    assert run(["analyze", str(root), "--by", "output_position:48"]) == 0
    out = capsys.readouterr().out
    assert "By output_position:48" in out and "2: tokens 48" in out and "p across" in out
