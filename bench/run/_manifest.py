"""manifest.json's body for a run: the spec as written, each arm's resolved definition and
hash, the probe sets' hashes, the sweep's cells (`bench.store.ResultsWriter` writes it)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import __version__
from bench.experiment import Experiment, load_probe_sets, measurement, resolve_arm, sweep_cells
from bench.records import SCHEMA_VERSION


def _now() -> datetime:
    return datetime.now(UTC)


def build_manifest(spec: Experiment, spec_file: str | Path) -> dict[str, Any]:
    """manifest.json's body (store.ResultsWriter adds schema_version if missing)."""
    resolved = [resolve_arm(spec, spec_file, a.name) for a in spec.arms]
    for arm in resolved:  # what no server can measure (concurrency without per-request counts)
        measurement(spec, spec_file, arm)
    sets = load_probe_sets(spec, spec_file)
    return {
        "schema_version": SCHEMA_VERSION,
        "experiment": spec.experiment.name,
        "created_at": _now().isoformat(),
        "specab_version": __version__,
        "spec_file": Path(spec_file).name,
        "spec": spec.model_dump(mode="json"),
        "spec_sha256": spec.sha256(),
        "arms": [
            {
                "name": a.name,
                "definition": a.definition(),
                "definition_sha256": a.definition_sha256(),
            }
            for a in resolved
        ],
        "probe_sets": [
            {"name": s.name, "path": p, "sha256": s.sha256, "count": s.count}
            for s, p in zip(sets, spec.probes.sets, strict=True)
        ],
        "baseline": spec.baseline,
        "alpha": spec.experiment.alpha,
        "margins": spec.experiment.margins.model_dump(),
        **({"sweep": cells} if (cells := sweep_cells(spec)) else {}),
    }
