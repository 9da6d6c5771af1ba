"""manifest.json for a run: the one place a `Manifest` is built. The spec as written, each
arm's resolved definition and hash, the probe sets' hashes, the sweep's cells and how the
driver orders and seeds boots (`bench.store.ResultsWriter` writes it)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import __version__
from bench.experiment.history import history_points
from bench.experiment.launch import measurement, resolve_arm
from bench.experiment.manifest.history_identity import same_as
from bench.experiment.preflight import awaits_build
from bench.experiment.probes import load_probe_sets
from bench.experiment.spec import Experiment, sweep_cells
from bench.records import SCHEMA_VERSION, SCREEN_SPENDING, SCREEN_SPREAD, Manifest

ORDER = "blocks of one boot per arm, shuffled within block by experiment.seed"


def _now() -> datetime:
    return datetime.now(UTC)


def build_manifest(
    spec: Experiment, spec_file: str | Path, *, orchestration: dict[str, Any] | None = None
) -> Manifest:
    """The manifest of a run of `spec`; `orchestration` is the driver's ordering and seeding
    (run-ab), absent for `specab boot`. Building it also validates arms and probe sets."""
    resolved = [resolve_arm(spec, spec_file, a.name) for a in spec.arms]
    for arm in resolved:  # what no server can measure (concurrency without per-request counts)
        if not awaits_build(arm):  # a point built later: its boot checks it
            measurement(spec, spec_file, arm)
    sets = load_probe_sets(spec, spec_file)
    body: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "experiment": spec.experiment.name,
        "created_at": _now().isoformat(),
        "specab_version": __version__,
        "spec_file": Path(spec_file).name,
        "spec": spec.redacted_dump(),
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
    }
    if (cells := sweep_cells(spec)) is not None:
        body["sweep"] = cells
    if (b := spec.bisect) is not None:
        body["bisect"] = {
            "metric": b.metric,
            "margin": b.margin,
            "boots_per_point": b.boots_per_point,
            "endpoint_looks": list(b.endpoint_looks),
            "commits": _commits(spec, Path(spec_file)),
        }
    if (sc := spec.screen) is not None:
        margin = sc.margin or getattr(spec.experiment.margins, sc.metric)
        looks = list(sc.design_looks(spec.experiment.boots_per_arm))
        body["screen"] = {
            "metric": sc.metric, "margin": margin, "looks": looks, "spending": SCREEN_SPENDING,
            "spread": SCREEN_SPREAD,
        }  # fmt: skip
    if orchestration is not None:
        body["orchestration"] = {"order": ORDER, **orchestration}
    return Manifest.model_validate(body)


def _commits(spec: Experiment, spec_file: Path) -> dict[str, dict[str, Any]]:
    """Each point's commit, subject, date and files, and the point it runs the same code as
    (if any), for a history made from git."""
    b = spec.bisect
    if b is None or b.git is None:
        return {}
    points = history_points(b.git.model_dump(), spec_file)
    repo = (spec_file.parent / b.git.repo).resolve()
    served = None if b.git.build is not None else [p.get("served", []) for p in points]
    twins = same_as(repo, [p["commit"] for p in points], b.git.package, served)
    names = [a.name for a in spec.arms]
    return {
        name: {
            **{k: p[k] for k in ("commit", "subject", "date", "files")},
            "unserved": p.get("unserved", []),
            "same_as": names[t] if t is not None else None,
        }
        for name, p, t in zip(names, points, twins, strict=True)
    }
