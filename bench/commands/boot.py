"""`specab boot FILE --arm NAME [--results-dir DIR] [--boot N]`: one real boot, for debugging
and for the smallest real run. Writes results/<experiment>/ like `run-ab` does.

`specab trace FILE --arm NAME [--probe ID] [--steps N]`: one real boot of a served arm with
the capture patch, replayed in its drafter's reference forward: the first tensor at which
serving departs from training (docs/trace.md). Exit 0 when every tensor agrees, 1 when it
names a divergence, 2 on bad input."""

from __future__ import annotations

import math
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from bench.commands.options import (
    ExperimentFile,
    Json,
    ResultsDirOption,
)
from bench.errors import SpecabError

if TYPE_CHECKING:
    from bench.experiment import Experiment
    from bench.records import BootRecord, ProbeRecord
    from bench.run import Ledger
    from bench.store import ResultsWriter


def summary_lines(record: BootRecord, probes: Sequence[ProbeRecord]) -> list[str]:
    n = len(probes)
    d = record.num_drafts or 0
    pos = record.accepted_per_pos or ()
    pos0 = pos[0] / d if d and pos else math.nan
    mal = 1 + (record.num_accepted_tokens or 0) / d if d else math.nan
    per_probe = (record.probe_seconds or 0.0) / n if n else math.nan
    return [
        f"boot        {record.boot_id}  status={record.status}  vLLM {record.vllm_version}",
        f"boot time   {record.boot_seconds or math.nan:.1f} s (start -> /health)",
        f"probes      {n} in {record.probe_seconds or math.nan:.1f} s ({per_probe:.2f} s/probe)",
        f"drafts      {d}  draft tokens {record.num_draft_tokens}  "
        f"accepted {record.num_accepted_tokens}",
        f"pos0 acceptance       {pos0:.4f}",
        f"mean accepted length  {mal:.4f}",
        f"per position          {list(pos)}",
    ]


def _boot_and_report(
    writer: ResultsWriter,
    ledger: Ledger,
    spec: Experiment,
    experiment_file: Path,
    arm: str,
    boot_index: int,
) -> int:
    """Claim the attempt, boot it, write it under the directory's claim, print the summary."""
    from bench.run import BootRequest, boot_here, boot_seed

    host = socket.gethostname()
    attempt = ledger.claim(writer, arm, boot_index, block=boot_index, host=host)
    req = BootRequest(spec, str(experiment_file), attempt, boot_seed(spec, arm, boot_index))
    log = writer.log_path(attempt.boot_id)
    console = Console(highlight=False)
    console.print(f"booting {arm} (boot {boot_index}, attempt {attempt.number}) ...")
    outcome = boot_here(req, log)
    writer.write_boot(outcome.record, outcome.probes)
    record = outcome.record
    for line in summary_lines(record, outcome.probes):
        console.print(line, markup=False)
    console.print(f"results     {writer.root}", markup=False)
    if record.status != "ok":
        console.print(f"FAILED: {record.error}", markup=False)
        console.print(f"log         {log}", markup=False)
        return 1
    return 0


def boot(
    experiment_file: ExperimentFile,
    arm: Annotated[str, typer.Option("--arm", help="Arm to boot.")],
    results_dir: ResultsDirOption = None,
    boot_index: Annotated[
        int, typer.Option("--boot", min=0, help="Boot index within the arm (0-based).")
    ] = 0,
) -> int:
    """Boot one arm once: server, warmup, probes, counters; write results; print a summary.

    An existing results directory of the same experiment is appended to (a new attempt);
    one whose arms, probe sets or settings differ from the file's is refused.
    """
    from bench.experiment import build_manifest, load_experiment, preflight, resume_changes
    from bench.run import Ledger
    from bench.store import ResultsWriter

    spec = load_experiment(experiment_file)
    spec.arm(arm)  # unknown arm: one line, exit 2, before anything is written
    preflight(experiment_file, spec=spec, arms=[arm])  # every mistake in what it boots
    manifest = build_manifest(spec, experiment_file)
    root = results_dir or Path("results") / spec.experiment.name
    # An existing directory is appended to only if it holds the same versions of the arms.
    exists = ResultsWriter.check_root(root)
    writer = ResultsWriter.create(
        root,
        manifest,
        resume=exists,
        compare=lambda old: resume_changes(
            old, manifest, where=root, proven=Ledger.read(root).proven_arms()
        ),
        claim="boot",
    )
    try:
        ledger = Ledger.read(root)  # read under the claim: nobody else writes it now
        return _boot_and_report(writer, ledger, spec, experiment_file, arm, boot_index)
    finally:
        writer.close()


def trace(
    experiment_file: ExperimentFile,
    arm: Annotated[str, typer.Option("--arm", help="Served arm to trace.")],
    reference: Annotated[
        str | None,
        typer.Option(
            "--reference", help="Reference arm to replay in (default: the first of the drafter's)."
        ),
    ] = None,
    probe: Annotated[
        str | None, typer.Option("--probe", help="Probe to trace, SET/ID or ID (default: first).")
    ] = None,
    steps: Annotated[int, typer.Option("--steps", help="Verify steps to capture (1-16).")] = 4,
    threshold: Annotated[
        float, typer.Option("--threshold", min=0.0, help="Relative error a tensor agrees within.")
    ] = 0.02,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Trace directory (default results/<name>/trace/<arm>)."),
    ] = None,
    json_out: Json = False,
) -> int:
    """Where serving departs from training: one boot of ARM on the real engine, its first
    verify steps captured tensor by tensor and replayed in the reference arm's forward of the
    same drafter; the first tensor that departs, and the config fields each side resolved."""
    from bench.experiment import load_experiment, preflight
    from bench.report import render_trace
    from bench.trace import TraceAsk, plan_trace, run_trace

    spec = load_experiment(experiment_file)
    plan = plan_trace(spec, experiment_file, TraceAsk(arm, reference, probe, steps, threshold))
    preflight(experiment_file, spec=spec, arms=[arm, plan.reference.name])
    root = out or Path("results") / spec.experiment.name / "trace" / arm
    if root.exists() and any(root.iterdir()):
        raise SpecabError(f"{root} holds an earlier trace", field="--out",
                          fix="give --out a new directory, or remove that one")  # fmt: skip
    result = run_trace(plan, root)
    console = Console(highlight=False, soft_wrap=True)
    if json_out:
        console.print_json(result.model_dump_json())
    else:
        render_trace(console, result)
        console.print(f"trace       {root / 'trace.json'}", markup=False)
    return 0 if result.first_divergence is None else 1


def register(app: typer.Typer) -> None:
    app.command("boot")(boot)
    app.command("trace")(trace)
