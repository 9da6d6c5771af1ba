"""Simulated results with a known truth (the generative model of `generative`), for
calibrating `bench.stats` by simulation, the benchmarks and the docs figures; never part
of a real run.

- `generative`: the model, vectorized over replicates (count arrays; `simulate_boot_totals`
  is the fast path the calibration suites use).
- `simulated_boots`: one simulated boot as store rows (`BootRecord`, probe frame).
- `output_steps`: verify steps in output order for probe rows, with a known acceptance along
  the output (`with_steps`).
- `runs`: a whole simulated run in memory (`simulate_run`, `simulate_frames`) and the
  manifest a real run would write for it (`simulated_manifest`).
- `histories`: histories with a known culprit searched by the product's `run_search`
  (`tally_searches`), for the calibration of "which change did it" and its benchmark.
- `directory`: the one part that writes, a results directory through `bench.store`
  (`simulate_results`), so statistics stay free of I/O.
"""

from bench.simulate.directory import simulate_results, write_run
from bench.simulate.generative import (
    HeldFixed,
    PromptSet,
    SimParams,
    boot_effects,
    draw_prompt_set,
    mu_for,
    simulate_boot_totals,
    simulate_counts,
    simulate_speed_totals,
)
from bench.simulate.histories import HistoryCase, SearchTally, tally_searches
from bench.simulate.output_steps import with_steps
from bench.simulate.runs import SimRun, simulate_frames, simulate_run, simulated_manifest

__all__ = [
    "HeldFixed", "HistoryCase", "PromptSet", "SearchTally", "SimParams", "SimRun", "boot_effects",
    "draw_prompt_set", "mu_for", "simulate_boot_totals", "simulate_counts", "simulate_frames",
    "simulate_results", "simulate_run", "simulate_speed_totals", "simulated_manifest",
    "tally_searches", "with_steps", "write_run",
]  # fmt: skip
