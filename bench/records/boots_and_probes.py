"""The rows of the results contract (docs/results.md, schema_version 1) as typed,
immutable records, and the Parquet schemas they are stored with.

One record per boot attempt (`BootRecord`) and one per measured probe (`ProbeRecord`). They
validate on construction (pyperf's `Run` habit): a boot row that says `ok` without counts, or
a probe row with a negative count, cannot be built, so it can never be written. The store
writes exactly these columns; readers of other tools see the same layout as before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, model_validator

SCHEMA_VERSION = 1
BootStatus = Literal["ok", "failed"]
# Where a failed attempt stopped: before /health, at the patch check, at the boot's first
# request (warmup or measured), at a later probe, or at the boot's final counter check.
FailedPhase = Literal["start", "patch_check", "first_request", "probes", "counts"]
AcceptanceSource = Literal["per_request", "metrics_delta", "reference"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProbeRecord(_Record):
    """One measured probe of one ok boot (warmup probes are never recorded)."""

    experiment: str = Field(description="Experiment name.")
    arm: str = Field(description="Arm name.")
    boot: int = Field(ge=0, description="0-based boot index within the arm.")
    boot_id: str = Field(description="Unique id of the boot attempt (the file stem).")
    probe_set: str = Field(description="Probe set name (file stem).")
    probe_id: str = Field(description="Probe id within its set.")
    num_drafts: int = Field(ge=0, description="Draft proposals (verify steps with drafts).")
    num_draft_tokens: int = Field(ge=0, description="Draft tokens proposed.")
    num_accepted_tokens: int = Field(ge=0, description="Draft tokens accepted.")
    accepted_per_pos: tuple[int, ...] = Field(
        description="vLLM's cumulative per-position counts, length num_speculative_tokens."
    )
    prompt_tokens: int = Field(ge=0, description="Prompt tokens (response usage).")
    completion_tokens: int = Field(ge=0, description="Completion tokens (response usage).")
    output_sha256: str = Field(description="sha256 of the generated text.")
    source: AcceptanceSource = Field(description="Where the per-probe counts came from.")
    latency_s: float = Field(ge=0, description="Request wall time in seconds.")
    # Additive columns beyond the contract's minimum (results/README.md); None when unknown.
    category: str | None = Field(None, description="The probe's category in its probe set.")
    ttft_s: float | None = Field(
        None, ge=0, description="Time to first token, server-side (scheduled to first token)."
    )
    tpot_s: float | None = Field(
        None, ge=0, description="Mean time per output token after the first, server-side."
    )
    queue_s: float | None = Field(
        None, ge=0, description="Time the request waited in the server's queue."
    )
    sequence: int | None = Field(
        None, ge=0, description="Order in which the boot issued this probe (0-based)."
    )
    acceptance_histogram: tuple[int, ...] | None = Field(
        None,
        description="Per-request histogram of accepted draft tokens per verify step "
        "(K + 1 entries: steps with 0..K accepted), when the server reports it.",
    )
    pass_index: int | None = Field(
        None,
        ge=0,
        description="Which pass over the probe set this row is (0-based) when the boot ran "
        "[probes] passes > 1; null for a single pass.",
    )
    drafted_per_pos: tuple[int, ...] | None = Field(
        None,
        description="Verify steps that drafted at least k + 1 tokens, per position k (length "
        "K), from the response's per_step_drafted; equals num_drafts at every k when each "
        "step drafts K (draft models), less where the drafter proposes fewer (ngram, dynamic "
        "speculation); null where only /metrics counts exist.",
    )
    step_accepted: tuple[int, ...] | None = Field(
        None,
        description="Draft tokens accepted at each verify step, in the order of the output "
        "(vLLM's per_step_accepted); where along the output acceptance changes. Null where the "
        "server gives only per-request totals.",
    )
    step_drafted: tuple[int, ...] | None = Field(
        None,
        description="Draft tokens proposed at each verify step, in output order (vLLM's "
        "per_step_drafted), aligned with step_accepted.",
    )
    prompt_ids_sha256: str | None = Field(
        None,
        description="token_ids_sha256 of the prompt's token ids as the server tokenized it "
        "(chat template, system prompt and special tokens applied; the response's "
        "prompt_token_ids): equal across arms when every arm was asked the same thing. Null "
        "where the server does not return token ids.",
    )
    output_token_ids: tuple[int, ...] | None = Field(
        None,
        description="The generated token ids (the response's token_ids): where two arms' "
        "outputs first differ, as a token index. Null where the server does not return them.",
    )


def token_ids_sha256(ids: Sequence[int]) -> str:
    """One hash of a token-id sequence for every side that tokenizes a probe: sha256 of the
    ids in decimal, comma-separated (`1,2,3`)."""
    return hashlib.sha256(",".join(str(int(i)) for i in ids).encode("ascii")).hexdigest()


class BootRecord(_Record):
    """One boot attempt, ok or failed. Count columns are the boot's whole /metrics delta over
    its measured probes (None for a failed attempt that never got that far)."""

    experiment: str = Field(description="Experiment name.")
    arm: str = Field(description="Arm name.")
    boot: int = Field(ge=0, description="0-based boot index within the arm.")
    attempt: int = Field(ge=1, description="Attempt number of this boot, from 1.")
    boot_id: str = Field(description="Unique id of the attempt: <arm>__b<boot>__a<attempt>.")
    status: BootStatus = Field(description="ok: measured and valid; failed: see error.")
    error: str | None = Field(None, description="One line: why the attempt failed.")
    order: int = Field(ge=0, description="Global launch order of the attempt.")
    block: int = Field(ge=0, description="Interleaving block (one boot per arm).")
    host: str = Field("", description="Node that ran the boot (label unique in the run).")
    gpu: str = Field("", description="GPU ids the boot saw (empty on CPU).")
    started_at: datetime | None = Field(None, description="Server start (UTC).")
    ready_at: datetime | None = Field(None, description="/health ready (UTC).")
    finished_at: datetime | None = Field(None, description="Attempt end (UTC).")
    boot_seconds: float | None = Field(None, ge=0, description="Start to /health, seconds.")
    probe_seconds: float | None = Field(None, ge=0, description="Measured probes, seconds.")
    num_speculative_tokens: int = Field(0, ge=0, description="Draft tokens per step (K).")
    vllm_version: str = Field("", description="vLLM version the server reported.")
    log_path: str | None = Field(None, description="Server log, relative to the results dir.")
    num_drafts: int | None = Field(None, ge=0, description="Boot /metrics delta: drafts.")
    num_draft_tokens: int | None = Field(None, ge=0, description="Delta: draft tokens.")
    num_accepted_tokens: int | None = Field(None, ge=0, description="Delta: accepted tokens.")
    accepted_per_pos: tuple[int, ...] | None = Field(
        None, description="Delta: cumulative accepted per position."
    )
    # Additive columns beyond the contract's minimum (documented in results/README.md).
    engine_seed: int | None = Field(None, description="The engine --seed of this boot.")
    compile_cache: str | None = Field(None, description="cold | warm: vLLM's compile cache.")
    definition_sha256: str | None = Field(
        None, description="The arm's definition hash when this boot ran (resume integrity)."
    )
    probe_sets_sha256: str | None = Field(
        None, description="Hash over the probe sets (name and sha256) this boot ran."
    )
    noop_patches: tuple[str, ...] = Field(
        (), description="Patches that reported 'not needed in this build' (allowed by the arm)."
    )
    speculative: bool = Field(
        True, description="Speculative decoding was on (false: a no-speculation speed arm)."
    )
    concurrency: int = Field(1, ge=1, description="Probes in flight at once in this boot.")
    members: int = Field(1, ge=1, description="Nodes this boot's server spanned (gang boots).")
    member_hosts: tuple[str, ...] = Field(
        (), description="Every member's node label, head first (gang boots)."
    )
    image_id: str | None = Field(
        None,
        description="Container arms: the image's content on the head's node (sha256 over its "
        "layers and run config; older results: the runtime's local id); every gang member's node "
        "held the same (a member with another is refused).",
    )
    failed_phase: FailedPhase | None = Field(
        None,
        description="Where a failed attempt stopped: start (before /health), patch_check, "
        "first_request (the boot's first request), probes, counts (the final check); null "
        "for ok attempts and for attempts whose worker or node died.",
    )
    slot: int | None = Field(
        None,
        ge=0,
        description="Which of its node's slots the boot ran in (the driver's index; a gang "
        "boot: the head's). Boots sharing a node at once ran in different slots.",
    )
    cpus: str = Field(
        "", description="The CPU cores its server was bound to (its slot's); empty: unbound."
    )
    warnings: tuple[str, ...] = Field(
        (),
        description="What went wrong without spoiling the measurement, one line each (a "
        "process that outlived SIGKILL for a while; the boot's slot was held until it went).",
    )
    corun_group: str | None = Field(
        None,
        description="The duet (co-run group) it was measured in: boots of one group were "
        "launched together on one node and began their probes at one barrier once all were "
        "ready. Null: measured without one (launched alone, duets off, or a partner that "
        "never reached the barrier).",
    )
    no_drafts: str | None = Field(
        None,
        description="An ok boot of a speculative arm that drafted on none of its requests: "
        "why, one line with the server log's words on speculation. Its probes are stored and "
        "count in tokens/s; the analysis keeps it out of acceptance. Null: it drafted.",
    )
    reference_forward: str | None = Field(
        None,
        description="A reference arm's boot: the drafter's own forward it drove offline "
        "(MODULE:FUNCTION), with no server; its probes' latency is that forward's, not a "
        "served speed, so the analysis states no tokens/s for it. Null: a served boot.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> BootRecord:
        if self.status == "failed" and not (self.error or "").strip():
            raise ValueError("a failed attempt needs its error")
        counts = (self.num_drafts, self.num_draft_tokens, self.num_accepted_tokens)
        if self.status != "ok":
            if self.no_drafts is not None:
                raise ValueError("no_drafts describes an ok boot (a failed one has its error)")
            return self
        if any(c is None for c in counts) or self.accepted_per_pos is None:
            raise ValueError("an ok boot needs its whole /metrics delta (counts)")
        if self.speculative and not self.accepted_per_pos:
            raise ValueError("an ok speculative boot needs its per-position counts")
        if not self.speculative and any(counts):
            raise ValueError("a no-speculation boot cannot have drafts")
        return self


PROBE_SCHEMA = pa.schema(
    [
        ("experiment", pa.string()),
        ("arm", pa.string()),
        ("boot", pa.int64()),
        ("boot_id", pa.string()),
        ("probe_set", pa.string()),
        ("probe_id", pa.string()),
        ("num_drafts", pa.int64()),
        ("num_draft_tokens", pa.int64()),
        ("num_accepted_tokens", pa.int64()),
        ("accepted_per_pos", pa.list_(pa.int64())),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("output_sha256", pa.string()),
        ("source", pa.string()),
        ("latency_s", pa.float64()),
        ("category", pa.string()),
        ("ttft_s", pa.float64()),
        ("tpot_s", pa.float64()),
        ("queue_s", pa.float64()),
        ("sequence", pa.int64()),
        ("acceptance_histogram", pa.list_(pa.int64())),
        ("pass_index", pa.int64()),
        ("drafted_per_pos", pa.list_(pa.int64())),
        ("step_accepted", pa.list_(pa.int64())),
        ("step_drafted", pa.list_(pa.int64())),
        ("prompt_ids_sha256", pa.string()),
        ("output_token_ids", pa.list_(pa.int64())),
    ]
)
# What a served probe is compared with a reference arm's by (`analyze`'s parity): read with
# the rest wherever a run has a reference arm (10^6 served rows of output ids are not read).
PARITY_COLUMNS = ("prompt_ids_sha256", "output_token_ids")
# Columns a writer may leave out of a probe frame (stored as null): beyond the contract's
# minimum and not known to every acceptance source or server build.
PROBE_OPTIONAL = (
    "category", "ttft_s", "tpot_s", "queue_s", "sequence", "acceptance_histogram", "pass_index",
    "drafted_per_pos", "step_accepted", "step_drafted", "prompt_ids_sha256", "output_token_ids",
)  # fmt: skip

_TS = pa.timestamp("us", tz="UTC")
BOOT_SCHEMA = pa.schema(
    [
        ("experiment", pa.string()),
        ("arm", pa.string()),
        ("boot", pa.int64()),
        ("attempt", pa.int64()),
        ("boot_id", pa.string()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("order", pa.int64()),
        ("block", pa.int64()),
        ("host", pa.string()),
        ("gpu", pa.string()),
        ("started_at", _TS),
        ("ready_at", _TS),
        ("finished_at", _TS),
        ("boot_seconds", pa.float64()),
        ("probe_seconds", pa.float64()),
        ("num_speculative_tokens", pa.int64()),
        ("vllm_version", pa.string()),
        ("log_path", pa.string()),
        ("num_drafts", pa.int64()),
        ("num_draft_tokens", pa.int64()),
        ("num_accepted_tokens", pa.int64()),
        ("accepted_per_pos", pa.list_(pa.int64())),
        ("engine_seed", pa.int64()),
        ("compile_cache", pa.string()),
        ("definition_sha256", pa.string()),
        ("probe_sets_sha256", pa.string()),
        ("noop_patches", pa.list_(pa.string())),
        ("speculative", pa.bool_()),
        ("concurrency", pa.int64()),
        ("members", pa.int64()),
        ("member_hosts", pa.list_(pa.string())),
        ("failed_phase", pa.string()),
        ("warnings", pa.list_(pa.string())),
        ("slot", pa.int64()),
        ("cpus", pa.string()),
        ("corun_group", pa.string()),
        ("image_id", pa.string()),
        ("no_drafts", pa.string()),
        ("reference_forward", pa.string()),
    ]
)


def boot_file_stem(arm: str, boot: int, attempt: int) -> str:
    """The boot_id and file stem of one attempt (one rule for `specab boot` and run-ab)."""
    return f"{arm}__b{boot:03d}__a{attempt}"
