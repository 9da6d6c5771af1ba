"""`trace.json`: where a served drafter departs from its reference forward, tensor by tensor
(`specab trace`, docs/trace.md). Written by `bench.trace`, read by the report and by other
tools: it changes only additively."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Trace(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TensorDiff(_Trace):
    """One captured tensor against the reference's, over every traced step."""

    name: str = Field(description="Trace name, e.g. layers.0.q_rope (docs/trace.md).")
    engine_module: str = Field(description="Where vLLM computes it.")
    reference_module: str = Field(description="The reference module hooked (its name map).")
    shape: list[int] = Field(description="Rows x features compared (the first step's).")
    steps: int = Field(description="Steps it was compared on.")
    max_abs: float = Field(description="Largest |engine - reference| over the steps.")
    rel: float = Field(description="Largest ||engine - reference|| / ||reference|| over steps.")
    cosine: float = Field(description="Smallest cosine over the steps (shown, never decides).")
    agrees: bool = Field(description="rel within the threshold.")


class ConfigField(_Trace):
    """A field that decides the drafter's geometry, as each side resolved it."""

    field: str = Field(description="e.g. layers.0.rotary_dim, aux_layer_ids.")
    engine: Any = Field(description="What vLLM resolved (null: not read).")
    reference: Any = Field(description="What the reference resolved (null: not in its map).")
    differs: bool = Field(description="Both known and unequal.")


class TraceResult(_Trace):
    """One trace: one boot of a served arm, its first steps replayed in a reference."""

    schema_version: Literal[1] = Field(1, description="trace.json schema version.")
    experiment: str = Field(description="Experiment name.")
    arm: str = Field(description="The served arm traced.")
    reference_arm: str = Field(description="The reference arm whose forward replayed it.")
    forward: str = Field(description="The reference forward, MODULE:FUNCTION.")
    probe: str = Field(description="The probe traced, SET/ID.")
    steps: int = Field(description="Verify steps captured and replayed.")
    threshold: float = Field(description="Relative error at or below which a tensor agrees.")
    tensors: list[TensorDiff] = Field(
        description="Forward order, the reference fed the aux features vLLM captured."
    )
    recomputed: list[TensorDiff] = Field(
        description="The same, the reference fed an HF transformers run of the target; "
        "target.aux here is vLLM's features against that run's."
    )
    first_divergence: str | None = Field(description="The first tensor that departs, or null.")
    verdict: str = Field(description="One line: what agrees and where serving departs.")
    config: list[ConfigField] = Field(description="Geometry fields, each side; differs marked.")
    notes: list[str] = Field(default_factory=list, description="Sentences worth reading.")
