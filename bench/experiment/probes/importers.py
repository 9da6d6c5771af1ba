"""Prompt sets on users' disks, imported as probe sets (`specab probes import FORMAT IN OUT`).

The field names are the ones the readers in the field use (vLLM `bench serve`, AIPerf,
SGLang, NVIDIA specdec_bench):
- `mt-bench`: FastChat llm_judge `question.jsonl` — `question_id`, `category`, `turns` (two
  strings); the HuggingFaceH4 copy names them `prompt_id` and `prompt`.
- `spec-bench`: Spec-Bench `question.jsonl` — `question_id`, `category`, `turns`.
- `speed-bench`: SPEED-Bench prepared rows (`.jsonl` or `.parquet`) — `question_id`,
  `category`, `messages` ([{role, content}]).
- `sharegpt`: a JSON list of `{id?, conversations: [{from, value}, ...]}`.
- `vllm-custom`: vLLM `bench serve` custom JSONL — a `prompt` column.
- `jsonl`: any JSONL, with a field mapping (`id=qid,prompt=text,category=kind`).

Multi-turn sets: the later turns of a conversation are the user's follow-ups to the model's
own first answer, which a fixed probe cannot hold, so only the first turn is used (as vLLM's
benchmarks do for ShareGPT and MT-Bench); the command says how many conversations had more.
Every problem is one SpecabError naming the file, the line or row, and the field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bench.errors import SpecabError

Api = Literal["chat", "completions"]
Row = dict[str, Any]


@dataclass(frozen=True)
class Imported:
    """What one import produced: probe-set lines and what the user must be told."""

    lines: list[dict[str, Any]]
    rows: int  # rows read from the file
    later_turns_dropped: int  # conversations whose turns after the first were not used


@dataclass(frozen=True)
class _Item:
    id: str
    first_turn: str
    turns: int
    category: str | None


def _fail(path: Path, where: str, field: str, problem: str, fix: str) -> SpecabError:
    return SpecabError(problem, file=f"{path}:{where}", field=field, fix=fix)


def _jsonl_rows(path: Path) -> Iterable[tuple[str, Row]]:
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise _fail(
                path, f"line {n}", "(line)", f"not JSON ({exc.msg})", "one JSON object a line"
            ) from None
        if not isinstance(row, dict):
            raise _fail(path, f"line {n}", "(line)", "not a JSON object", "one JSON object a line")
        yield f"line {n}", row


def _parquet_rows(path: Path) -> Iterable[tuple[str, Row]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise SpecabError(
            f"not a Parquet file ({exc})", file=path, fix="pass the .parquet file"
        ) from None
    for n, row in enumerate(table.to_pylist()):
        yield f"row {n}", row


def _string(path: Path, where: str, row: Row, field: str) -> str:
    value = row.get(field)
    if not isinstance(value, str) or not value.strip():
        raise _fail(
            path,
            where,
            field,
            f"missing or empty (got {json.dumps(value)[:60]})",
            f"give every row a non-empty {field}",
        )
    return value


def _ident(path: Path, where: str, row: Row, fields: tuple[str, ...]) -> str:
    for field in fields:
        value = row.get(field)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
            return str(value)
    raise _fail(path, where, fields[0], "missing id", f"give every row a {fields[0]}")


def _category(row: Row, field: str = "category") -> str | None:
    value = row.get(field)
    return str(value) if isinstance(value, str) and value else None


def _turns(path: Path, where: str, row: Row, fields: tuple[str, ...]) -> list[str]:
    field = next((f for f in fields if f in row), fields[0])
    turns = row.get(field)
    if (
        not isinstance(turns, list)
        or not turns
        or not all(isinstance(t, str) and t.strip() for t in turns)
    ):
        raise _fail(
            path,
            where,
            field,
            "not a list of non-empty strings",
            f'write {field} as ["first turn", ...]',
        )
    return turns


def _question(path: Path, where: str, row: Row) -> _Item:
    """MT-Bench (FastChat or the HuggingFaceH4 copy) and Spec-Bench rows."""
    turns = _turns(path, where, row, ("turns", "prompt"))
    return _Item(
        _ident(path, where, row, ("question_id", "prompt_id")), turns[0], len(turns), _category(row)
    )


def _speed_bench(path: Path, where: str, row: Row) -> _Item:
    msgs = row.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise _fail(
            path,
            where,
            "messages",
            "missing or empty",
            "use the prepared SPEED-Bench rows (messages resolved)",
        )
    users = [m for m in msgs if isinstance(m, dict) and m.get("role") == "user"]
    first = users[0].get("content") if users else None
    if not isinstance(first, str) or not first.strip():
        raise _fail(
            path,
            where,
            "messages",
            "no user message with text",
            "use the prepared SPEED-Bench rows (placeholders resolved)",
        )
    return _Item(_ident(path, where, row, ("question_id",)), first, len(users), _category(row))


def _sharegpt(path: Path, where: str, row: Row) -> _Item:
    conv = row.get("conversations")
    if not isinstance(conv, list):
        raise _fail(
            path, where, "conversations", "missing or not a list", "a list of {from, value} turns"
        )
    human = [t for t in conv if isinstance(t, dict) and t.get("from") in ("human", "user")]
    first = human[0].get("value") if human else None
    if not isinstance(first, str) or not first.strip():
        raise _fail(
            path,
            where,
            "conversations",
            "no human turn with text",
            "keep conversations that start with a human turn",
        )
    ident = str(row["id"]) if isinstance(row.get("id"), str | int) else where.split()[-1]
    return _Item(ident, first, len(human), None)


def _custom(path: Path, where: str, row: Row) -> _Item:
    return _Item(where.split()[-1], _string(path, where, row, "prompt"), 1, None)


def _mapped(mapping: dict[str, str]) -> Callable[[Path, str, Row], _Item]:
    def read(path: Path, where: str, row: Row) -> _Item:
        ident = _ident(path, where, row, (mapping["id"],)) if "id" in mapping else where.split()[-1]
        cat = _category(row, mapping["category"]) if "category" in mapping else None
        return _Item(ident, _string(path, where, row, mapping["prompt"]), 1, cat)

    return read


READERS: dict[str, Callable[[Path, str, Row], _Item]] = {
    "mt-bench": _question,
    "spec-bench": _question,
    "speed-bench": _speed_bench,
    "sharegpt": _sharegpt,
    "vllm-custom": _custom,
}
FORMATS = (*READERS, "jsonl")
DEFAULT_API: dict[str, Api] = {"vllm-custom": "completions", "jsonl": "completions"}


def parse_mapping(text: str | None) -> dict[str, str]:
    """`id=qid,prompt=text,category=kind` -> {"id": "qid", ...}; `prompt` is required."""
    pairs = [p.split("=", 1) for p in (text or "").split(",") if p.strip()]
    mapping = {k.strip(): v.strip() for k, v in (p if len(p) == 2 else (p[0], "") for p in pairs)}
    bad = sorted(set(mapping) - {"id", "prompt", "category"}) + [
        k for k, v in mapping.items() if not v
    ]
    if "prompt" not in mapping or bad:
        raise SpecabError(
            f"--fields {text!r} is not a mapping with prompt",
            field="--fields",
            fix="write e.g. --fields id=question_id,prompt=text,category=kind",
        )
    return mapping


def _rows(fmt: str, path: Path) -> Iterable[tuple[str, Row]]:
    if not path.is_file():
        raise SpecabError("input file not found", file=path, fix="pass the prompt set's path")
    if path.suffix == ".parquet":
        if fmt != "speed-bench":
            raise SpecabError(
                f"{fmt} is read from JSON lines, not Parquet", file=path, fix="pass the .jsonl file"
            )
        return _parquet_rows(path)
    if fmt == "sharegpt":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise SpecabError(
                f"not JSON ({exc.msg}, line {exc.lineno})",
                file=path,
                fix="pass the ShareGPT .json file",
            ) from None
        if not isinstance(data, list):
            raise SpecabError(
                "not a JSON list of conversations", file=path, fix="pass the ShareGPT .json file"
            )
        return ((f"item {i}", r if isinstance(r, dict) else {}) for i, r in enumerate(data))
    return _jsonl_rows(path)


def import_prompts(
    fmt: str,
    path: Path,
    *,
    api: Api | None = None,
    fields: str | None = None,
    categories: list[str] | None = None,
    limit: int | None = None,
    max_tokens: int | None = None,
) -> Imported:
    """Probe-set lines for the prompts in `path` (read as `fmt`), ids and categories kept."""
    from bench.experiment.probes.bundled import spread

    if fmt not in FORMATS:
        raise SpecabError(
            f"unknown format {fmt!r}", field="FORMAT", fix=f"use one of: {', '.join(FORMATS)}"
        )
    read = _mapped(parse_mapping(fields)) if fmt == "jsonl" else READERS[fmt]
    items: list[_Item] = []
    seen: dict[str, str] = {}
    rows = 0
    for where, row in _rows(fmt, path):
        rows += 1
        item = read(path, where, row)
        if item.id in seen:
            raise _fail(
                path,
                where,
                "id",
                f"id {item.id!r} repeats {seen[item.id]}",
                "give every prompt its own id",
            )
        seen[item.id] = where
        if categories and item.category not in categories:
            continue
        items.append(item)
    if not items:
        raise SpecabError(
            "no prompts to import" + (f" in categories {categories}" if categories else ""),
            file=path,
            fix="check the format and --category",
        )
    chosen = [items[i] for i in spread(len(items), limit)]
    use: Api = api or DEFAULT_API.get(fmt, "chat")
    return Imported(
        [_line(i, use, max_tokens) for i in chosen], rows, sum(i.turns > 1 for i in chosen)
    )


def _line(item: _Item, api: Api, max_tokens: int | None) -> dict[str, Any]:
    line: dict[str, Any] = {"id": item.id}
    if api == "chat":
        line["messages"] = [{"role": "user", "content": item.first_turn}]
    else:
        line["prompt"] = item.first_turn
    if item.category:
        line["category"] = item.category
    if max_tokens:
        line["max_tokens"] = max_tokens
    return line
