"""The known truth of a selftest experiment: each arm's synthetic acceptance rates.

`specab selftest` needs every arm to run vLLM's synthetic rejection sampling with explicit
per-position unconditional rates (vLLM's own rules: length K, each in [0, 1], non-increasing),
distinct engine seeds per boot (else the boots are copies and nothing varies), and at least two
boots per arm (the boot is the unit). Checked here, before anything is written.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from bench.errors import SpecabError
from bench.experiment.launch.arms import resolve_arm
from bench.experiment.spec import Experiment

_FIX_RATES = (
    'set rejection_sample_method = "synthetic" and synthetic_acceptance_rates = '
    "[r_0, ..., r_(K-1)] (non-increasing, in [0, 1]) in its speculative_config"
)


def _rates(arm: str, cfg: dict[str, object], file: Path) -> list[float]:
    field = f"arms({arm}).speculative_config"
    if cfg.get("rejection_sample_method") != "synthetic":
        raise SpecabError(
            "a selftest arm must run synthetic acceptance (the known truth)",
            file=file,
            field=f"{field}.rejection_sample_method",
            fix=_FIX_RATES,
        )
    rates = cfg.get("synthetic_acceptance_rates")
    k = cfg.get("num_speculative_tokens")
    if not isinstance(rates, list) or not all(isinstance(r, int | float) for r in rates):
        raise SpecabError(
            "needs explicit per-position rates (the truth each position is checked against)",
            file=file,
            field=f"{field}.synthetic_acceptance_rates",
            fix=_FIX_RATES,
        )
    values = [float(r) for r in rates]
    problem = None
    if isinstance(k, int) and len(values) != k:
        problem = f"has {len(values)} entries, num_speculative_tokens is {k}"
    elif not all(0.0 <= r <= 1.0 for r in values):
        problem = f"entries must lie in [0, 1], got {values}"
    elif any(b > a for a, b in itertools.pairwise(values)):
        problem = f"must be non-increasing (unconditional rates), got {values}"
    if problem:
        raise SpecabError(
            problem, file=file, field=f"{field}.synthetic_acceptance_rates", fix=_FIX_RATES
        )
    return values


def synthetic_truth(spec: Experiment, spec_file: str | Path) -> dict[str, list[float]]:
    """Arm -> its configured unconditional rates; SpecabError naming the field otherwise."""
    file = Path(spec_file)
    if not spec.server.per_boot_seed:
        raise SpecabError(
            "boots with one engine seed draw the same synthetic acceptances (copies, not "
            "replicates)",
            file=file,
            field="server.per_boot_seed",
            fix="set per_boot_seed = true",
        )
    if spec.experiment.boots_per_arm < 2:
        raise SpecabError(
            "one boot per arm has no between-boot variance to build an interval from",
            file=file,
            field="experiment.boots_per_arm",
            fix="set boots_per_arm = 2 or more (3 for power at a small alpha)",
        )
    out = {}
    for arm in spec.arms:
        resolved = resolve_arm(spec, file, arm.name)
        if not resolved.speculative:
            raise SpecabError(
                "a selftest arm must speculate",
                file=file,
                field=f"arms({arm.name}).speculative_config",
                fix=_FIX_RATES,
            )
        out[arm.name] = _rates(arm.name, resolved.speculative_config, file)
    return out
