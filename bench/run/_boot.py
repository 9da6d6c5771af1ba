"""One boot end to end: launch plan -> server -> warmup -> probes -> counters -> one boot row.

`run_boot` never raises for runtime failures (crash, timeout, invalid counters): it returns a
`failed` row whose `error` is one line. It raises SpecabError only for user mistakes.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench import __version__
from bench.errors import BootFailed, SpecabError
from bench.experiment import (
    Experiment,
    LaunchPlan,
    ResolvedArm,
    check_patches_applied,
    launch_plan,
    load_probe_sets,
    resolve_arm,
)
from bench.records import SCHEMA_VERSION
from bench.run._measure import Measured, measure
from bench.run._metrics import (
    SpecCounts,
    check_counts,
    positions_in_metrics,
    supports_per_request_metrics,
)
from bench.run._probes import Sampling
from bench.run._server import ServerProcess

PER_REQUEST_FLAG = "--per-request-spec-decode-metrics"


@dataclass(frozen=True)
class BootRequest:
    spec: Experiment
    spec_file: str
    arm: str
    boot: int
    attempt: int
    order: int
    block: int
    engine_seed: int | None
    boot_id: str
    log_path: str
    workdir: str


@dataclass
class BootOutcome:
    boot_row: dict[str, Any]  # BOOT_SCHEMA
    probe_rows: list[dict[str, Any]]  # PROBE_SCHEMA, measured probes only (empty if failed)
    # /metrics delta around each measured probe (same order as probe_rows); with
    # source per_request these were checked equal to the per-request counts.
    probe_deltas: list[SpecCounts] = field(default_factory=list)


def _now() -> datetime:
    return datetime.now(UTC)


def one_line(text: str, limit: int = 500) -> str:
    """First line of a multi-line reason (the log tail stays in the log file)."""
    first = text.strip().splitlines()[0] if text.strip() else "unknown error"
    return " ".join(first.split())[:limit]


def num_spec_tokens(arm: ResolvedArm) -> int:
    k = arm.speculative_config.get("num_speculative_tokens")
    return int(k) if isinstance(k, int | float | str) and str(k).isdigit() else 0


def choose_source(spec: Experiment, plan: LaunchPlan) -> str:
    """per_request | metrics_delta, per probes.acceptance_source and what the server supports."""
    wanted = spec.probes.acceptance_source
    if wanted == "metrics_delta":
        return wanted
    if PER_REQUEST_FLAG in plan.argv:
        return "per_request"
    ok = supports_per_request_metrics(plan.argv[0], plan.env.get("PYTHONPATH", ""))
    if wanted == "per_request" and not ok:
        raise SpecabError(
            f"the server's vLLM ({plan.argv[0]}) has no {PER_REQUEST_FLAG} detailed",
            field="probes.acceptance_source",
            fix='set acceptance_source = "auto" or "metrics_delta"',
        )
    return "per_request" if ok else "metrics_delta"


def _relative_log(log_path: Path) -> str:
    """results/<exp>/logs/x.log -> logs/x.log (the results dir moves as a whole)."""
    root = log_path.parent.parent
    if log_path.parent.name == "logs" and (root / "manifest.json").is_file():
        return str(log_path.relative_to(root))
    return str(log_path)


def _served_model(client: httpx.Client, plan: LaunchPlan) -> str:
    name = getattr(plan, "served_model_name", "")
    if name:
        return str(name)
    data = client.get("/v1/models").json()["data"]
    return str(data[0]["id"])


def _server_k(client: httpx.Client) -> int:
    k = positions_in_metrics(client.get("/metrics").text)
    if k < 1:
        raise BootFailed(
            "no drafts: speculative decoding off? (/metrics has no spec_decode counters)"
        )
    return k


def _vllm_version(client: httpx.Client) -> str:
    try:
        return str(client.get("/version").json().get("version", ""))
    except (httpx.HTTPError, ValueError):
        return ""


def run_boot(
    req: BootRequest, *, on_started: Callable[[int, int], None] | None = None
) -> BootOutcome:
    """Run one boot attempt; see the module docstring for the error contract."""
    spec = req.spec
    arm = resolve_arm(spec, req.spec_file, req.arm)
    sets = load_probe_sets(spec, req.spec_file)
    if spec.probes.concurrency != 1:
        raise SpecabError(
            "concurrent probes are not implemented yet",
            file=req.spec_file,
            field="probes.concurrency",
            fix="set concurrency = 1",
        )
    k = num_spec_tokens(arm)
    log_path = Path(req.log_path)
    ident = {"experiment": spec.experiment.name, "arm": req.arm, "boot": req.boot}
    row: dict[str, Any] = {
        **ident,
        "attempt": req.attempt,
        "boot_id": req.boot_id,
        "status": "failed",
        "error": None,
        "order": req.order,
        "block": req.block,
        "host": socket.gethostname(),
        "gpu": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        "started_at": _now(),
        "ready_at": None,
        "finished_at": None,
        "boot_seconds": None,
        "probe_seconds": None,
        "num_speculative_tokens": k,
        "vllm_version": "",
        "log_path": None,
        **dict.fromkeys(("num_drafts", "num_draft_tokens", "num_accepted_tokens"), None),
        "accepted_per_pos": None,
        "engine_seed": req.engine_seed if spec.server.per_boot_seed else None,
    }
    workdir = Path(req.workdir)
    cwd = workdir / "cwd" / req.boot_id  # empty: `python -m` puts cwd on sys.path
    cwd.mkdir(parents=True, exist_ok=True)
    plan = launch_plan(arm, workdir, engine_seed=row["engine_seed"])
    source = choose_source(spec, plan)
    add_flag = source == "per_request" and PER_REQUEST_FLAG not in plan.argv
    extra = [PER_REQUEST_FLAG, "detailed"] if add_flag else []
    measured: Measured | None = None
    try:
        server = ServerProcess(
            plan,
            log_path,
            host=spec.server.host,
            ready_timeout_s=spec.server.ready_timeout_s,
            stop_grace_s=spec.server.stop_grace_s,
            extra_args=extra,
            cwd=cwd,
            on_started=on_started,
        )
        row["started_at"] = _now()
        with server:
            server.wait_ready()
            row["ready_at"] = _now()
            row["boot_seconds"] = (row["ready_at"] - row["started_at"]).total_seconds()
            check_patches_applied(plan)
            with httpx.Client(base_url=server.base_url, timeout=60, trust_env=False) as client:
                row["vllm_version"] = _vllm_version(client)
                if k < 1:  # the method's default (e.g. MTP n_predict): ask the server
                    k = row["num_speculative_tokens"] = _server_k(client)
                measured = measure(
                    client,
                    sets,
                    model=_served_model(client, plan),
                    sampling=Sampling.from_spec(spec.probes),
                    warmup=spec.probes.warmup,
                    source=source,
                    k=k,
                    base_row={**ident, "boot_id": req.boot_id},
                )
        row["probe_seconds"] = measured.probe_seconds
        row.update(measured.total.as_row())
        probe_sum = sum((SpecCounts(**_counts(r)) for r in measured.rows), SpecCounts.zero(k))
        if probe_sum != measured.total:
            raise BootFailed(
                f"metrics mismatch: boot /metrics delta {measured.total.as_row()} != "
                f"sum over probes {probe_sum.as_row()}"
            )
        if measured.total.num_drafts == 0:
            raise BootFailed("no drafts: speculative decoding off?")
        check_counts(measured.total, "the boot")
        row["status"] = "ok"
    except BootFailed as exc:
        row["error"] = one_line(exc.reason)
    except (OSError, httpx.HTTPError, ValueError, KeyError) as exc:  # runtime, not user error
        row["error"] = one_line(f"{type(exc).__name__}: {exc}")
    finally:
        shutil.rmtree(cwd, ignore_errors=True)
    row["finished_at"] = _now()
    row["log_path"] = _relative_log(log_path) if log_path.exists() else None
    ok = row["status"] == "ok" and measured is not None
    return BootOutcome(
        boot_row=row,
        probe_rows=measured.rows if ok and measured else [],
        probe_deltas=measured.deltas if ok and measured else [],
    )


def _counts(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "num_drafts": r["num_drafts"],
        "num_draft_tokens": r["num_draft_tokens"],
        "num_accepted_tokens": r["num_accepted_tokens"],
        "accepted_per_pos": tuple(r["accepted_per_pos"]),
    }


def build_manifest(spec: Experiment, spec_file: str | Path) -> dict[str, Any]:
    """manifest.json's body (store.ResultsWriter adds schema_version if missing)."""
    resolved = [resolve_arm(spec, spec_file, a.name) for a in spec.arms]
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
    }
