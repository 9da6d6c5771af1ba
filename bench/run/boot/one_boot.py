"""One boot end to end: launch plan -> server -> warmup -> probes -> counters -> one record.

`run_boot` never raises for runtime failures (crash, timeout, invalid counters, OSError,
HTTP errors): it returns a `failed` record whose `error` is one line. It raises SpecabError
for user mistakes, and lets anything else (a bug) propagate with its traceback."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

import httpx

from bench.errors import BootFailed
from bench.experiment import (
    Experiment,
    LaunchPlan,
    Measurement,
    ProbeSet,
    ResolvedArm,
    check_patches_applied,
    launch_plan,
    load_probe_sets,
    measurement,
    probe_sets_sha256,
    resolve_arm,
    scrub,
    secret_values,
    speculative_and_concurrency,
)
from bench.records import BootRecord, FailedPhase, ProbeRecord
from bench.run.attempt import Attempt
from bench.run.boot.commit_builds import commit_build
from bench.run.boot.counters import SpecCounts, scrape_k, vllm_version
from bench.run.boot.failure_reason import one_line, with_root_cause
from bench.run.boot.node_prep import image_at_head, prepare_node
from bench.run.boot.probe_loop import Measured, ProbePass, check_boot_total, measure
from bench.run.boot.reference_boot import ReferenceBoot, reference_measurement
from bench.run.boot.requests import Sampling
from bench.run.boot.start_gate import GateTicket, wait_at_gate
from bench.run.node import CPU_BIND, NodeEnvironment
from bench.run.process import (
    GangServer,
    LocalMembers,
    MemberLauncher,
    ServerProcess,
    ServerSetup,
    Watch,
    make_server,
)


@dataclass(frozen=True)
class BootRequest:
    """What to boot: one attempt of one arm of an experiment, and its engine seed."""

    spec: Experiment
    spec_file: str
    attempt: Attempt  # identity and the driver's columns, fixed before the launch
    engine_seed: int | None  # the server's --seed (None: the server's default)
    gate: GateTicket | None = None  # a duet's barrier before the probes (run-ab only)
    image: str = ""  # container arms: the image's id where the driver read the definition


@dataclass(frozen=True)
class BootOutcome:
    record: BootRecord
    probes: list[ProbeRecord]  # measured probes of an ok boot (empty if failed)
    # /metrics delta around each probe (probes' order; per_request: checked equal to it)
    probe_deltas: list[SpecCounts] = field(default_factory=list)


@dataclass
class _Timeline:
    """What the boot learns on the way; the record is built from it once, at the end."""

    started_at: datetime
    ready_at: datetime | None = None
    k: int = 0
    vllm_version: str = ""
    definition_sha256: str | None = None  # what this boot ran (resume/analyze integrity)
    probe_sets_sha256: str | None = None
    noop_patches: tuple[str, ...] = ()  # patches that changed nothing (allowed by the arm)
    speculative: bool = True
    concurrency: int = 1
    phase: FailedPhase | None = "start"  # where the boot is; a failure's `failed_phase`
    warnings: tuple[str, ...] = ()  # went wrong without spoiling the measurement
    corun_group: str | None = None  # the duet it was measured in (every member arrived)
    image_id: str | None = None  # container arms: the image's id on this (the head's) node
    no_drafts: str | None = None  # a speculative boot that drafted nothing: why
    reference_forward: str | None = None  # a reference arm's forward (no server)


def _now() -> datetime:
    return datetime.now(UTC)


def _arm_and_probes(req: BootRequest) -> tuple[ResolvedArm, list[ProbeSet]]:
    """The arm and probe sets; user mistakes raise SpecabError before anything starts."""
    spec = req.spec
    return resolve_arm(spec, req.spec_file, req.attempt.arm), load_probe_sets(spec, req.spec_file)


def run_boot(
    req: BootRequest,
    node: NodeEnvironment,
    *,
    on_started: Callable[[int, int], None] | None = None,
    watch: Watch | None = None,
    members: MemberLauncher | None = None,
) -> BootOutcome:
    """Run one boot attempt; see the module docstring for the error contract.

    `on_started(pid, pgid)` / `watch` (a `reaper.BootGuard`) let the caller kill the server
    if it is cancelled. A gang boot ([resources] nodes > 1) starts its other members through
    `members` (default: all on this machine, each its own process tree).
    """
    arm, sets = _arm_and_probes(req)
    if arm.reference is not None:  # no server: the drafter's own forward, offline
        return _reference_outcome(req, arm, sets, node, watch)
    unread, here = image_at_head(arm, req.attempt.host, req.image)
    unread = unread or commit_build(req.spec, arm)  # a commit's interpreter, built if not yet
    if unread is not None:  # its definition and measurement would be guessed: fail instead
        return BootOutcome(failed_record(req, unread, started_at=_now(), node=node), [])
    t = _Timeline(
        image_id=here,
        started_at=_now(),
        k=arm.num_speculative_tokens,
        definition_sha256=arm.definition_sha256(),  # as read on this node, at launch
        probe_sets_sha256=probe_sets_sha256(sets),
        speculative=arm.speculative,
        concurrency=arm.concurrency,
    )
    cwd = node.workdir / "cwd" / req.attempt.boot_id  # empty: `python -m` puts cwd on sys.path
    measured: Measured | None = None
    error: str | None = None
    try:
        cwd.mkdir(parents=True, exist_ok=True)
        environ = {**os.environ, **node.server_env}
        plan = launch_plan(
            arm,
            node.workdir,
            engine_seed=req.engine_seed,
            environ=environ,
            extra_mounts=[node.log_file.parent],
        )
        plan.create_mount_dirs()
        # acceptance source, timings, concurrency and their flags, for its interpreter
        how = measurement(req.spec, req.spec_file, arm, pythonpath=plan.env.get("PYTHONPATH", ""))
        srv = req.spec.server
        setup = ServerSetup.of(
            req.spec, arm, req.attempt.boot_id, req.engine_seed, (node.log_file, cwd)
        )
        server = make_server(
            arm,
            plan,
            replace(setup, extra_args=tuple(how.flags), image_id=req.image or here or ""),
            on_started=on_started,
            watch=watch,
            members=members or LocalMembers(node.workdir, node.log_file, environ),
        )
        prep = partial(
            prepare_node,
            srv.pre_boot,
            srv.min_free_memory_gb,
            node.log_file,
            wait_s=srv.memory_wait_s,
        )
        server.prepare(prep) if isinstance(server, GangServer) else prep()
        t.started_at = _now()  # boot_seconds counts from the launch, not the preparation
        with server:
            measured = _measure_served(req, server, plan, sets, how, t)
        t.warnings = server.lingering()
        t.phase = "counts"
        if reason := check_boot_total(measured, t.k):
            t.no_drafts = one_line(with_root_cause(reason, None, node.log_file))
    except BootFailed as exc:
        error = one_line(with_root_cause(exc.reason, t.phase, node.log_file))
    except (OSError, httpx.HTTPError) as exc:  # runtime failures; a bug propagates
        error = one_line(f"{type(exc).__name__}: {exc}")
    finally:
        shutil.rmtree(cwd, ignore_errors=True)
    if error is not None or t.no_drafts:  # a log line quoted may hold a secret it was given
        secrets = secret_values({**os.environ, **node.server_env, **arm.env}, arm.args)
        error, t.no_drafts = (x and scrub(x, secrets) for x in (error, t.no_drafts))
    record = _record(req, node, t, measured, error)
    if record.status == "ok" and measured is not None:
        return BootOutcome(record, measured.records, measured.deltas)
    return BootOutcome(record, [])


def _reference_outcome(
    req: BootRequest, arm: ResolvedArm, sets: list[ProbeSet], node: NodeEnvironment, watch: Any
) -> BootOutcome:
    t = _Timeline(started_at=_now(), k=arm.num_speculative_tokens, phase="probes",
                  reference_forward=arm.reference.forward if arm.reference else None)  # fmt: skip
    t.definition_sha256, t.probe_sets_sha256 = arm.definition_sha256(), probe_sets_sha256(sets)
    t.ready_at = t.started_at
    boot = ReferenceBoot(req.spec, req.spec_file, req.attempt, arm, sets, req.engine_seed)
    measured, error = reference_measurement(boot, node, watch)
    if measured is not None:
        t.phase, t.no_drafts = "counts", check_boot_total(measured, t.k)
    record = _record(req, node, t, measured, error)
    return BootOutcome(record, measured.records if record.status == "ok" and measured else [])


def _measure_served(
    req: BootRequest,
    server: ServerProcess | GangServer,
    plan: LaunchPlan,
    sets: list[ProbeSet],
    how: Measurement,
    t: _Timeline,
) -> Measured:
    """/health, the patch check, then warmup and probes on the running server (a gang:
    every member's patch check on its node, and the probes under the gang's monitor)."""
    server.wait_ready()
    t.ready_at, t.phase = _now(), "patch_check"
    # a patched module the engine imports lazily (a background thread, the first request)
    # may still be waiting here: checked for good after the warmup, before any probe
    t.noop_patches = check_patches_applied(plan, waiting_ok=True)
    gang = server if isinstance(server, GangServer) else None
    if gang is not None:
        t.noop_patches = tuple(dict.fromkeys(t.noop_patches + gang.check_member_patches()))
    t.phase = "first_request"
    with (
        gang.watching() if gang is not None else contextlib.nullcontext(),
        httpx.Client(
            base_url=server.base_url, timeout=60, trust_env=False, headers=plan.client_headers
        ) as client,
    ):
        t.vllm_version = vllm_version(client)
        if t.k < 1 and how.speculative:  # the method's default (e.g. MTP n_predict)
            t.k = scrape_k(client)
        probing = ProbePass(
            req.spec.experiment.name,
            req.attempt,
            plan.served_model_name,
            how.source,
            t.k,
            Sampling.from_spec(req.spec.probes),
            warmup=req.spec.probes.warmup,
            passes=req.spec.probes.passes,
            concurrency=how.concurrency,
            speculative=how.speculative,
        )
        on = partial(setattr, t, "phase", "probes")
        before = partial(_after_warmup, req, plan, t)
        return measure(client, sets, probing, on_response=on, before_probes=before)


def _after_warmup(req: BootRequest, plan: LaunchPlan, t: _Timeline) -> None:
    """Every patch applied in the engine by now (a lazy import had the warmup to happen),
    then a duet's barrier: its members' probes start together."""
    phase, t.phase = t.phase, "patch_check"
    t.noop_patches = tuple(dict.fromkeys(t.noop_patches + check_patches_applied(plan)))
    t.phase = phase
    if req.gate is not None:
        booted_s = (_now() - t.started_at).total_seconds()
        t.corun_group = wait_at_gate(req.gate, req.attempt.boot_id, booted_s)


def failed_record(
    req: BootRequest, error: str, *, started_at: datetime, node: NodeEnvironment | None = None
) -> BootRecord:
    """The record of an attempt that produced none (worker or node died, cancelled)."""
    speculative, concurrency = speculative_and_concurrency(req.spec, req.attempt.arm)
    t = _Timeline(
        started_at=started_at, speculative=speculative, concurrency=concurrency, phase=None
    )
    return _record(req, node, t, None, error)


def _record(
    req: BootRequest,
    node: NodeEnvironment | None,
    t: _Timeline,
    measured: Measured | None,
    error: str | None,
) -> BootRecord:
    """The one place a BootRecord is built (by the boot, or for an attempt without one)."""
    a = req.attempt
    ready = t.ready_at
    return BootRecord(
        experiment=req.spec.experiment.name,
        arm=a.arm,
        boot=a.boot,
        attempt=a.number,
        boot_id=a.boot_id,
        status="ok" if error is None else "failed",
        error=error,
        order=a.order,
        block=a.block,
        host=a.host,
        gpu=node.gpu if node else "",
        started_at=t.started_at,
        ready_at=ready,
        finished_at=_now(),
        boot_seconds=(ready - t.started_at).total_seconds() if ready else None,
        probe_seconds=measured.probe_seconds if measured else None,
        num_speculative_tokens=t.k,
        vllm_version=t.vllm_version,
        log_path=a.log_path,
        **(measured.total.as_row() if measured else {}),
        engine_seed=req.engine_seed,
        compile_cache=node.compile_cache if node else None,
        definition_sha256=t.definition_sha256,
        probe_sets_sha256=t.probe_sets_sha256,
        noop_patches=t.noop_patches,
        speculative=t.speculative,
        concurrency=t.concurrency,
        members=req.spec.resources.nodes,
        member_hosts=a.hosts(req.spec.resources.nodes),
        failed_phase=t.phase if error is not None else None,
        warnings=t.warnings,
        corun_group=t.corun_group if error is None else None,
        image_id=t.image_id,
        no_drafts=t.no_drafts if error is None else None,
        reference_forward=t.reference_forward,
        slot=a.slot,
        cpus=node.server_env.get(CPU_BIND, "") if node else "",
    )
