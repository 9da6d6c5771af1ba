"""Whether a prior between-boot SD from another run fits the run it is lent to.

A boot's spread depends on what a boot measures: its probe sets (prompts carry most of the
variance), how many requests it runs (the within-boot sampling part shrinks as 1/requests),
the model and the draft length K. An SD measured on another design, lent to 1-boot arms,
is taken as exact up to its df and can turn one boot into "proof" (docs/statistics.md
measures how far). So `--prior-from` refuses a source run that differs in any of these,
naming what differs; requests per boot may differ by up to REQUEST_TOLERANCE."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.errors import SpecabError
from bench.records import Results

REQUEST_TOLERANCE = 0.10  # relative: 80 vs 88 requests per boot passes, 80 vs 40 does not


@dataclass(frozen=True)
class Design:
    """What a run's boots measured, as far as a between-boot SD depends on it."""

    probe_sets: dict[str, str]  # name -> sha256
    requests_per_boot: float | None  # median measured probe rows per ok boot
    models: frozenset[str]  # target and draft models of the arms
    positions: frozenset[int]  # K of the ok boots
    ok_boots: int


def run_design(results: Results) -> Design:
    boots = results.boots
    ok = boots[boots["status"] == "ok"] if "status" in boots else boots
    ids = set(ok["boot_id"]) if "boot_id" in ok else set()
    probes = results.probes
    rows = probes[probes["boot_id"].isin(ids)] if len(ids) and "boot_id" in probes else probes
    counts = rows.groupby("boot_id").size().to_numpy() if len(rows) else np.array([])
    models: set[str] = set()
    for arm in results.manifest.arm_names():
        d = results.manifest.definition(arm)
        models.add(str(d.get("model")))
        spec = d.get("speculative_config")
        if isinstance(spec, dict) and spec.get("model") is not None:
            models.add(str(spec["model"]))
    k: list[float] = list(ok.get("num_speculative_tokens", []))
    return Design(
        probe_sets={p.name: p.sha256 for p in results.manifest.probe_sets},
        requests_per_boot=float(np.median(counts)) if counts.size else None,
        models=frozenset(models),
        positions=frozenset(int(x) for x in k if x == x),
        ok_boots=len(ids),
    )


def _differences(source: Design, target: Design) -> list[str]:
    out = []
    if source.probe_sets != target.probe_sets:

        def sets(d: Design) -> str:
            return ", ".join(f"{n} ({h[:8]})" for n, h in sorted(d.probe_sets.items())) or "none"

        out.append(f"probe sets {sets(source)} vs {sets(target)}")
    a, b = source.requests_per_boot, target.requests_per_boot
    if a is None or b is None or abs(a - b) > REQUEST_TOLERANCE * max(a, b):
        out.append(f"requests per boot {a:g} vs {b:g}" if a and b else "requests per boot unknown")
    if source.models != target.models:
        out.append(f"models {sorted(source.models)} vs {sorted(target.models)}")
    if source.positions != target.positions:
        out.append(f"speculative tokens {sorted(source.positions)} vs {sorted(target.positions)}")
    return out


def check_prior_design(source: Results, target: Results, label: str | None) -> Design:
    """The source run's design when it matches the target's (SpecabError naming what
    differs, otherwise)."""
    mine, theirs = run_design(source), run_design(target)
    diff = _differences(mine, theirs)
    if diff:
        raise SpecabError(
            "the prior run measured another design than this run ("
            + "; ".join(diff)
            + "), so its between-boot SD does not carry over",
            file=label,
            field="--prior-from",
            fix="point at an A/A run of this design (same probe sets, model, K and requests "
            f"per boot within {REQUEST_TOLERANCE:.0%}), or run 3 or more boots per arm",
        )
    return mine
