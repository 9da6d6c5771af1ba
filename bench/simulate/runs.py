"""A simulated run in memory, in the exact store schemas: probe rows and one `BootRecord` per
boot attempt with the ids, attempt numbers, hosts and launch order of real runs
(`simulate_run`, `simulate_frames`), and the manifest a real run would write for it
(`simulated_manifest`). `bench.simulate.directory` writes one to disk."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from bench.records import (
    BOOT_SCHEMA,
    DEFAULT_MARGINS,
    PROBE_SCHEMA,
    SCHEMA_VERSION,
    BootRecord,
    Manifest,
)
from bench.simulate.generative import (
    HeldFixed,
    SimParams,
    simulate_counts,
    simulate_latency,
)
from bench.simulate.simulated_boots import SimBoot, SimBootId, SimPrompts, boot_record, probe_frame


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


def simulate_frames(
    arms: Mapping[str, float],
    **options: Any,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(probes, boots) DataFrames in the PROBE_SCHEMA / BOOT_SCHEMA column layout."""
    run = simulate_run(arms, **options)
    return run.probes, run.boots_frame


@dataclass(frozen=True)
class SimDesign:
    """A simulated run's design and truth (what `simulate_run` takes as keywords)."""

    boots: int | Mapping[str, int] = 5  # per arm, or arm -> boots
    prompts: int = 100
    seed: int = 0
    params: SimParams = field(default_factory=SimParams)
    experiment: str = "sim"
    probe_set: str = "sim"
    failed_boots: int | Mapping[str, int] = 0  # failed attempts before boot 0's ok one
    speed: Mapping[str, float] | None = None  # arm -> speed factor (default 1)
    no_spec: Collection[str] = ()  # arms without speculative decoding
    categories: Sequence[str] | None = None  # given to the probes in turn
    hosts: Mapping[str, Sequence[str]] | None = None  # arm -> the host of each boot
    host_effect: Mapping[str, float] | None = None  # host -> a logit shift of its boots


def simulate_run(arms: Mapping[str, float], **options: Any) -> SimRun:
    """Probe rows and boot records with the ids, attempt numbers and columns of real runs;
    `options` are `SimDesign`'s fields.

    `arms` maps arm name -> delta (logit shift); `speed` arm -> speed factor (default 1: the
    true tokens/s ratio of two arms is the ratio of their factors); arms in `no_spec` run
    without speculative decoding; `categories` are given to the probes in turn. Boots are
    interleaved in blocks (one per arm) as the orchestrator runs them; `failed_boots` adds
    failed attempts (no probes). `hosts` gives arm -> the host of each boot (recorded in
    the boot rows), `host_effect` host -> a logit shift of every boot on it.
    """
    design = SimDesign(**options)
    params, prompts = design.params, design.prompts
    host_effect, speed, categories = design.host_effect, design.speed, design.categories
    rng = np.random.default_rng(design.seed)
    names = list(arms)
    per_arm = _boot_counts(design.boots, names)
    b_max = max(per_arm.values())
    host_of = {a: list((design.hosts or {}).get(a, ["sim-host"] * b_max)) for a in names}
    shift = np.array([[(host_effect or {}).get(h, 0.0) for h in host_of[a][:b_max]] for a in names])
    drafts, acc, length = simulate_counts(
        rng,
        [arms[a] for a in names],
        b_max,
        prompts,
        params,
        replicates=1,
        held=HeldFixed(boot_shift=shift if host_effect else None),
    )
    drafts, acc = drafts[0], acc[0]
    k = params.positions
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    probe_ids = [f"p{p:04d}" for p in range(prompts)]
    prompt_tokens = rng.integers(20, 200, prompts)
    completion = np.maximum(1, np.rint(length[:1])).astype(np.int64)  # same text everywhere
    factors = [float((speed or {}).get(a, 1.0)) for a in names]
    latency = simulate_latency(rng, factors, b_max, completion.astype(np.float64), params)[0]
    cats = [categories[p % len(categories)] for p in range(prompts)] if categories else None
    probes_of = SimPrompts(design.probe_set, probe_ids, prompt_tokens, cats)
    failed = design.failed_boots
    fails = _boot_counts(failed, names) if failed else dict.fromkeys(names, 0)
    frames: list[pd.DataFrame] = []
    records: list[BootRecord] = []
    for b in range(b_max):
        for ai, arm in enumerate(names):
            if b >= per_arm[arm]:
                continue
            sim = SimBoot(
                drafts[ai, b], acc[ai, b], completion[0], latency[ai, b], arm not in design.no_spec
            )
            last = 1 + (fails[arm] if b == 0 else 0)  # earlier attempts failed
            for attempt in range(1, last + 1):
                ok = attempt == last
                who = SimBootId(design.experiment, arm, b, attempt, len(records), host_of[arm][b])
                if ok:
                    frames.append(probe_frame(sim, who, probes_of))
                records.append(boot_record(who, sim if ok else None, k, t0, params, rng))
    probes = pd.concat(frames, ignore_index=True)
    return SimRun(probes[PROBE_SCHEMA.names], records)


@dataclass(frozen=True)
class ManifestSettings:
    """The settings a simulated manifest records (what `simulated_manifest` takes)."""

    experiment: str = "sim"
    baseline: str | None = None  # default: the first arm
    alpha: float = 0.05
    margins: Mapping[str, float] | None = None  # over DEFAULT_MARGINS
    boots: int | Mapping[str, int] = 5
    prompts: int = 100
    probe_set: str = "sim"
    seed: int = 0
    looks: list[int] | None = None
    primary_metrics: Sequence[str] | None = None


def simulated_manifest(arms: Mapping[str, float], **options: Any) -> Manifest:
    """A manifest as a real run writes it (each arm's definition is its simulated delta),
    with the settings stats reads: arms, baseline, alpha, margins, looks, probe sets
    (`options`: `ManifestSettings`' fields)."""
    o = ManifestSettings(**options)
    experiment, alpha, looks, seed = o.experiment, o.alpha, o.looks, o.seed
    margins, baseline, boots, primary_metrics = o.margins, o.baseline, o.boots, o.primary_metrics
    probe_set, prompts = o.probe_set, o.prompts
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
    if primary_metrics is not None:
        exp_section["primary_metrics"] = list(primary_metrics)
    body = {
        "schema_version": SCHEMA_VERSION,
        "experiment": experiment,
        "created_at": datetime.now(UTC).isoformat(),
        "specab_version": "sim",
        "simulated": {"deltas": dict(arms), "seed": seed},
        "spec": {"experiment": exp_section},
        "spec_sha256": f"sim-{seed}",
        "arms": [
            {
                "name": a,
                "definition": {"simulated_delta": float(arms[a])},
                "definition_sha256": f"sim-{a}",
            }
            for a in names
        ],
        "baseline": base,
        "alpha": alpha,
        "margins": m,
        "looks": looks,
        "probe_sets": [{"name": probe_set, "sha256": "sim", "count": prompts}],
    }
    return Manifest.model_validate(body)
