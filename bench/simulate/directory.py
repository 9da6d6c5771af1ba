"""A simulated results directory, written through `bench.store.ResultsWriter` exactly as
run-ab writes one (one file per attempt, the boot row last): the only part of simulation that
does I/O."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from bench.simulate.generative import (
    SimParams,
    mu_for,
)
from bench.simulate.runs import SimRun, simulate_run, simulated_manifest
from bench.store import ResultsWriter


def write_run(run: SimRun, writer: ResultsWriter) -> None:
    """Each attempt of `run` through the store, as a real run writes it."""
    by_boot = dict(tuple(run.probes.groupby("boot_id", sort=False)))
    for rec in run.boots:
        rows = by_boot.get(rec.boot_id) if rec.status == "ok" else None
        writer.write_boot(rec, rows.reset_index(drop=True) if rows is not None else ())


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
    speed: Mapping[str, float] | None = None,
    no_spec: Collection[str] = (),
    categories: Sequence[str] | None = None,
    sigma_speed_boot: float = 0.05,
    primary_metrics: Sequence[str] | None = None,
    hosts: Mapping[str, Sequence[str]] | None = None,
) -> Path:
    """Write a whole results directory through `ResultsWriter`; returns its path (options
    as `simulate_run` and `simulated_manifest`)."""
    arms = dict(arms) if arms is not None else {"a": 0.0, "b": 0.1}
    params = SimParams(
        mu=mu_for(positions),
        sigma_boot=sigma_boot,
        sigma_prompt=sigma_prompt,
        sigma_res=sigma_res,
        sigma_interaction=sigma_interaction,
        sigma_speed_boot=sigma_speed_boot,
    )
    run = simulate_run(
        arms,
        boots=boots,
        prompts=prompts,
        seed=seed,
        params=params,
        experiment=experiment,
        failed_boots=failed_boots,
        speed=speed,
        no_spec=no_spec,
        categories=categories,
        hosts=hosts,
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
        primary_metrics=primary_metrics,
    )
    write_run(run, ResultsWriter.create(Path(out_dir), manifest))
    return Path(out_dir)
