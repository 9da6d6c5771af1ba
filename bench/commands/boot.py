"""`specab boot FILE --arm NAME [--results-dir DIR] [--boot N]`: one real boot, for debugging
and for the smallest real run. Writes results/<experiment>/ like `run-ab` does."""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console


def next_attempt(root: Path, arm: str, boot: int) -> int:
    """1 + the highest attempt already on disk for (arm, boot); attempts count from 1."""
    from bench.records import boot_file_stem

    prefix = boot_file_stem(arm, boot, 0).rsplit("__a", 1)[0] + "__a"
    found = [
        int(p.stem[len(prefix) :])
        for p in (root / "boots").glob(f"{prefix}*.parquet")
        if p.stem[len(prefix) :].isdigit()
    ]
    return max(found, default=0) + 1


def summary_lines(row: dict[str, Any], probe_rows: list[dict[str, Any]]) -> list[str]:
    n = len(probe_rows)
    d = row.get("num_drafts") or 0
    pos = row.get("accepted_per_pos") or []
    pos0 = pos[0] / d if d and pos else math.nan
    mal = 1 + (row.get("num_accepted_tokens") or 0) / d if d else math.nan
    per_probe = (row.get("probe_seconds") or 0.0) / n if n else math.nan
    return [
        f"boot        {row['boot_id']}  status={row['status']}  vLLM {row.get('vllm_version')}",
        f"boot time   {row.get('boot_seconds') or math.nan:.1f} s (start -> /health)",
        f"probes      {n} in {row.get('probe_seconds') or math.nan:.1f} s "
        f"({per_probe:.2f} s/probe)",
        f"drafts      {d}  draft tokens {row.get('num_draft_tokens')}  "
        f"accepted {row.get('num_accepted_tokens')}",
        f"pos0 acceptance       {pos0:.4f}",
        f"mean accepted length  {mal:.4f}",
        f"per position          {list(pos)}",
    ]


def register(app: typer.Typer) -> None:
    @app.command("boot")
    def boot(
        experiment_file: Annotated[Path, typer.Argument(help="Experiment file (.toml).")],
        arm: Annotated[str, typer.Option("--arm", help="Arm to boot.")],
        results_dir: Annotated[
            Path | None,
            typer.Option("--results-dir", help="Results directory (default results/<name>)."),
        ] = None,
        boot_index: Annotated[
            int, typer.Option("--boot", min=0, help="Boot index within the arm (0-based).")
        ] = 0,
    ) -> int:
        """Boot one arm once: server, warmup, probes, counters; write results; print a summary.

        An existing results directory of the same experiment file is appended to (a new
        attempt); one written from a different file is refused.
        """
        from bench.experiment import load_spec
        from bench.records import BootRecord, ProbeRecord, boot_file_stem
        from bench.run import BootRequest, build_manifest, engine_seed, run_boot
        from bench.store import ResultsWriter

        spec = load_spec(experiment_file)
        spec.arm(arm)  # unknown arm: one line, exit 2, before anything is written
        manifest = build_manifest(spec, experiment_file)  # probe/arm errors come out here
        root = results_dir or Path("results") / spec.experiment.name
        writer = ResultsWriter.create(root, manifest, resume=(root / "manifest.json").exists())
        attempt = next_attempt(writer.root, arm, boot_index)
        boot_id = boot_file_stem(arm, boot_index, attempt)
        seed = engine_seed(spec.experiment.seed, arm, boot_index)
        console = Console(highlight=False)
        console.print(f"booting {arm} (boot {boot_index}, attempt {attempt}) ...")
        workdir = Path(tempfile.mkdtemp(prefix="specab-boot-"))
        try:
            outcome = run_boot(
                BootRequest(
                    spec=spec,
                    spec_file=str(experiment_file),
                    arm=arm,
                    boot=boot_index,
                    attempt=attempt,
                    order=len(list((writer.root / "boots").glob("*.parquet"))),
                    block=boot_index,
                    engine_seed=seed,
                    boot_id=boot_id,
                    log_path=str(writer.log_path(boot_id)),
                    workdir=str(workdir),
                )
            )
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        writer.write_boot(
            BootRecord.model_validate(outcome.boot_row),
            [ProbeRecord.model_validate(r) for r in outcome.probe_rows],
        )
        row = outcome.boot_row
        for line in summary_lines(row, outcome.probe_rows):
            console.print(line, markup=False)
        console.print(f"results     {writer.root}", markup=False)
        if row["status"] != "ok":
            console.print(f"FAILED: {row['error']}", markup=False)
            console.print(f"log         {writer.log_path(boot_id)}", markup=False)
            return 1
        return 0
