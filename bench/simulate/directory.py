"""A simulated results directory, written through `bench.store.ResultsWriter` exactly as
run-ab writes one (one file per attempt, the boot row last): the only part of simulation that
does I/O."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.simulate.generative import (
    SimParams,
    mu_for,
)
from bench.simulate.runs import ManifestSettings, SimRun, simulate_run, simulated_manifest
from bench.store import ResultsWriter


def write_run(run: SimRun, writer: ResultsWriter) -> None:
    """Each attempt of `run` through the store, as a real run writes it."""
    by_boot = dict(tuple(run.probes.groupby("boot_id", sort=False)))
    for rec in run.boots:
        rows = by_boot.get(rec.boot_id) if rec.status == "ok" else None
        writer.write_boot(rec, rows.reset_index(drop=True) if rows is not None else ())


_PARAMS = ("sigma_boot", "sigma_prompt", "sigma_res", "sigma_interaction", "sigma_speed_boot")
_SHARED = ("experiment", "boots", "prompts", "seed")  # the run's and the manifest's


def simulate_results(
    out_dir: str | Path, arms: Mapping[str, float] | None = None, **options: Any
) -> Path:
    """Write a whole results directory through `ResultsWriter`; returns its path. `options`:
    `SimDesign`'s and `ManifestSettings`' fields, `positions` (K, default 4) and the noise of
    `SimParams` (sigma_boot 0.03, sigma_prompt 0.8, sigma_res 0.15, sigma_interaction 0,
    sigma_speed_boot 0.05)."""
    arms = dict(arms) if arms is not None else {"a": 0.0, "b": 0.1}
    params: dict[str, Any] = dict(zip(_PARAMS, (0.03, 0.8, 0.15, 0.0, 0.05), strict=True))
    params |= {k: options.pop(k) for k in _PARAMS if k in options}
    mu = mu_for(options.pop("positions", 4))
    settings = {
        k: options.pop(k) for k in fields_of(ManifestSettings) - set(_SHARED) if k in options
    }
    shared = {k: options[k] for k in _SHARED if k in options}
    run = simulate_run(arms, params=SimParams(mu=mu, **params), **options)
    manifest = simulated_manifest(arms, **shared, **settings)
    write_run(run, ResultsWriter.create(Path(out_dir), manifest))
    return Path(out_dir)


def fields_of(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}
