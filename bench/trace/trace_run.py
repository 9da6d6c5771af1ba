"""One trace run: the served arm booted once on the real engine with the capture patch, over
the one probe (no warmup, one pass); the captured steps replayed by the reference arm's own
interpreter; the comparison written as `trace.json`. The trace's directory holds:
`probe.jsonl` (the probe), `capture/` (the engine's steps, `engine.json`), `boot/` (the
boot's results directory, as `specab boot` writes it), `replay/` (the reference's steps,
`reference.json`, the replay's log) and `trace.json`."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path
from typing import Any

from bench.errors import SpecabError
from bench.experiment import Experiment, build_manifest, forward_paths
from bench.records import ProbeRecord, TraceResult
from bench.trace.compare_steps import compare
from bench.trace.trace_plan import CAPTURE_PATCH, REPLAY, TracePlan

REPLAY_TIMEOUT_S = 900


def _probe_line(plan: TracePlan) -> dict[str, Any]:
    p = plan.probe
    line: dict[str, Any] = {"id": p.id}
    line.update({"prompt": p.prompt} if p.messages is None else {"messages": list(p.messages)})
    return line


def traced_spec(plan: TracePlan, probe_file: Path, capture: Path) -> Experiment:
    """The experiment as the trace boots it: the served arm alone, the capture patch added,
    eager (hooks see every module), one boot, the one probe, long enough for the steps."""
    spec, arm = plan.spec, plan.spec.arm(plan.served.name)
    env = {**arm.env, "SPECAB_TRACE_DIR": str(capture), "SPECAB_TRACE_STEPS": str(plan.steps)}
    traced = arm.model_copy(update={
        "patches": [*arm.patches, str(CAPTURE_PATCH)], "env": env,
        "args": {**arm.args, "enforce-eager": True}, "concurrency": 1,
    })  # fmt: skip
    k = max(1, int(plan.served.num_speculative_tokens or 1))
    tokens = min(plan.probe.max_tokens or spec.probes.max_tokens, plan.steps * (k + 1) + 1)
    probes = spec.probes.model_copy(update={
        "sets": [str(probe_file)], "warmup": 0, "passes": 1, "max_tokens": tokens,
    })  # fmt: skip
    section = spec.experiment.model_copy(update={
        "name": f"{spec.experiment.name}-trace", "boots_per_arm": 1, "baseline": None,
        "looks": None,
    })  # fmt: skip
    return spec.model_copy(update={
        "experiment": section, "probes": probes, "arms": [traced],
        "sweep": None, "bisect": None, "screen": None,
        "resources": spec.resources.model_copy(update={"nodes": 1}),
    })  # fmt: skip


def boot_once(spec: Experiment, spec_file: Path, root: Path) -> ProbeRecord:
    """Boot the traced arm once into `root`; its probe's record (SpecabError, naming the
    boot's root cause, when the boot fails)."""
    from bench.run import BootRequest, Ledger, boot_here, boot_seed
    from bench.store import ResultsWriter

    arm = spec.arms[0].name
    writer = ResultsWriter.create(root, build_manifest(spec, spec_file), claim="trace")
    try:
        attempt = Ledger.read(root).claim(writer, arm, 0, block=0, host=socket.gethostname())
        req = BootRequest(spec, str(spec_file), attempt, boot_seed(spec, arm, 0))
        log = writer.log_path(attempt.boot_id)
        outcome = boot_here(req, log)
        writer.write_boot(outcome.record, outcome.probes)
    finally:
        writer.close()
    if outcome.record.status != "ok" or not outcome.probes:
        raise SpecabError(
            f"the traced boot failed: {outcome.record.error} (log {log})",
            field="--arm", fix="fix what the boot's log names, then trace again",
        )  # fmt: skip
    return outcome.probes[0]


def replay(plan: TracePlan, capture: Path, tokens: list[int], out: Path) -> None:
    """The reference arm's interpreter replays the captured steps into `out`."""
    ref = plan.reference
    assert ref.reference is not None
    job = {
        "target": ref.model, "drafter": ref.draft_model, "forward": ref.reference.forward,
        "path": forward_paths(ref.reference, plan.spec_file), "capture": str(capture),
        "steps": plan.steps, "tokens": tokens, "k": ref.num_speculative_tokens,
        "dtype": ref.reference.dtype, "map": plan.tensors, "config": plan.config,
    }  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    (out / "job.json").write_text(json.dumps(job), encoding="utf-8")
    log = out / "replay.log"
    with log.open("wb") as sink:
        rc = subprocess.run([ref.python, str(REPLAY), str(out / "job.json"), str(out)],
                            stdout=sink, stderr=subprocess.STDOUT, timeout=REPLAY_TIMEOUT_S,
                            cwd=out).returncode  # fmt: skip
    if rc != 0:
        tail = " ".join(log.read_text(errors="replace").split()[-40:])
        raise SpecabError(f"the reference replay failed (exit {rc}): {tail}", field="--arm",
                          fix=f"see {log}")  # fmt: skip


def run_trace(plan: TracePlan, out: Path) -> TraceResult:
    """Boot, replay, compare; `trace.json` written into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    probe_file = out / "probe.jsonl"
    probe_file.write_text(json.dumps(_probe_line(plan)) + "\n", encoding="utf-8")
    capture = out / "capture"
    spec = traced_spec(plan, probe_file, capture)
    row = boot_once(spec, plan.spec_file, out / "boot")
    prompt = _prompt_ids(capture)
    tokens = [*prompt, *(int(t) for t in (row.output_token_ids or []))]
    replay(plan, capture, tokens, out / "replay")
    result = compare(plan, capture, out / "replay", tokens)
    (out / "trace.json").write_text(result.model_dump_json(indent=1), encoding="utf-8")
    return result


def _prompt_ids(capture: Path) -> list[int]:
    """The prompt's token ids: the first step's context is the whole prompt."""
    from safetensors.numpy import load_file

    first = capture / "step-000.safetensors"
    if not first.is_file():
        raise SpecabError(f"the traced boot captured no step into {capture}", field="--arm",
                          fix="check that the arm's request drafted (its log)")  # fmt: skip
    return [int(t) for t in load_file(str(first))["inputs.context_token_ids"]]
