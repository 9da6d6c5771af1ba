"""The trace's answer from its files: the engine's captured steps and the reference's two
replays of them, compared tensor by tensor (`tensor_diff`), and each side's resolved
geometry (`config_fields`), as one `TraceResult`."""

from __future__ import annotations

import json
from pathlib import Path

from bench.records import TraceResult
from bench.trace.config_fields import config_fields, config_said
from bench.trace.tensor_diff import Pairs, first_divergence, step_pairs, tensor_diffs, verdict
from bench.trace.trace_plan import TracePlan


def _steps(
    capture: Path, replayed: Path, tokens: list[int], layers: int
) -> tuple[list[Pairs], list[Pairs]]:
    """Each captured step (read once) paired with the reference fed the captured features
    and with the reference fed the HF run's, for every step the replay reached."""
    from safetensors.numpy import load_file

    captured: list[Pairs] = []
    hf: list[Pairs] = []
    for path in sorted(capture.glob("step-*.safetensors")):
        sides = [replayed / side / path.name for side in ("captured", "hf")]
        if not all(p.is_file() for p in sides):
            continue
        engine = load_file(str(path))
        for out, side in zip((captured, hf), sides, strict=True):
            out.append(step_pairs(engine, load_file(str(side)), tokens, layers))
    return captured, hf


def compare(plan: TracePlan, capture: Path, replayed: Path, tokens: list[int]) -> TraceResult:
    """Every tensor, the first divergence, the verdict and the geometry fields."""
    modules = {**plan.tensors, "target.aux": "HF transformers run of the target (aux layers)",
               "draft.logits": "the forward's return"}  # fmt: skip
    captured, hf = _steps(capture, replayed, tokens, plan.layers)
    tensors = tensor_diffs(captured, plan.layers, modules, plan.threshold)
    recomputed = tensor_diffs(hf, plan.layers, modules, plan.threshold)
    first = first_divergence(recomputed, tensors)
    engine = json.loads((capture / "engine.json").read_text(encoding="utf-8"))
    reference = json.loads((replayed / "reference.json").read_text(encoding="utf-8"))
    fields = config_fields(engine, reference)
    notes = []
    if len(captured) < plan.steps:
        notes.append(f"{len(captured)} of the {plan.steps} steps asked for were captured: the "
                     "request ended first")  # fmt: skip
    ref = plan.reference.reference
    assert ref is not None
    return TraceResult(
        experiment=plan.spec.experiment.name, arm=plan.served.name,
        reference_arm=plan.reference.name, forward=ref.forward,
        probe=f"{plan.probe.set_name}/{plan.probe.id}", steps=len(captured),
        threshold=plan.threshold, tensors=tensors, recomputed=recomputed,
        first_divergence=first, verdict=verdict(recomputed, tensors, first), config=fields,
        notes=[*notes, *config_said(fields)],
    )  # fmt: skip
