"""The job a reference arm's runner is given (`runtime/specab_reference.py`): the target, the
drafter, the forward and its path, K, the sampling and every probe of the experiment, in the
order and with the lengths a served boot sends them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.experiment.probes import ProbeSet
from bench.experiment.reference.forward_source import RUNTIME_DIR, forward_paths
from bench.experiment.spec import Experiment, ReferenceForward

RUNNER = RUNTIME_DIR / "specab_reference.py"


def runner_job(
    spec: Experiment,
    spec_file: str | Path,
    ref: ReferenceForward,
    models: tuple[str, str, int],
    sets: list[ProbeSet],
    threads: int = 1,
    *,
    seed: int = 0,
    draft_sample: str = "greedy",
) -> dict[str, Any]:
    """The runner's JSON job; `models` is (target, drafter, K) as the arm resolved them,
    `seed` the boot's engine seed, `draft_sample` the arm's draft_sample_method."""
    target, drafter, k = models
    p = spec.probes
    return {
        "target": target,
        "drafter": drafter,
        "forward": ref.forward,
        "path": forward_paths(ref, spec_file),
        "k": k,
        "temperature": p.temperature,
        "top_p": p.top_p,
        # Per-request seeds, as the served requests carry them, else the boot's own. At
        # temperature 0 one pass is decoded and repeated.
        "request_seed": p.seed,
        "seed": seed,
        "draft_sample": draft_sample,
        "passes": p.passes if p.temperature > 0 else 1,
        "ignore_eos": p.ignore_eos,
        "device": ref.device,
        "dtype": ref.dtype,
        "threads": threads,
        "probes": [
            {
                "set": s.name,
                "id": probe.id,
                "prompt": probe.prompt,
                "messages": list(probe.messages) if probe.messages is not None else None,
                "max_tokens": probe.max_tokens or p.max_tokens,
            }
            for s in sets
            for probe in s.probes
        ],
    }
