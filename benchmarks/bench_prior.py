"""How often a prior between-boot SD makes 1-boot arms claim a difference that is not there:
A/A runs analyzed with `--prior-from`'s SD, through the product's code (`prior_from_results`,
`stats.analyze`), on simulated data with a known truth (no difference).

    .venv/bin/python benchmarks/bench_prior.py [REPLICATES]

Each replicate draws a fresh source run (2 arms x 4 boots, A/A) and a fresh target run of
B boots per arm (2 arms, A/A), takes the prior from the source and counts a false claim when
any primary verdict of the target is improved, regressed or small_*. "matched": the source
ran the same probes and requests per boot (what `--prior-from` lets through). "2x requests"
is what the design check refuses: a source whose boots ran twice the requests (80 prompts
against 40; their spread is smaller), reached here without the check, as a prior given by
value (`--prior-between-boot-sd`) would be.
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from bench import stats
from bench.records import Results
from bench.simulate import simulate_frames, simulated_manifest
from bench.stats import AnalysisOptions

CLAIMS = {"improved", "regressed", "small_improvement", "small_regression"}
ARMS = {"a": 0.0, "b": 0.0}


def _run(boots: int, prompts: int, seed: int) -> Results:
    probes, frame = simulate_frames(ARMS, boots=boots, prompts=prompts, seed=seed)
    return Results(manifest=simulated_manifest(ARMS, boots=boots), boots=frame, probes=probes)


def false_claims(boots: int, replicates: int, *, source_prompts: int = 40) -> float:
    """Share of A/A targets (`boots` per arm, 40 prompts) with any primary claim."""
    hits = 0
    for i in range(replicates):
        source = _run(4, source_prompts, seed=2 * i)
        target = _run(boots, 40, seed=2 * i + 1)
        check = source_prompts == 40
        prior = stats.prior_from_results(source, source="aa", target=target if check else None)
        result = stats.analyze(target, AnalysisOptions(n_resamples=0, prior=prior))
        primary = [c for c in result.comparisons if c.family == "primary"]
        hits += any(c.verdict in CLAIMS for c in primary)
    return hits / replicates


def main(replicates: int) -> None:
    table = Table(title=f"A/A false claims at alpha 0.05 ({replicates} replicates each)")
    for col in ("prior's source", "boots per arm", "false claims", "2 MCSE"):
        table.add_column(col)
    for label, prompts in (("matched (40 requests)", 40), ("2x requests (80)", 80)):
        for boots in (1, 2):
            rate = false_claims(boots, replicates, source_prompts=prompts)
            mcse = 2 * (0.05 * 0.95 / replicates) ** 0.5
            table.add_row(label, str(boots), f"{rate:.3f}", f"{mcse:.3f}")
    Console().print(table)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
