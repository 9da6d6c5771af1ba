"""A reference arm's boot: no server. The arm's interpreter runs the reference runner
(`runtime/specab_reference.py`) over the experiment's probes, in its own process group that
dies with the boot; each line it writes becomes the probe row a served boot writes for that
probe (source `reference`): at temperature 0 once per pass (greedy decoding repeats exactly),
above it each pass drawn anew; the boot's totals are their sum."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.errors import BootFailed
from bench.experiment import (
    REFERENCE_RUNNER,
    Experiment,
    Probe,
    ProbeSet,
    ResolvedArm,
    runner_job,
)
from bench.records import ProbeRecord, token_ids_sha256
from bench.run.attempt import Attempt
from bench.run.boot.counters import SpecCounts
from bench.run.boot.failure_reason import one_line
from bench.run.boot.probe_loop import Measured
from bench.run.node import NodeEnvironment
from bench.run.process import Watch, kill_groups, log_tail, root_cause

# The runner's deadline per probe on top of loading the models (a CPU forward of a large
# target per verify step is slow, but never this slow).
_PER_PROBE_S, _LOAD_S = 120.0, 600.0


@dataclass(frozen=True)
class ReferenceBoot:
    """One reference boot: the arm, the experiment's probes and the boot's engine seed (the
    seed its random streams start from at temperature > 0; None: 0, as every served boot of
    such an experiment runs with the server's one default seed)."""

    spec: Experiment
    spec_file: str
    attempt: Attempt
    arm: ResolvedArm
    sets: list[ProbeSet]
    seed: int | None


def run_reference(boot: ReferenceBoot, node: NodeEnvironment, watch: Watch | None) -> Measured:
    """Run the reference runner for one boot; BootFailed (with the runner's own exception
    from its log) when it fails or stops early."""
    spec, arm, sets = boot.spec, boot.arm, boot.sets
    assert arm.reference is not None and arm.draft_model is not None
    work = node.workdir / "cwd" / boot.attempt.boot_id
    work.mkdir(parents=True, exist_ok=True)
    threads = int(node.server_env.get("OMP_NUM_THREADS") or 1)
    models = (arm.model, arm.draft_model, arm.num_speculative_tokens)
    drafts = str(arm.speculative_config.get("draft_sample_method", "greedy"))
    job = runner_job(spec, boot.spec_file, arm.reference, models, sets, threads=threads,
                     seed=boot.seed or 0, draft_sample=drafts)  # fmt: skip
    (work / "job.json").write_text(json.dumps(job), encoding="utf-8")
    out = work / "probes.jsonl"
    deadline = _LOAD_S + _PER_PROBE_S * len(job["probes"]) * job["passes"]
    t0 = time.perf_counter()
    rc = _run(arm.python, work, out, node, watch, deadline)
    seconds = time.perf_counter() - t0
    lines = _lines(out)
    if rc != 0 or not lines or lines[-1] != {"done": True}:
        cause = root_cause(log_tail(node.log_file, 60)) or f"exit status {rc}"
        raise BootFailed(f"reference forward {arm.reference.forward} failed: {cause}")
    probes = {(s.name, p.id): p for s in sets for p in s.probes}
    k = arm.num_speculative_tokens
    # Greedy decoding repeats exactly: the runner decodes once and each pass repeats it.
    repeats = range(spec.probes.passes) if job["passes"] == 1 else range(1)
    records: list[ProbeRecord] = []
    counts: list[SpecCounts] = []
    for repeat in repeats:
        for row in lines[:-1]:
            rec = _record(spec, boot.attempt, probes[(row["set"], row["id"])], row, k, len(records))
            pass_index = repeat if job["passes"] == 1 else int(row["pass"])
            records.append(
                rec.model_copy(
                    update={"pass_index": pass_index if spec.probes.passes > 1 else None}
                )
            )
            counts.append(SpecCounts(rec.num_drafts, rec.num_draft_tokens,
                                     rec.num_accepted_tokens, rec.accepted_per_pos))  # fmt: skip
    total = sum(counts, SpecCounts.zero(k))
    return Measured(records, counts, [], total, seconds)


def reference_measurement(
    boot: ReferenceBoot, node: NodeEnvironment, watch: Watch | None
) -> tuple[Measured | None, str | None]:
    """`run_reference`'s measurement, or the one line saying why there is none."""
    try:
        return run_reference(boot, node, watch), None
    except BootFailed as exc:
        return None, one_line(exc.reason)
    except OSError as exc:
        return None, one_line(f"{type(exc).__name__}: {exc}")
    finally:
        shutil.rmtree(node.workdir / "cwd" / boot.attempt.boot_id, ignore_errors=True)


def _run(
    python: str, work: Path, out: Path, node: NodeEnvironment, watch: Watch | None, limit: float
) -> int:
    """The runner in its own session (killed with its group however the boot ends); its
    output goes to the boot's log."""
    env = {**os.environ, **node.server_env, "HF_HUB_OFFLINE": "1"}
    argv = [python, str(REFERENCE_RUNNER), str(work / "job.json"), str(out)]
    with node.log_file.open("ab") as log:
        proc = subprocess.Popen(argv, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        if watch is not None:
            watch.record(proc.pid, proc.pid)
        try:
            return proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            raise BootFailed(f"reference forward: no answer within {limit:.0f} s") from None
    finally:
        kill_groups([proc.pid], 5.0)
        proc.wait()


def _lines(out: Path) -> list[dict[str, Any]]:
    if not out.is_file():
        return []
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line]


def _record(
    spec: Experiment, a: Attempt, probe: Probe, row: dict[str, Any], k: int, seq: int
) -> ProbeRecord:
    per_pos = tuple(int(x) for x in row["accepted_per_pos"])
    steps = tuple(int(x) for x in row["step_accepted"])
    hist = [0] * (k + 1)
    for s in steps:
        hist[s] += 1
    drafts = int(row["drafts"])
    return ProbeRecord(
        experiment=spec.experiment.name,
        arm=a.arm,
        boot=a.boot,
        boot_id=a.boot_id,
        probe_set=probe.set_name,
        probe_id=probe.id,
        num_drafts=drafts,
        num_draft_tokens=drafts * k,
        num_accepted_tokens=sum(per_pos),
        accepted_per_pos=per_pos,
        prompt_tokens=len(row["prompt_ids"]),
        completion_tokens=len(row["output_ids"]),
        output_sha256=hashlib.sha256(str(row["text"]).encode("utf-8")).hexdigest(),
        source="reference",
        latency_s=float(row["latency_s"]),
        category=probe.category,
        sequence=seq,
        acceptance_histogram=tuple(hist),
        drafted_per_pos=(drafts,) * k,
        step_accepted=steps,
        step_drafted=(k,) * len(steps),
        prompt_ids_sha256=token_ids_sha256(row["prompt_ids"]),
        output_token_ids=tuple(int(x) for x in row["output_ids"]),
    )
