"""Sweeps ([sweep] grid -> arms, bench/experiment/spec/sweep.py) and the selection they feed:
generated names, crossing hand-written arms, no-speculation levels, one-line errors naming the
cell, manifest cells, hashing like hand-written arms, analyze --json's `selection`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.errors import SpecabError
from bench.experiment import build_manifest, load_spec, resolve_arm, sweep_cells
from bench.records import Manifest, Results
from bench.simulate import SimParams, simulate_frames, simulated_manifest
from bench.stats import AnalysisOptions, analyze, selection_dropped

HEAD = """
[experiment]
name = "sw"
[server]
model = "m"
speculative_config = { method = "draft_model", model = "d" }
[probes]
sets = ["p.jsonl"]
"""
GRID = """
[sweep]
grid = { "speculative_config.num_speculative_tokens" = [1, 2, 4], concurrency = [1, 4] }
no_speculation = true
"""


def _file(tmp_path: Path, text: str) -> Path:
    (tmp_path / "p.jsonl").write_text('{"id": "a", "prompt": "def f():"}\n')
    f = tmp_path / "e.toml"
    f.write_text(text)
    return f


def test_a_five_line_sweep_generates_named_arms(tmp_path: Path) -> None:
    spec = load_spec(_file(tmp_path, HEAD + GRID))
    names = [a.name for a in spec.arms]
    assert names == ["k1-c1", "k1-c4", "k2-c1", "k2-c4", "k4-c1", "k4-c4", "nospec-c1", "nospec-c4"]
    k2c4 = resolve_arm(spec, tmp_path / "e.toml", "k2-c4")
    assert k2c4.num_speculative_tokens == 2 and k2c4.concurrency == 4
    off = resolve_arm(spec, tmp_path / "e.toml", "nospec-c4")
    assert not off.speculative and off.concurrency == 4
    assert spec.baseline == "k1-c1"


def test_hand_written_arms_are_crossed_and_hashed_like_any_arm(tmp_path: Path) -> None:
    text = HEAD + '[[arms]]\nname = "dm"\n[[arms]]\nname = "fix"\ndraft_config = { a = 1 }\n'
    text += '[sweep]\ngrid = { "speculative_config.num_speculative_tokens" = [2, 3] }\n'
    f = _file(tmp_path, text)
    spec = load_spec(f)
    assert [a.name for a in spec.arms] == ["dm-k2", "fix-k2", "dm-k3", "fix-k3"]
    hashes = {a.name: resolve_arm(spec, f, a.name).definition_sha256() for a in spec.arms}
    assert len(set(hashes.values())) == 4
    # the same cell written by hand hashes the same: resume compares definitions, not origins
    hand = HEAD + '[[arms]]\nname = "dm-k2"\nspeculative_config = { num_speculative_tokens = 2 }\n'
    f2 = _file(tmp_path / "h" if (tmp_path / "h").mkdir() is None else tmp_path, hand)
    spec2 = load_spec(f2)
    assert (
        resolve_arm(spec2, f2, "dm-k2").definition()["speculative_config"]
        == resolve_arm(spec, f, "dm-k2").definition()["speculative_config"]
    )


@pytest.mark.parametrize(
    ("grid", "field", "words"),
    [
        ('grid = { "server.model" = ["a"] }', "sweep.grid.server.model", "cannot sweep"),
        ("grid = { concurrency = [] }", "sweep.grid.concurrency", "non-empty"),
        ("grid = { concurrency = [1, 1] }", "sweep.grid.concurrency", "twice"),
        ("grid = {}", "sweep.grid", "needs a grid"),
        ('grid = { concurrency = [1] }\ngroup_by = ["args.x"]', "sweep", "not a grid field"),
        ('grid = { concurrency = [1] }\nobjective = "tpot"', "sweep.objective", ""),
    ],
)
def test_bad_sweeps_are_one_line_errors(tmp_path: Path, grid: str, field: str, words: str) -> None:
    with pytest.raises(SpecabError) as info:
        load_spec(_file(tmp_path, HEAD + "[sweep]\n" + grid + "\n"))
    line = info.value.one_line()
    assert "e.toml" in line and field in line and words in line and "\n" not in line


def test_a_cell_that_overrides_its_arm_is_refused_naming_the_cell(tmp_path: Path) -> None:
    text = (
        HEAD + '[[arms]]\nname = "a"\nconcurrency = 2\n[sweep]\ngrid = { concurrency = [1, 4] }\n'
    )
    with pytest.raises(SpecabError, match=r"cell a-c1: arm 'a' already sets concurrency"):
        load_spec(_file(tmp_path, text))


def test_a_cell_that_cannot_run_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    text = HEAD.replace(
        'sets = ["p.jsonl"]', 'sets = ["p.jsonl"]\nacceptance_source = "metrics_delta"'
    )
    f = _file(tmp_path, text + GRID)
    with pytest.raises(SpecabError, match=r"k1-c4.*concurrency = 4 needs per-request"):
        build_manifest(load_spec(f), f)


def test_manifest_cells_carry_group_cost_and_settings(tmp_path: Path) -> None:
    spec = load_spec(_file(tmp_path, HEAD + GRID + "margin = 0.1\n"))
    cells = sweep_cells(spec)
    assert cells is not None and cells["group_by"] == ["concurrency"] and cells["margin"] == 0.1
    by = {c["arm"]: c for c in cells["cells"]}
    assert by["k4-c4"]["group"] == "c4" and by["k4-c4"]["cost"][0] == 4
    assert by["nospec-c1"]["cost"][0] == 0 and by["nospec-c1"]["levels"] == {"concurrency": 1}


def _sweep_manifest(speed: dict[str, float], looks: list[int] | None = None) -> Manifest:
    arms = dict.fromkeys(speed, 0.0)
    m = simulated_manifest(arms, boots=looks[-1] if looks else 6, looks=looks).to_json()
    cells = []
    for i, a in enumerate(speed):
        k = 0 if a.startswith("nospec") else int(a[1])
        c = int(a.split("-c")[1])
        cells.append({"arm": a, "group": f"c{c}", "levels": {"concurrency": c}, "cost": [k, i]})
    m["sweep"] = {"objective": "output_tokens_per_s", "margin": 0.05, "group_by": ["concurrency"],
                  "tie_break": "fewest_speculative_tokens", "cells": cells}  # fmt: skip
    for a in m["arms"]:
        k = 0 if a["name"].startswith("nospec") else int(a["name"][1])
        a["definition"] = (
            {
                "speculative_config": {
                    "method": "draft_model",
                    "model": "d",
                    "num_speculative_tokens": k,
                }
            }
            if k
            else {"speculative": False, "speculative_config": {}}
        )
    return Manifest.model_validate(m)


SPEED = {"k1-c1": 1.0, "k2-c1": 1.6, "k4-c1": 1.3, "nospec-c1": 0.7,
         "k1-c4": 1.0, "k2-c4": 1.1, "k4-c4": 1.5, "nospec-c4": 0.7}  # fmt: skip


def test_analyze_json_selects_per_concurrency_and_builds_a_schedule() -> None:
    nospec = [a for a in SPEED if a.startswith("nospec")]
    probes, boots = simulate_frames(dict.fromkeys(SPEED, 0.0), boots=6, prompts=20, speed=SPEED,
                                    no_spec=nospec, seed=2)  # fmt: skip
    out = analyze(
        Results(probes=probes, boots=boots, manifest=_sweep_manifest(SPEED)),
        options=AnalysisOptions(n_resamples=100),
    ).to_json()
    json.dumps(out, allow_nan=False)
    sel = out["selection"]
    chosen = {g["group"]: g["chosen"] for g in sel["groups"]}
    assert chosen == {"c1": "k2-c1", "c4": "k4-c4"}
    assert sel["schedule"] == [[1, 1, 2], [2, 4, 4]]
    cfg = sel["schedule_speculative_config"]
    assert cfg["num_speculative_tokens"] == 4 and cfg["num_speculative_tokens_per_batch_size"]
    c1 = next(g for g in sel["groups"] if g["group"] == "c1")
    assert (
        c1["paste"].startswith("--speculative-config ")
        and '"num_speculative_tokens": 2' in c1["paste"]
    )
    assert out["sequential"] is None  # a sweep's looks are not the A/B design's


def test_looks_eliminate_and_the_replay_is_what_run_ab_drops() -> None:
    nospec = [a for a in SPEED if a.startswith("nospec")]
    probes, boots = simulate_frames(dict.fromkeys(SPEED, 0.0), boots=3, prompts=20, speed=SPEED,
                                    no_spec=nospec, seed=4)  # fmt: skip
    m = _sweep_manifest(SPEED, looks=[3, 6])
    dropped = selection_dropped(Results(probes=probes, boots=boots, manifest=m))
    assert "nospec-c1" in dropped and "eliminated at look 1" in dropped["nospec-c1"]
    sel = analyze(
        Results(probes=probes, boots=boots, manifest=m), options=AnalysisOptions(n_resamples=100)
    ).selection
    assert sel is not None
    gone = {c.arm for g in sel.groups for c in g.configs if c.eliminated_at_look == 1}
    assert gone == {a for a, why in dropped.items() if "eliminated" in why}
    assert all(g.status == "undecided" or g.look == 1 for g in sel.groups)
    assert sel.boots_fixed_design == 8 * 6 and sel.boots_used == 8 * 3


def test_constraints_exclude_configurations() -> None:
    speed = {"k1-c1": 1.0, "k2-c1": 1.5}
    probes, boots = simulate_frames(
        dict.fromkeys(speed, 0.0), boots=5, prompts=20, speed=speed, seed=1
    )
    m = _sweep_manifest(speed)
    assert m.sweep is not None
    sweep = m.sweep.model_copy(update={"min_mean_accepted_length": 9.0})  # none reaches it
    m = m.model_copy(update={"sweep": sweep})
    sel = analyze(
        Results(probes=probes, boots=boots, manifest=m), options=AnalysisOptions(n_resamples=100)
    ).selection
    assert sel is not None and sel.groups[0].status == "empty"
    assert all(not c.feasible for c in sel.groups[0].configs)
    assert np.isfinite(sel.alpha)


def test_an_undecided_group_still_gets_the_best_estimate_and_its_probability() -> None:
    # three boots of close configurations: no proof within 5 %, but a bet to act on
    speed = {"k1-c1": 1.0, "k2-c1": 1.04, "k4-c1": 1.02}
    probes, boots = simulate_frames(
        dict.fromkeys(speed, 0.0),
        boots=3,
        prompts=20,
        speed=speed,
        seed=3,
        params=SimParams(sigma_speed_boot=0.08),
    )
    out = analyze(
        Results(probes=probes, boots=boots, manifest=_sweep_manifest(speed)),
        options=AnalysisOptions(n_resamples=100),
    ).to_json()
    (group,) = out["selection"]["groups"]
    assert group["status"] == "undecided" and group["chosen"] is None
    p = group["best_estimate_probability"]
    assert 0.0 < p < 1.0 and group["best_estimate"] in speed
    assert group["boots_more"] is not None and group["boots_more"] > 0
    k = group["best_estimate"].split("-")[0][1:]
    assert (
        f"best estimate: {group['best_estimate']} (k = {k}), within 5% of the best "
        in (group["reason"])
    )
    assert f"with probability {p:.2f}" in group["reason"]


def test_a_sweep_selects_on_the_per_request_length() -> None:
    """Any metric of the registry marked selectable is an objective: the per-request mean
    accepted length picks the arm whose drafts are accepted most (no-speculation arms have
    none and never compete), on its absolute scale."""
    shifts = {"k1-c1": 0.0, "k2-c1": 1.5, "k4-c1": 0.0, "nospec-c1": 0.0}
    nospec = ["nospec-c1"]
    probes, boots = simulate_frames(shifts, boots=6, prompts=20, no_spec=nospec, seed=5)
    body = _sweep_manifest(dict.fromkeys(shifts, 1.0)).to_json()
    body["sweep"]["objective"] = "request_mean_accepted_length"
    body["sweep"]["margin"] = 0.02
    m = Manifest.model_validate(body)
    out = analyze(Results(probes=probes, boots=boots, manifest=m), AnalysisOptions(n_resamples=0))
    assert out.selection is not None
    (group,) = out.selection.groups
    assert group.chosen == "k2-c1" and out.selection.margin_scale == "absolute"
    rows = {c.arm: c for c in group.configs}
    assert rows["k2-c1"].estimate is not None and rows["k2-c1"].estimate > 1.0
    assert rows["nospec-c1"].estimate is None


def test_an_unknown_objective_is_refused_naming_the_metrics(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    text = (Path(__file__).parents[2] / "arms" / "demo" / "sweep-k.toml").read_text()
    spec.write_text(text.replace('objective = "output_tokens_per_s"', 'objective = "speed"'))
    with pytest.raises(SpecabError) as exc:
        load_spec(spec)
    assert "request_mean_accepted_length" in exc.value.one_line()
