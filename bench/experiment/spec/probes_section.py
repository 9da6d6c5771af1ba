"""The `[probes]` table: probe sets, sampling, and how a boot measures them (concurrency,
acceptance and timing sources). Split from `experiment_file.py` only for size; that module
imports it and `load_spec` validates it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ProbesSection(_Model):
    sets: list[str] = Field(min_length=1, description="Probe set JSONL files.")
    max_tokens: int = Field(64, ge=1, description="Default completion length per probe.")
    temperature: float = Field(0.0, ge=0, description="Sampling temperature.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling parameter.")
    seed: int | None = Field(None, description="Per-request sampling seed (None: engine stream).")
    warmup: int = Field(2, ge=0, description="Warmup probes run first and excluded from data.")
    passes: int = Field(
        1,
        ge=1,
        description="Times each boot runs the whole probe set (pass recorded per probe row): "
        "> 1 measures drift within a boot (`specab analyze` compares the first and last pass).",
    )
    concurrency: int = Field(
        1,
        ge=1,
        description="Probes in flight at once (arms may override); >1 needs per-request "
        "acceptance metrics (vLLM >= 0.32), since /metrics deltas cannot split concurrent probes.",
    )
    acceptance_source: Literal["auto", "per_request", "metrics_delta"] = Field(
        "auto", description="Where per-probe acceptance comes from."
    )
    timing_source: Literal["auto", "per_request", "off"] = Field(
        "auto",
        description="Server-side TTFT/TPOT/queue time per probe (--enable-per-request-metrics): "
        "auto = when the arm's vLLM has it, per_request = required, off = never.",
    )
    request_timeout_s: float = Field(300.0, gt=0, description="Timeout for one probe request.")
    ignore_eos: bool = Field(
        False, description="Generate max_tokens even past EOS (fixed workload per probe)."
    )
