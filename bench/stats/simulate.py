"""Simulated results from the STATISTICS.md generative model (`bench.stats._simmodel`), in
the exact store schemas.

The truth is known, so tests use it to calibrate `bench.stats`: `simulate_boot_totals` is the
vectorized path (many replicates at once, boot totals only); `simulate_frames` /
`simulate_results` produce probe and boot rows / a whole results directory, written through
`ResultsWriter` with the boot ids and attempt numbers of real runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from numpy.typing import NDArray

from bench.records import (
    BOOT_SCHEMA,
    DEFAULT_MARGINS,
    PROBE_OPTIONAL,
    PROBE_SCHEMA,
    BootRecord,
    boot_file_stem,
)
from bench.stats._simmodel import (
    DEFAULT_MU,
    PromptSet,
    SimParams,
    draw_prompt_set,
    mu_for,
    simulate_boot_totals,
    simulate_counts,
)
from bench.store import ResultsWriter

__all__ = [
    "DEFAULT_MU", "PromptSet", "SimParams", "SimRun", "draw_prompt_set", "mu_for",
    "simulate_boot_totals", "simulate_counts", "simulate_frames", "simulate_results",
    "simulate_run", "simulated_manifest",
]  # fmt: skip


def _boot_counts(boots: int | Mapping[str, int], arms: list[str]) -> dict[str, int]:
    if isinstance(boots, int):
        return dict.fromkeys(arms, boots)
    return {a: int(boots[a]) for a in arms}


@dataclass(frozen=True)
class SimRun:
    """A simulated run: probe rows (PROBE_SCHEMA columns) and one record per boot attempt."""

    probes: pd.DataFrame
    boots: list[BootRecord]

    @property
    def boots_frame(self) -> pd.DataFrame:
        """The boot records as `load_results` returns them (BOOT_SCHEMA columns)."""
        return pa.Table.from_pylist([r.model_dump() for r in self.boots], BOOT_SCHEMA).to_pandas()

    def write(self, writer: ResultsWriter) -> None:
        """Each attempt through the store, as a real run writes it."""
        by_boot = dict(tuple(self.probes.groupby("boot_id", sort=False)))
        for rec in self.boots:
            rows = by_boot.get(rec.boot_id) if rec.status == "ok" else None
            writer.write_boot(rec, rows.reset_index(drop=True) if rows is not None else ())


def simulate_frames(
    arms: Mapping[str, float],
    **options: Any,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(probes, boots) DataFrames in the PROBE_SCHEMA / BOOT_SCHEMA column layout."""
    run = simulate_run(arms, **options)
    return run.probes, run.boots_frame


def simulate_run(
    arms: Mapping[str, float],
    *,
    boots: int | Mapping[str, int] = 5,
    prompts: int = 100,
    seed: int = 0,
    params: SimParams = SimParams(),
    experiment: str = "sim",
    probe_set: str = "sim",
    failed_boots: int | Mapping[str, int] = 0,
) -> SimRun:
    """Probe rows and boot records with the ids, attempt numbers and columns of real runs.

    `arms` maps arm name -> delta (logit shift). Boots are interleaved in blocks (one per
    arm) as the orchestrator runs them; `failed_boots` adds failed attempts (no probes).
    """
    rng = np.random.default_rng(seed)
    names = list(arms)
    per_arm = _boot_counts(boots, names)
    b_max = max(per_arm.values())
    drafts, acc, length = simulate_counts(
        rng, [arms[a] for a in names], b_max, prompts, params, replicates=1
    )
    drafts, acc = drafts[0], acc[0]
    k = params.positions
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    probe_ids = [f"p{p:04d}" for p in range(prompts)]
    prompt_tokens = rng.integers(20, 200, prompts)
    fails = _boot_counts(failed_boots, names) if failed_boots else dict.fromkeys(names, 0)
    probe_frames: list[pd.DataFrame] = []
    boot_rows: list[BootRecord] = []
    acc_parts: list[NDArray[np.int64]] = []
    order = 0
    for b in range(b_max):
        for ai, arm in enumerate(names):
            if b >= per_arm[arm]:
                continue
            for attempt in range(1, 1 + (fails[arm] if b == 0 else 0)):
                boot_rows.append(
                    _boot_row(experiment, arm, b, attempt, order, b, k, t0, None, params, rng)
                )
                order += 1
            attempt = 1 + (fails[arm] if b == 0 else 0)
            boot_id = boot_file_stem(arm, b, attempt)
            d, a = drafts[ai, b], acc[ai, b]
            acc_parts.append(a)
            completion = np.minimum(d + a.sum(axis=1), np.rint(length[0] * 1.05)).astype(np.int64)
            latency = completion * params.seconds_per_token * rng.lognormal(0.0, 0.1, prompts)
            probe_frames.append(
                pd.DataFrame(
                    {
                        "experiment": experiment,
                        "arm": arm,
                        "boot": b,
                        "boot_id": boot_id,
                        "probe_set": probe_set,
                        "probe_id": probe_ids,
                        "num_drafts": d,
                        "num_draft_tokens": d * k,
                        "num_accepted_tokens": a.sum(axis=1),
                        "accepted_per_pos": None,  # filled once below (fast .tolist())
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion,
                        "output_sha256": f"sim-{arm}-{b}-",
                        "source": "per_request",
                        "latency_s": latency,
                    }
                )
            )
            totals = (int(d.sum()), a.sum(axis=0), float(latency.sum()))
            boot_rows.append(
                _boot_row(experiment, arm, b, attempt, order, b, k, t0, totals, params, rng)
            )
            order += 1
    probes = pd.concat(probe_frames, ignore_index=True)
    probes["accepted_per_pos"] = np.concatenate(acc_parts).tolist()
    probes["output_sha256"] = probes["output_sha256"] + probes["probe_id"]
    probes["sequence"] = probes.groupby("boot_id", sort=False).cumcount()
    # What a real sequential boot without server timing metrics leaves unknown.
    probes = probes.assign(**{c: None for c in PROBE_OPTIONAL if c not in probes.columns})
    return SimRun(probes[PROBE_SCHEMA.names], boot_rows)


def _boot_row(
    experiment: str,
    arm: str,
    boot: int,
    attempt: int,
    order: int,
    block: int,
    k: int,
    t0: datetime,
    totals: tuple[int, NDArray[np.int64], float] | None,
    params: SimParams,
    rng: np.random.Generator,
) -> BootRecord:
    start = t0 + timedelta(minutes=2 * order)
    boot_s = float(params.boot_seconds * rng.lognormal(0.0, 0.1))
    ok = totals is not None
    probe_s = totals[2] if totals is not None else 0.0
    return BootRecord(
        experiment=experiment,
        arm=arm,
        boot=boot,
        attempt=attempt,
        boot_id=boot_file_stem(arm, boot, attempt),
        status="ok" if ok else "failed",
        error=None if ok else "simulated failure: server exited during startup",
        order=order,
        block=block,
        host="sim-host",
        gpu="sim-gpu",
        started_at=start,
        ready_at=start + timedelta(seconds=boot_s) if ok else None,
        finished_at=start + timedelta(seconds=boot_s + probe_s),
        boot_seconds=boot_s if ok else None,
        probe_seconds=probe_s if ok else None,
        num_speculative_tokens=k,
        vllm_version="sim",
        log_path=f"logs/{boot_file_stem(arm, boot, attempt)}.log",
        num_drafts=totals[0] if totals is not None else None,
        num_draft_tokens=totals[0] * k if totals is not None else None,
        num_accepted_tokens=int(totals[1].sum()) if totals is not None else None,
        accepted_per_pos=tuple(int(x) for x in totals[1]) if totals is not None else None,
        engine_seed=order,
        compile_cache=None,
    )


def simulated_manifest(
    arms: Mapping[str, float],
    *,
    experiment: str = "sim",
    baseline: str | None = None,
    alpha: float = 0.05,
    margins: Mapping[str, float] | None = None,
    boots: int | Mapping[str, int] = 5,
    prompts: int = 100,
    probe_set: str = "sim",
    seed: int = 0,
    looks: list[int] | None = None,
) -> dict[str, Any]:
    """A manifest with the keys stats reads: arms, baseline, alpha, margins, probe sets."""
    names = list(arms)
    m = {**DEFAULT_MARGINS, **dict(margins or {})}
    base = baseline or names[0]
    boots_per_arm = boots if isinstance(boots, int) else max(boots.values())
    exp_section = {
        "name": experiment,
        "boots_per_arm": boots_per_arm,
        "seed": seed,
        "baseline": base,
        "alpha": alpha,
        "margins": m,
        "looks": looks,
    }
    return {
        "schema_version": 1,
        "experiment": experiment,
        "created_at": datetime.now(UTC).isoformat(),
        "specab_version": "sim",
        "simulated": {"deltas": dict(arms), "seed": seed},
        "spec": {"experiment": exp_section},
        "spec_sha256": f"sim-{seed}",
        "arms": [{"name": a, "definition_sha256": f"sim-{a}"} for a in names],
        "baseline": base,
        "alpha": alpha,
        "margins": m,
        "looks": looks,
        "probe_sets": [{"name": probe_set, "sha256": "sim", "count": prompts}],
    }


def simulate_results(
    out_dir: str | Path,
    arms: Mapping[str, float] | None = None,
    *,
    boots: int | Mapping[str, int] = 5,
    prompts: int = 100,
    seed: int = 0,
    sigma_boot: float = 0.03,
    sigma_prompt: float = 0.8,
    sigma_res: float = 0.15,
    sigma_interaction: float = 0.0,
    positions: int = 4,
    experiment: str = "sim",
    baseline: str | None = None,
    alpha: float = 0.05,
    margins: Mapping[str, float] | None = None,
    failed_boots: int | Mapping[str, int] = 0,
    looks: list[int] | None = None,
) -> Path:
    """Write a whole results directory through `ResultsWriter`; returns its path."""
    arms = dict(arms) if arms is not None else {"a": 0.0, "b": 0.1}
    params = SimParams(
        mu=mu_for(positions),
        sigma_boot=sigma_boot,
        sigma_prompt=sigma_prompt,
        sigma_res=sigma_res,
        sigma_interaction=sigma_interaction,
    )
    run = simulate_run(
        arms,
        boots=boots,
        prompts=prompts,
        seed=seed,
        params=params,
        experiment=experiment,
        failed_boots=failed_boots,
    )
    manifest = simulated_manifest(
        arms,
        experiment=experiment,
        baseline=baseline,
        alpha=alpha,
        margins=margins,
        boots=boots,
        prompts=prompts,
        seed=seed,
        looks=looks,
    )
    run.write(ResultsWriter.create(Path(out_dir), manifest))
    return Path(out_dir)
