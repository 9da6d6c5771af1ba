"""What one trace runs, checked before anything is written: the served arm, the reference arm
of the drafter it serves, the probe, the steps, the name map. Each refusal is one line
naming the field and the fix (exit 2)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from bench.errors import SpecabError
from bench.experiment import Experiment, Probe, ResolvedArm, load_probe_sets, resolve_arm
from bench.trace.name_maps import TRACED_METHODS, for_layers, name_map, split

MAX_STEPS = 16
CAPTURE_PATCH = Path(__file__).resolve().parents[1] / "experiment/runtime/specab_trace_capture.py"
REPLAY = CAPTURE_PATCH.with_name("specab_trace_replay.py")


@dataclass(frozen=True)
class TracePlan:
    """One trace's inputs, resolved."""

    spec: Experiment
    spec_file: Path
    served: ResolvedArm
    reference: ResolvedArm
    probe: Probe
    steps: int
    threshold: float
    tensors: dict[str, str]  # trace name -> reference module path (per layer)
    config: dict[str, str]  # geometry field -> reference attribute path (per layer)
    layers: int  # the drafter's decoder layers


def _refuse(message: str, field: str, fix: str, file: Path) -> SpecabError:
    return SpecabError(message, file=file, field=field, fix=fix)


def _reference_of(
    spec: Experiment, file: Path, served: ResolvedArm, wanted: str | None
) -> ResolvedArm:
    """The reference arm of the drafter `served` serves: `wanted`, else the first in file
    order."""
    for arm in spec.arms:
        if arm.reference is None or wanted not in (None, arm.name):
            continue
        ref = resolve_arm(spec, file, arm.name)
        if ref.draft_model == served.draft_model:
            return ref
    if wanted is not None:
        raise _refuse(
            f"{wanted} is not a reference arm of the drafter {served.draft_model}",
            "--reference", f"name a reference arm that drives what arm {served.name} serves",
            file,
        )  # fmt: skip
    raise _refuse(
        f"no reference arm drives the drafter {served.draft_model} that arm {served.name} "
        "serves", "arms", "add a reference arm of that drafter (docs/reference-forward.md)",
        file,
    )  # fmt: skip


def _served(spec: Experiment, file: Path, arm: str) -> ResolvedArm:
    served = resolve_arm(spec, file, arm)
    if served.reference is not None:
        raise _refuse(f"arm {arm} is a reference arm: it has no server to trace", "--arm",
                      "name a served arm of the drafter", file)  # fmt: skip
    method = served.speculative_config.get("method") if served.speculative else None
    if method is None or served.draft_model is None:
        raise _refuse(f"arm {arm} runs no drafter", "--arm",
                      "trace an arm with speculative_config", file)  # fmt: skip
    if method not in TRACED_METHODS:
        raise _refuse(
            f"arm {arm}: the capture has no name map for a {method} drafter",
            f"arms({arm}).speculative_config.method",
            f"trace a {' or '.join(TRACED_METHODS)} arm (docs/trace.md lists what is built)",
            file,
        )  # fmt: skip
    if served.nodes > 1 or served.world_size > 1:
        raise _refuse(
            f"arm {arm} runs over {served.nodes} node(s), {served.world_size} rank(s): a "
            "trace captures one rank's drafter", f"arms({arm})",
            "trace it with one rank on one node (tensor-parallel-size 1)", file,
        )  # fmt: skip
    return served


def _probe(spec: Experiment, file: Path, wanted: str | None) -> Probe:
    sets = load_probe_sets(spec, file)
    every = [p for s in sets for p in s.probes]
    if wanted is None:
        return every[0]
    for p in every:
        if wanted in (p.id, f"{p.set_name}/{p.id}"):
            return p
    near = ", ".join(f"{p.set_name}/{p.id}" for p in every[:3])
    raise _refuse(f"no probe {wanted!r} in [probes].sets", "--probe",
                  f"name a probe as SET/ID or ID (e.g. {near})", file)  # fmt: skip


@dataclass(frozen=True)
class TraceAsk:
    """What the user asked to trace (the command's options)."""

    arm: str
    reference: str | None = None  # default: the drafter's first reference arm
    probe: str | None = None  # SET/ID or ID; default: the first probe
    steps: int = 4
    threshold: float = 0.02


def plan_trace(spec: Experiment, file: Path, ask: TraceAsk) -> TracePlan:
    """Every input checked and resolved (SpecabError: one line, nothing written)."""
    arm, probe, steps, threshold = ask.arm, ask.probe, ask.steps, ask.threshold
    if not 1 <= steps <= MAX_STEPS:
        raise _refuse(f"--steps {steps} is out of bounds", "--steps",
                      f"trace 1 to {MAX_STEPS} verify steps", file)  # fmt: skip
    served = _served(spec, file, arm)
    reference = _reference_of(spec, file, served, ask.reference)
    assert reference.reference is not None and reference.draft_model is not None
    forward = reference.reference.forward
    entries = name_map(forward, reference.reference.trace_map)
    if entries is None:
        raise _refuse(
            f"the reference forward {forward} has no built-in name map",
            f"arms({reference.name}).reference.trace_map",
            "map each trace name to the module that computes it (docs/trace.md)", file,
        )  # fmt: skip
    cfg = json.loads((Path(reference.draft_model) / "config.json").read_text(encoding="utf-8"))
    layers = int(cfg.get("num_hidden_layers") or 1)
    tensors, config = split(for_layers(entries, layers))
    return TracePlan(spec, file, served, reference, _probe(spec, file, probe), steps, threshold,
                     tensors, config, layers)  # fmt: skip
