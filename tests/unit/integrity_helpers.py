"""Results directories as run-ab starts them, without booting: the manifest run-ab writes and
ok boot rows carrying the hashes a real boot records (resume and analyze integrity tests)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from bench.experiment import (
    build_manifest,
    load_probe_sets,
    load_spec,
    probe_sets_sha256,
    resolve_arm,
)
from bench.records import BootRecord, ProbeRecord, boot_file_stem
from bench.store import ResultsWriter

PER_POS = (4, 2, 1)  # K = 3, as in the battery's experiment


def ok_boot(
    spec_file: Path,
    arm: str,
    boot: int,
    *,
    order: int = 0,
    definition_sha256: str | None = None,
    probe_sets_sha256_: str | None = None,
) -> tuple[BootRecord, list[ProbeRecord]]:
    """An ok boot of `arm` with valid counts on every probe, and the hashes a boot of the
    file's current arm would record (unless given)."""
    spec = load_spec(spec_file)
    sets = load_probe_sets(spec, spec_file)
    boot_id = boot_file_stem(arm, boot, 1)
    probes = [
        ProbeRecord(
            experiment=spec.experiment.name,
            arm=arm,
            boot=boot,
            boot_id=boot_id,
            probe_set=s.name,
            probe_id=p.id,
            num_drafts=5,
            num_draft_tokens=15,
            num_accepted_tokens=sum(PER_POS),
            accepted_per_pos=PER_POS,
            prompt_tokens=4,
            completion_tokens=16,
            output_sha256="ab" * 32,
            source="metrics_delta",
            latency_s=0.1,
        )
        for s in sets
        for p in s.probes
    ]
    now = datetime.now(UTC)
    n = len(probes)
    record = BootRecord(
        experiment=spec.experiment.name,
        arm=arm,
        boot=boot,
        attempt=1,
        boot_id=boot_id,
        status="ok",
        order=order,
        block=boot,
        host="test",
        started_at=now,
        ready_at=now,
        finished_at=now,
        boot_seconds=1.0,
        probe_seconds=1.0,
        num_speculative_tokens=len(PER_POS),
        vllm_version="0.32.0",
        log_path=f"logs/{boot_id}.log",
        num_drafts=5 * n,
        num_draft_tokens=15 * n,
        num_accepted_tokens=sum(PER_POS) * n,
        accepted_per_pos=tuple(x * n for x in PER_POS),
        definition_sha256=definition_sha256
        or resolve_arm(spec, spec_file, arm).definition_sha256(),
        probe_sets_sha256=probe_sets_sha256_ or probe_sets_sha256(sets),
    )
    return record, probes


def start_dir(spec_file: Path, root: Path, boots: dict[str, int]) -> Path:
    """A results directory started from `spec_file` with `boots[arm]` ok boots per arm."""
    spec = load_spec(spec_file)
    manifest = build_manifest(spec, spec_file, orchestration={"common_random_numbers": False})
    writer = ResultsWriter.create(root, manifest)
    order = 0
    for arm, n in boots.items():
        for b in range(n):
            writer.write_boot(*ok_boot(spec_file, arm, b, order=order))
            order += 1
    return root
