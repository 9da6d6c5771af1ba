"""Served against trained, token by token: each served arm's output against each reference
arm's (docs/reference-forward.md) on the same probes. The inputs are checked first: a probe
that reached a server as other token ids than the reference tokenized (a chat template, a
system prompt, a tokenizer) is refused, since acceptance over different inputs compares
nothing. At temperature 0 a reference's boots repeat exactly; its first boot is the one
compared with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from bench.errors import SpecabError
from bench.records import PARITY_COLUMNS
from bench.stats.schema import OutputParity


def _key(row: Any) -> str:
    return f"{row.probe_set}/{row.probe_id}"


def _first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first index where two token sequences differ (the shorter's length when one is
    the other's prefix), None when equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _ids(value: Any) -> list[int] | None:
    """A stored token-id list (a list, a numpy array or an Arrow list), None when absent."""
    return None if value is None or value is pd.NA else [int(x) for x in value]


def _reference_rows(probes: pd.DataFrame, ref: str) -> dict[str, tuple[str, list[int]]]:
    rows = probes[probes["arm"] == ref]
    first = rows[rows["boot"] == rows["boot"].min()] if len(rows) else rows
    return {_key(r): (str(r.prompt_ids_sha256), _ids(r.output_token_ids) or [])
            for r in first.itertuples()}  # fmt: skip


def output_parity(
    probes: pd.DataFrame,
    arms: Sequence[str],
    references: Sequence[str],
    own: Mapping[str, str] | None = None,
) -> list[OutputParity]:
    """Each served arm of `arms` against each reference arm, or only against its own drafter's
    where `own` (served arm -> reference) names it (none without the columns)."""
    if not references or any(c not in probes.columns for c in PARITY_COLUMNS):
        return []
    own = own or {}
    out = []
    for ref in references:
        want = _reference_rows(probes, ref)
        for arm in (a for a in arms if a not in references and own.get(a, ref) == ref):
            rows = probes[probes["arm"] == arm]
            parts: list[int] = []
            parting: set[str] = set()
            unchecked = 0
            for r in rows.itertuples():
                key, ids, prompt = _key(r), _ids(r.output_token_ids), r.prompt_ids_sha256
                if key not in want:
                    continue
                if ids is None or not isinstance(prompt, str):
                    unchecked += 1
                    continue
                _same_inputs(key, arm, ref, prompt, want[key][0])
                at = _first_difference(ids, want[key][1])
                if at is not None:
                    parts.append(at)
                    parting.add(key)
            compared = len(rows) - unchecked
            out.append(
                OutputParity(arm=arm, reference=ref, compared=compared,
                             identical=compared - len(parts), first_difference=sorted(parts),
                             probes_parting=sorted(parting), unchecked=unchecked)
            )  # fmt: skip
    return out


def _same_inputs(key: str, arm: str, ref: str, served: str, reference: str) -> None:
    if served != reference:
        raise SpecabError(
            f"probe {key} reached arm {arm!r}'s server as other token ids than reference arm "
            f"{ref!r} tokenized (prompt_ids_sha256 {served[:12]} against {reference[:12]}): "
            "acceptance over different inputs compares nothing",
            field="probes.prompt_ids_sha256",
            fix="give the served arms and the reference the same chat template, system prompt "
            "and tokenizer (a completions probe with `prompt` is tokenized alike by both)",
        )


def parity_at(
    probes: pd.DataFrame,
    arms: Sequence[str],
    references: Sequence[str],
    temperature: float | None,
    own: Mapping[str, str] | None = None,
) -> tuple[list[OutputParity], list[str]]:
    """`output_parity` at temperature 0; above it tokens are samples: none, and a note."""
    if not temperature:
        return output_parity(probes, arms, references, own), []
    if not references:
        return [], []
    return [], [
        f"at temperature {temperature:g} served and reference tokens are samples, so no token-"
        "for-token parity is stated; each reference boot is a seed, compared by acceptance"
    ]
