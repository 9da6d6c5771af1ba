"""Standard prompt collections as probe sets: HumanEval from the installed wheel, offline."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from bench.cli import run
from bench.demo import committed_models
from bench.experiment import load_probe_set
from bench.experiment.probes import humaneval_tasks, spread, spread_by_length


def test_spread_takes_an_even_subset_of_distinct_indices() -> None:
    assert spread(164, None) == list(range(164))
    assert spread(10, 20) == list(range(10))
    idx = spread(164, 16)
    assert len(idx) == 16 == len(set(idx)) and idx[0] == 0 and idx[-1] >= 150
    gaps = {b - a for a, b in itertools.pairwise(idx)}
    assert gaps <= {10, 11}  # even: no cluster at the start of the collection


def test_humaneval_loads_offline_from_the_wheel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tasks = humaneval_tasks()
    assert len(tasks) == 164 and tasks[0]["task_id"] == "HumanEval/0"
    assert "def has_close_elements" in tasks[0]["prompt"]


def test_cli_writes_a_probe_set_with_categories(tmp_path: Path) -> None:
    out = tmp_path / "he.jsonl"
    assert run(["probes", "humaneval", str(out), "--limit", "16", "--max-tokens", "48"]) == 0
    ps = load_probe_set(out)
    assert ps.count == 16 and ps.name == "he"
    assert {p.category for p in ps.probes} == {"humaneval"}
    assert {p.max_tokens for p in ps.probes} == {48}
    assert ps.probes[0].id == "HumanEval/0" and ps.probes[0].prompt.startswith("from typing")
    assert all(line.startswith("{") for line in out.read_text().splitlines())  # plain JSONL
    assert "HumanEval (OpenAI, MIT license" in (tmp_path / "he.jsonl.source.json").read_text()
    # an existing file is never overwritten
    before = out.read_bytes()
    assert run(["probes", "humaneval", str(out)]) == 2
    assert out.read_bytes() == before
    none = tmp_path / "plain.jsonl"
    assert run(["probes", "humaneval", str(none), "--limit", "3", "--category", ""]) == 0
    assert all("category" not in json.loads(x) for x in none.read_text().splitlines()[1:])


def test_probe_lines_carry_an_optional_category(tmp_path: Path) -> None:
    f = tmp_path / "c.jsonl"
    f.write_text(
        json.dumps({"id": "a", "prompt": "x", "category": "math"})
        + "\n"
        + json.dumps({"id": "b", "prompt": "y"})
        + "\n"
    )
    ps = load_probe_set(f)
    assert [p.category for p in ps.probes] == ["math", None]
    f.write_text(json.dumps({"id": "a", "prompt": "x", "category": ""}) + "\n")
    with pytest.raises(Exception, match="category"):
        load_probe_set(f)


def test_spread_by_length_picks_prompts_evenly_from_shortest_to_longest() -> None:
    lengths = [5, 7, 9, 40, 41, 42, 43, 80, 120, 500]
    pick = spread_by_length(lengths, 4, most=200)
    assert [lengths[i] for i in pick] == [5, 43, 80, 120]  # nearest to 5, 43.3, 81.7, 120
    assert len(set(pick)) == 4 and spread_by_length(lengths, 50) == sorted(
        range(10), key=lambda i: lengths[i]
    )  # never more than there are
    assert spread_by_length(lengths, 3, most=4) == []


@pytest.mark.skipif(committed_models() is None, reason="needs arms/demo/models")
def test_cli_spreads_humaneval_over_prompt_lengths(tmp_path: Path) -> None:
    models = committed_models()
    assert models is not None
    out = tmp_path / "by-length.jsonl"
    argv = ["probes", "humaneval", str(out), "--limit", "8", "--spread-lengths"]
    assert run([*argv, str(models.target), "--max-prompt-tokens", "300"]) == 0
    ps = load_probe_set(out)
    source = (tmp_path / "by-length.jsonl.source.json").read_text()
    assert ps.count == 8 and "spread over prompt lengths" in source
    chars = [len(p.prompt or "") for p in ps.probes]
    assert chars[0] < chars[-1]  # shortest first
    assert run(["probes", "humaneval", str(tmp_path / "x.jsonl"), "--spread-lengths", "."]) == 2
