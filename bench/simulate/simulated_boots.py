"""Rows of a simulated run (`bench.simulate.runs`): one probe frame and one `BootRecord` per
boot attempt, in the store's schemas, from the generative model's cell arrays."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from bench.records import BootRecord, boot_file_stem
from bench.simulate.generative import SimParams

Ints = NDArray[np.int64]
F = NDArray[np.float64]


@dataclass(frozen=True)
class SimBoot:
    """One ok boot's cells: drafts (P,), cumulative accepted (P, K), completion tokens and
    latency (P,); `speculative` False makes it a no-speculation boot (no drafts, K = 0)."""

    drafts: Ints
    acc: Ints
    completion: Ints
    latency: F
    speculative: bool = True


def histogram(drafts: Ints, acc: Ints) -> Ints:
    """Verify steps accepting exactly 0..K tokens per probe (P, K + 1), from the cumulative
    counts: acceptance is a prefix, so exactly j = A_(j-1) - A_j with A_(-1) = drafts."""
    prev = np.concatenate([drafts[:, None], acc], axis=1)
    nxt = np.concatenate([acc, np.zeros((acc.shape[0], 1), dtype=np.int64)], axis=1)
    out: Ints = prev - nxt
    return out


@dataclass(frozen=True)
class SimBootId:
    """Which attempt a simulated boot is, and where it ran."""

    experiment: str
    arm: str
    boot: int
    attempt: int
    order: int  # launch order in the run
    host: str = "sim-host"

    @property
    def boot_id(self) -> str:
        return boot_file_stem(self.arm, self.boot, self.attempt)


@dataclass(frozen=True)
class SimPrompts:
    """The probes every boot of a simulated run measures."""

    probe_set: str
    probe_ids: list[str]
    prompt_tokens: Ints
    categories: list[str] | None = None


def probe_frame(sim: SimBoot, who: SimBootId, prompts: SimPrompts) -> pd.DataFrame:
    """The probe rows of one boot (accepted_per_pos and histograms as lists)."""
    k = sim.acc.shape[1] if sim.speculative else 0
    d = sim.drafts if sim.speculative else np.zeros_like(sim.drafts)
    acc = sim.acc if sim.speculative else np.zeros((d.size, 0), dtype=np.int64)
    ttft = 0.1 * sim.latency  # prefill and first token: a fixed share of the request
    return pd.DataFrame(
        {
            "experiment": who.experiment,
            "arm": who.arm,
            "boot": who.boot,
            "boot_id": who.boot_id,
            "probe_set": prompts.probe_set,
            "probe_id": prompts.probe_ids,
            "num_drafts": d,
            "num_draft_tokens": d * k,
            "num_accepted_tokens": acc.sum(axis=1),
            "accepted_per_pos": acc.tolist(),
            "prompt_tokens": prompts.prompt_tokens,
            "completion_tokens": sim.completion,
            "output_sha256": [f"sim-{who.arm}-{who.boot}-{p}" for p in prompts.probe_ids],
            "source": "per_request",
            "latency_s": sim.latency,
            "category": prompts.categories,
            "ttft_s": ttft,
            "tpot_s": (sim.latency - ttft) / np.maximum(sim.completion - 1, 1),
            "queue_s": 0.0,
            "sequence": np.arange(d.size),
            "acceptance_histogram": histogram(d, acc).tolist() if sim.speculative else None,
            "pass_index": None,  # one pass per boot
            # a draft model: every verify step drafts all K positions
            "drafted_per_pos": np.repeat(d[:, None], k, axis=1).tolist()
            if sim.speculative
            else None,
            "step_accepted": None,  # steps in output order: `output_steps.with_steps`
            "step_drafted": None,
            "prompt_ids_sha256": None,  # no tokenizer: the simulation has no token ids
            "output_token_ids": None,
        }
    )


def boot_record(
    who: SimBootId,
    sim: SimBoot | None,
    k: int,
    t0: datetime,
    params: SimParams,
    rng: np.random.Generator,
) -> BootRecord:
    """The boot row: ok with its totals (the /metrics delta equals the probe sums), or a
    failed attempt (sim None) with its error."""
    start = t0 + timedelta(minutes=2 * who.order)
    boot_s = float(params.boot_seconds * rng.lognormal(0.0, 0.1))
    ok = sim is not None
    spec = sim is None or sim.speculative
    probe_s = float(sim.latency.sum()) if sim is not None else 0.0
    drafts = int(sim.drafts.sum()) if sim is not None and spec else 0
    per_pos = tuple(int(x) for x in sim.acc.sum(axis=0)) if sim is not None and spec else ()
    stem = who.boot_id
    return BootRecord(
        experiment=who.experiment,
        arm=who.arm,
        boot=who.boot,
        attempt=who.attempt,
        boot_id=stem,
        status="ok" if ok else "failed",
        error=None if ok else "simulated failure: server exited during startup",
        order=who.order,
        block=who.boot,
        host=who.host,
        gpu="sim-gpu",
        started_at=start,
        ready_at=start + timedelta(seconds=boot_s) if ok else None,
        finished_at=start + timedelta(seconds=boot_s + probe_s),
        boot_seconds=boot_s if ok else None,
        probe_seconds=probe_s if ok else None,
        num_speculative_tokens=k if spec else 0,
        vllm_version="sim",
        log_path=f"logs/{stem}.log",
        num_drafts=drafts if ok else None,
        num_draft_tokens=drafts * k if ok else None,
        num_accepted_tokens=sum(per_pos) if ok else None,
        accepted_per_pos=per_pos if ok else None,
        engine_seed=who.order,
        compile_cache=None,
        speculative=spec,
    )
