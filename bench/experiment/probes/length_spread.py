"""Probe sets spread over prompt length (`specab probes … --spread-lengths TOKENIZER`):
acceptance decays along the context, so a set whose prompts all have one length hides it.
From every prompt of a collection, n are chosen whose lengths, as the target's tokenizer
counts the text (a chat template adds a few tokens), lie nearest to n targets evenly spaced
from the shortest to the longest (at most `most` tokens: the model's context less the
output). `analyze --by prompt_tokens` then compares arms along the length."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import SpecabError


def line_text(line: dict[str, Any]) -> str:
    """A probe line's prompt text (the first user turn of a chat line)."""
    if "prompt" in line:
        return str(line["prompt"])
    return " ".join(str(m.get("content", "")) for m in line.get("messages", []))


def token_counts(texts: list[str], tokenizer: Path) -> list[int]:
    """Each text's length in the tokenizer's tokens (a model directory or a tokenizer's)."""
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(tokenizer), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise SpecabError(
            f"no tokenizer loads from {tokenizer} ({type(exc).__name__})",
            field="--spread-lengths",
            fix="pass the target model's directory (or its tokenizer's)",
        ) from None
    return [len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]


def spread_by_length(lengths: list[int], n: int, most: int | None = None) -> list[int]:
    """Indices of n prompts (at most `most` tokens) spread evenly over their lengths,
    shortest first; fewer when fewer fit."""
    cand = [i for i, x in enumerate(lengths) if most is None or x <= most]
    if not cand:
        return []
    by_len = sorted(cand, key=lambda i: (lengths[i], i))
    lo, hi = lengths[by_len[0]], lengths[by_len[-1]]
    chosen: list[int] = []
    for target in np.linspace(lo, hi, min(n, len(by_len))):
        left = [i for i in by_len if i not in chosen]
        chosen.append(min(left, key=lambda i: (abs(lengths[i] - target), lengths[i], i)))
    return sorted(chosen, key=lambda i: (lengths[i], i))


def spread_lines(
    lines: list[dict[str, Any]], n: int, tokenizer: Path, most: int | None
) -> tuple[list[dict[str, Any]], list[int]]:
    """The chosen lines, shortest first, and their lengths."""
    lengths = token_counts([line_text(x) for x in lines], tokenizer)
    pick = spread_by_length(lengths, n, most)
    if not pick:
        raise SpecabError(
            f"no prompt is at most {most} tokens long", field="--max-prompt-tokens",
            fix="raise it, or leave it out",
        )  # fmt: skip
    return [lines[i] for i in pick], [lengths[i] for i in pick]
