"""Speculative-decoding counters: from `/metrics` (Prometheus text) and from responses.

Semantics are vLLM's: `num_drafts` = verify steps that carried draft tokens,
`accepted_per_pos[k]` = drafts whose first k+1 draft tokens were all accepted, so the list
is non-increasing and sums to `num_accepted_tokens`. Mean accepted length = 1 + A / D.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.errors import BootFailed

# Moved to bench.experiment (the preflight needs it before any boot); kept importable here.
from bench.experiment import supports_per_request_metrics as supports_per_request_metrics
from bench.experiment import vllm_package_dir as vllm_package_dir

PREFIX = "vllm:spec_decode_"
_SCALARS = {
    "num_drafts": f"{PREFIX}num_drafts",
    "num_draft_tokens": f"{PREFIX}num_draft_tokens",
    "num_accepted_tokens": f"{PREFIX}num_accepted_tokens",
}
_PER_POS = f"{PREFIX}num_accepted_tokens_per_pos"


@dataclass(frozen=True)
class SpecCounts:
    """Counts of one probe, one boot, or a cumulative /metrics snapshot."""

    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    accepted_per_pos: tuple[int, ...]

    @classmethod
    def zero(cls, k: int) -> SpecCounts:
        return cls(0, 0, 0, (0,) * k)

    def __add__(self, other: SpecCounts) -> SpecCounts:
        k = max(len(self.accepted_per_pos), len(other.accepted_per_pos))
        a, b = _pad(self.accepted_per_pos, k), _pad(other.accepted_per_pos, k)
        return SpecCounts(
            self.num_drafts + other.num_drafts,
            self.num_draft_tokens + other.num_draft_tokens,
            self.num_accepted_tokens + other.num_accepted_tokens,
            tuple(x + y for x, y in zip(a, b, strict=True)),
        )

    def minus(self, before: SpecCounts) -> SpecCounts:
        """self - before; a counter that went down means the server restarted its counters."""
        k = max(len(self.accepted_per_pos), len(before.accepted_per_pos))
        pairs = [
            ("num_drafts", self.num_drafts, before.num_drafts),
            ("num_draft_tokens", self.num_draft_tokens, before.num_draft_tokens),
            ("num_accepted_tokens", self.num_accepted_tokens, before.num_accepted_tokens),
        ] + [
            (f"accepted_per_pos[{i}]", x, y)
            for i, (x, y) in enumerate(
                zip(_pad(self.accepted_per_pos, k), _pad(before.accepted_per_pos, k), strict=True)
            )
        ]
        for name, now, then in pairs:
            if now < then:
                raise BootFailed(f"counter reset: {PREFIX}{name} went from {then} to {now}")
        diffs = [now - then for _, now, then in pairs]
        return SpecCounts(diffs[0], diffs[1], diffs[2], tuple(diffs[3:]))

    def as_row(self) -> dict[str, Any]:
        """The count columns of PROBE_SCHEMA / BOOT_SCHEMA."""
        return {
            "num_drafts": self.num_drafts,
            "num_draft_tokens": self.num_draft_tokens,
            "num_accepted_tokens": self.num_accepted_tokens,
            "accepted_per_pos": list(self.accepted_per_pos),
        }

    @property
    def acceptance_pos0(self) -> float:
        return self.accepted_per_pos[0] / self.num_drafts if self.num_drafts else float("nan")

    @property
    def mean_accepted_length(self) -> float:
        return 1 + self.num_accepted_tokens / self.num_drafts if self.num_drafts else float("nan")


def _pad(xs: tuple[int, ...], k: int) -> tuple[int, ...]:
    return xs + (0,) * (k - len(xs))


def parse_metrics_text(text: str, num_spec_tokens: int) -> SpecCounts:
    """Sum the spec-decode counters over all label sets (engine, model_name, ...).

    Missing families (no speculative decoding configured) read as zero.
    """
    sums = dict.fromkeys(_SCALARS.values(), 0.0)
    per_pos = [0.0] * num_spec_tokens
    for family in text_string_to_metric_families(_spec_lines(text)):
        if not family.name.startswith(PREFIX):
            continue
        for s in family.samples:
            if not s.name.endswith("_total"):  # skip _created timestamps
                continue
            if family.name in sums:
                sums[family.name] += s.value
            elif family.name == _PER_POS:
                pos = int(s.labels["position"])
                if pos >= num_spec_tokens:
                    raise BootFailed(
                        f"/metrics reports position {pos} but num_speculative_tokens is "
                        f"{num_spec_tokens}"
                    )
                per_pos[pos] += s.value
    return SpecCounts(
        int(sums[_SCALARS["num_drafts"]]),
        int(sums[_SCALARS["num_draft_tokens"]]),
        int(sums[_SCALARS["num_accepted_tokens"]]),
        tuple(int(v) for v in per_pos),
    )


def _spec_lines(text: str) -> str:
    """Only the spec-decode families (samples, HELP, TYPE): parsing the whole ~50 KB page
    costs ~100 ms, which would dominate a short probe's scrape."""
    keep = ("vllm:spec_decode_", "# HELP vllm:spec_decode_", "# TYPE vllm:spec_decode_")
    return "".join(ln for ln in text.splitlines(keepends=True) if ln.startswith(keep))


def positions_in_metrics(text: str) -> int:
    """num_speculative_tokens as the server reports it: the number of `position` labels of
    the per-position counter (vLLM exports every position from start-up, at zero)."""
    positions = {
        s.labels["position"]
        for family in text_string_to_metric_families(_spec_lines(text))
        if family.name == _PER_POS
        for s in family.samples
        if "position" in s.labels
    }
    return len(positions)


def _page(client: httpx.Client) -> str:
    try:
        resp = client.get("/metrics")
        resp.raise_for_status()
    except httpx.HTTPError as exc:
        raise BootFailed(f"cannot scrape /metrics: {exc!r}") from None
    return resp.text


def scrape(client: httpx.Client, num_spec_tokens: int) -> SpecCounts:
    """GET /metrics on a running server (client has base_url set)."""
    text = _page(client)
    try:
        return parse_metrics_text(text, num_spec_tokens)
    except (ValueError, KeyError) as exc:  # not Prometheus text: the server's fault
        raise BootFailed(f"malformed /metrics: {exc!r}") from None


def scrape_k(client: httpx.Client) -> int:
    """num_speculative_tokens as a running server reports it (for a method's default K)."""
    text = _page(client)
    try:
        k = positions_in_metrics(text)
    except (ValueError, KeyError) as exc:
        raise BootFailed(f"malformed /metrics: {exc!r}") from None
    if k < 1:
        raise BootFailed(
            "no drafts: speculative decoding off? (/metrics has no spec_decode counters)"
        )
    return k


def counts_from_response(obj: Mapping[str, Any], num_spec_tokens: int) -> SpecCounts:
    """Counts from a response's `metrics.speculative_decoding` object (vLLM >= 0.32).

    Uses the per-step arrays (`detailed`) when present, else the acceptance histogram,
    and checks that both agree with the summary fields. A malformed object is BootFailed.
    """
    try:
        return _counts_from_response(obj, num_spec_tokens)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise BootFailed(f"malformed metrics.speculative_decoding: {exc!r}") from None


def _counts_from_response(obj: Mapping[str, Any], num_spec_tokens: int) -> SpecCounts:
    k = int(obj["num_spec_tokens"])
    if k != num_spec_tokens:
        raise BootFailed(f"response reports num_spec_tokens={k}, expected {num_spec_tokens}")
    hist = [int(x) for x in obj["acceptance_histogram"]]
    if len(hist) != k + 1:  # steps with 0..K accepted: K + 1 entries
        raise BootFailed(
            f"per-request metrics: acceptance_histogram has {len(hist)} entries, "
            f"not K + 1 = {k + 1}"
        )
    steps = obj.get("per_step_accepted")
    if steps is not None:
        step_hist = [0] * (k + 1)
        for j in steps:
            step_hist[int(j)] += 1
        drafted = sum(int(x) for x in obj.get("per_step_drafted") or [])
        if step_hist != hist or drafted != int(obj["num_draft_tokens"]):
            raise BootFailed("per-request metrics: per-step arrays disagree with the summary")
    counts = SpecCounts(
        num_drafts=sum(hist),
        num_draft_tokens=int(obj["num_draft_tokens"]),
        num_accepted_tokens=sum(j * c for j, c in enumerate(hist)),
        accepted_per_pos=tuple(sum(hist[p + 1 :]) for p in range(k)),
    )
    if counts.num_drafts != int(obj["num_spec_steps"]) or counts.num_accepted_tokens != int(
        obj["num_accepted_draft_tokens"]
    ):
        raise BootFailed("per-request metrics: histogram disagrees with the summary counts")
    return counts


def drafted_per_position(obj: Mapping[str, Any], k: int) -> tuple[int, ...] | None:
    """Steps that drafted at least p + 1 tokens, p = 0..K-1, from `per_step_drafted` (vLLM's
    `detailed` per-request metrics); None without it. /metrics has no drafted-per-position,
    and `accepted_per_pos / num_drafts` counts a position never drafted as rejected."""
    steps = obj.get("per_step_drafted")
    if not steps:
        return None
    drafted = [int(x) for x in steps]
    if any(d < 0 or d > k for d in drafted):
        raise BootFailed(f"per-request metrics: per_step_drafted outside 0..{k}: {drafted}")
    return tuple(sum(d > p for d in drafted) for p in range(k))


def ordered_steps(obj: Mapping[str, Any]) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """The accepted and drafted counts of each verify step in output order (vLLM's
    `detailed` per-request metrics), or (None, None) without them; `_counts_from_response`
    has already checked them against the summary."""
    acc, drafted = obj.get("per_step_accepted"), obj.get("per_step_drafted")
    if not acc or not drafted or len(acc) != len(drafted):
        return None, None
    return tuple(int(x) for x in acc), tuple(int(x) for x in drafted)


def check_counts(c: SpecCounts, what: str) -> None:
    """Invariants every count set must satisfy; BootFailed naming `what` otherwise."""
    pos = c.accepted_per_pos
    problems = []
    if c.num_accepted_tokens > c.num_draft_tokens:
        problems.append("accepted > draft tokens")
    if any(a < b for a, b in itertools.pairwise(pos)):
        problems.append(f"accepted_per_pos not non-increasing {list(pos)}")
    if sum(pos) != c.num_accepted_tokens:
        problems.append("sum(accepted_per_pos) != accepted tokens")
    if pos and pos[0] > c.num_drafts:
        problems.append("accepted_per_pos[0] > drafts")
    if problems:
        raise BootFailed(f"invalid counts for {what}: " + "; ".join(problems))


def vllm_version(client: httpx.Client) -> str:
    """The version the server reports at /version ("" when it does not say)."""
    try:
        body = client.get("/version").json()
    except (httpx.HTTPError, ValueError):
        return ""
    return str(body.get("version", "")) if isinstance(body, dict) else ""
