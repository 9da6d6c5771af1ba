"""`specab probes import`: users' prompt sets, in the exact field names their readers use."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.cli import run
from bench.errors import SpecabError
from bench.experiment import import_prompts, load_probe_set


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


MT_BENCH = [  # FastChat llm_judge data/mt_bench/question.jsonl
    {"question_id": 81, "category": "writing", "turns": ["Compose a blog post.", "Rewrite it."]},
    {"question_id": 101, "category": "reasoning", "turns": ["You are in a race...", "And?"]},
    {"question_id": 121, "category": "coding", "turns": ["Write a Python function.", "Faster"]},
]


def test_mt_bench_keeps_ids_and_categories_and_says_only_the_first_turn_is_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _jsonl(tmp_path / "question.jsonl", MT_BENCH)
    out = tmp_path / "mt.jsonl"
    assert run(["probes", "import", "mt-bench", str(src), str(out), "--max-tokens", "64"]) == 0
    said = capsys.readouterr().out
    assert "wrote 3 probes" in said and "only the first turn" in said and "3 of 3 had more" in said
    probes = load_probe_set(out).probes
    assert [p.id for p in probes] == ["81", "101", "121"]
    assert [p.category for p in probes] == ["writing", "reasoning", "coding"]
    assert probes[0].messages == ({"role": "user", "content": "Compose a blog post."},)
    assert probes[0].prompt is None and probes[0].max_tokens == 64
    # plain JSONL: every line one object; where it came from is beside it
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == ["81", "101", "121"]
    side = json.loads((tmp_path / "mt.jsonl.source.json").read_text())
    assert side["source"].startswith("mt-bench prompts from question.jsonl: 3 of 3 rows")


def test_an_imported_set_is_plain_jsonl_for_pandas_and_vllm_bench(tmp_path: Path) -> None:
    """`--api completions` writes `prompt`: pandas reads the file as JSONL, and so does the
    installed vLLM's own custom-dataset loader (`vllm bench serve --dataset-name custom`)."""
    import pandas as pd

    src = _jsonl(tmp_path / "question.jsonl", MT_BENCH)
    out = tmp_path / "mt.jsonl"
    argv = ["probes", "import", "mt-bench", str(src), str(out), "--api", "completions"]
    assert run(argv) == 0
    frame = pd.read_json(out, lines=True)
    assert list(frame["id"].astype(str)) == ["81", "101", "121"]
    assert frame["prompt"].iloc[0] == "Compose a blog post."
    from vllm.benchmarks.datasets.datasets import CustomDataset

    data = CustomDataset(dataset_path=str(out), disable_shuffle=True).data
    assert [d["prompt"] for d in data] == list(frame["prompt"])
    # an older file with a provenance comment line still loads as a probe set
    old = tmp_path / "old.jsonl"
    old.write_text("# written by an older specab\n" + out.read_text())
    assert [p.id for p in load_probe_set(old).probes] == ["81", "101", "121"]


def test_the_huggingfaceh4_mt_bench_copy_and_spec_bench(tmp_path: Path) -> None:
    h4 = _jsonl(
        tmp_path / "h4.jsonl",
        [{"prompt_id": 81, "category": "writing", "prompt": ["Compose.", "Again."]}],
    )
    assert import_prompts("mt-bench", h4).lines[0]["messages"][0]["content"] == "Compose."
    spec_bench = _jsonl(
        tmp_path / "spec.jsonl",
        [
            {"question_id": 1, "category": "translation", "turns": ["Translate: hallo"]},
            {"question_id": 2, "category": "math_reasoning", "turns": ["2+2?"]},
            {"question_id": 3, "category": "rag", "turns": ["Given the passage ..."]},
        ],
    )
    got = import_prompts("spec-bench", spec_bench, categories=["rag", "translation"])
    assert [x["id"] for x in got.lines] == ["1", "3"] and got.later_turns_dropped == 0
    completions = import_prompts("spec-bench", spec_bench, api="completions", limit=2)
    assert [x["prompt"] for x in completions.lines] == ["Translate: hallo", "2+2?"]


def test_speed_bench_from_jsonl_and_parquet(tmp_path: Path) -> None:
    rows = [
        {
            "question_id": "qa-0",
            "category": "qa",
            "messages": [{"role": "user", "content": "What is RoPE?"}],
        },
        {
            "question_id": "code-1",
            "category": "coding",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Sort a list."},
            ],
        },
    ]
    a = import_prompts("speed-bench", _jsonl(tmp_path / "s.jsonl", rows))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "test.parquet")
    b = import_prompts("speed-bench", tmp_path / "test.parquet")
    assert a.lines == b.lines
    assert b.lines[1] == {
        "id": "code-1",
        "messages": [{"role": "user", "content": "Sort a list."}],
        "category": "coding",
    }


def test_sharegpt_uses_the_first_human_turn(tmp_path: Path) -> None:
    data = [
        {
            "id": "abc",
            "conversations": [
                {"from": "human", "value": "Hi, explain MTP."},
                {"from": "gpt", "value": "MTP is..."},
                {"from": "human", "value": "More?"},
            ],
        },
        {"conversations": [{"from": "human", "value": "Second."}]},
    ]
    src = tmp_path / "sharegpt.json"
    src.write_text(json.dumps(data))
    got = import_prompts("sharegpt", src)
    assert [x["id"] for x in got.lines] == ["abc", "1"]
    assert got.lines[0]["messages"] == [{"role": "user", "content": "Hi, explain MTP."}]
    assert got.later_turns_dropped == 1


def test_vllm_custom_and_a_mapped_jsonl(tmp_path: Path) -> None:
    custom = _jsonl(tmp_path / "custom.jsonl", [{"prompt": "def f():"}, {"prompt": "import os"}])
    got = import_prompts("vllm-custom", custom)
    assert got.lines == [{"id": "1", "prompt": "def f():"}, {"id": "2", "prompt": "import os"}]
    mine = _jsonl(tmp_path / "mine.jsonl", [{"qid": "a", "text": "Hello", "kind": "chat"}])
    (line,) = import_prompts("jsonl", mine, fields="id=qid,prompt=text,category=kind").lines
    assert line == {"id": "a", "prompt": "Hello", "category": "chat"}


@pytest.mark.parametrize(
    ("fmt", "content", "where", "field"),
    [
        ("mt-bench", '{"question_id": 1, "category": "x", "turns": "oops"}\n', ":line 1", "turns"),
        (
            "mt-bench",
            '{"question_id": 1, "turns": ["a"]}\n{"question_id": 1, "turns": ["b"]}\n',
            ":line 2",
            "id",
        ),
        ("spec-bench", '{"category": "x", "turns": ["a"]}\n', ":line 1", "question_id"),
        ("spec-bench", "{not json\n", ":line 1", "(line)"),
        ("speed-bench", '{"question_id": 1, "messages": []}\n', ":line 1", "messages"),
        ("vllm-custom", '{"text": "no prompt column"}\n', ":line 1", "prompt"),
        (
            "sharegpt",
            '[{"conversations": [{"from": "gpt", "value": "x"}]}]',
            ":item 0",
            "conversations",
        ),
    ],
)
def test_a_bad_file_is_one_line_naming_file_row_and_field(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fmt: str,
    content: str,
    where: str,
    field: str,
) -> None:
    src = tmp_path / ("in.json" if fmt == "sharegpt" else "in.jsonl")
    src.write_text(content)
    out = tmp_path / "out.jsonl"
    assert run(["probes", "import", fmt, str(src), str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{src}{where}: {field}:" in err and "Fix:" in err
    assert not out.exists()


def test_bad_options_are_user_errors(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "q.jsonl", MT_BENCH)
    with pytest.raises(SpecabError, match="unknown format"):
        import_prompts("alpaca", src)
    with pytest.raises(SpecabError, match="--fields"):
        import_prompts("jsonl", src, fields="id=question_id")
    with pytest.raises(SpecabError, match="no prompts to import"):
        import_prompts("mt-bench", src, categories=["roleplay"])
    with pytest.raises(SpecabError, match="not Parquet"):
        (tmp_path / "q.parquet").write_bytes(b"")
        import_prompts("mt-bench", tmp_path / "q.parquet")
