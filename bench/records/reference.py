"""A trusted reference for `specab gate` (one versioned JSON file per reference, written by
`bench.store.save_reference`): a run's per-boot values per arm and what they were measured on.

`bench.stats.gate` builds the arms from an analysis, `bench.store` adds when, where and by
which release it was saved and writes it; `load_reference` validates it back into these
models, so the gate reads typed fields and a hand-edited file is refused in one line.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

REFERENCE_VERSION = 1


class _Stored(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ReferenceBoot(_Stored):
    """One ok boot of a reference arm, as `analyze` measured it (its `per_boot` entry)."""

    boot_id: str = Field(description="Boot attempt id.")
    boot: int = Field(description="0-based boot index within the arm.")
    order: int = Field(description="Global launch order.")
    drafts: float = Field(description="Drafts of this boot on the compared probes.")
    acceptance_pos0: float | None = Field(description="This boot's ratio of sums, position 0.")
    mean_accepted_length: float | None = Field(description="This boot's 1 + accepted / drafts.")
    output_tokens_per_s: float | None = Field(None, description="Σ completion tokens / Σ latency.")
    completion_tokens: float | None = Field(None, description="Completion tokens.")
    latency_s: float | None = Field(None, description="Sum of request latencies (s).")
    request_mean_accepted_length: float | None = Field(
        None, description="Mean over its requests of 1 + accepted / drafts (None: older file)."
    )


class ReferenceArm(_Stored):
    """One arm of a reference: its boots and what a gated run must share with it."""

    speculative: bool = Field(description="False: no speculation (speed only).")
    num_speculative_tokens: list[int] = Field(description="K of its ok boots.")
    probe_sets_sha256: list[str] = Field(description="Probe sets its ok boots ran.")
    definition_sha256: list[str] = Field(description="Arm definitions its ok boots ran.")
    vllm_versions: list[str] = Field(description="vLLM versions of its ok boots.")
    hosts: list[str] = Field(description="Hosts of its ok boots.")
    gpus: list[str] = Field(description="GPUs of its ok boots.")
    boots: list[ReferenceBoot] = Field(description="Each ok boot's values.")


class Machine(_Stored):
    """The machine `reference save` ran on."""

    cpu: str = Field(description="CPU model name.")
    platform: str = Field(description="platform.platform().")


class Reference(_Stored):
    """One stored reference."""

    reference_version: Literal[1] = Field(description="Reference file format version.")
    name: str = Field(description="Reference name.")
    created_at: str = Field(description="When it was saved (ISO 8601, UTC).")
    specab_version: str = Field(description="The specab release that saved it.")
    experiment: str | None = Field(description="The experiment of the run it was saved from.")
    source: str = Field(description="The results directory it was saved from.")
    machine: Machine = Field(description="Where it was saved.")
    arms: dict[str, ReferenceArm] = Field(description="Arm -> its boots and provenance.")
