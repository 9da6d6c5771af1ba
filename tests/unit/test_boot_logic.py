"""Boot logic without a vLLM server: the probe loop against recorded real responses (an
httpx MockTransport that injects faults), the manifest, and a failing boot through the CLI."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.cli import run
from bench.errors import BootFailed
from bench.experiment import ProbeSet, build_manifest, load_probe_set, load_spec
from bench.run import Attempt, BootRequest, Ledger
from bench.run.boot import (
    ProbePass,
    Sampling,
    SpecCounts,
    check_boot_total,
    failed_record,
    measure,
    one_line,
)
from bench.store import ResultsWriter, load_results

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.32-cpu"
BEFORE = (FIX / "metrics_before.txt").read_text()
AFTER = (FIX / "metrics_after.txt").read_text()
COMPLETION = json.loads((FIX / "completion.json").read_text())


def one_probe(tmp_path: Path) -> ProbeSet:
    f = tmp_path / "one.jsonl"
    f.write_text('{"id": "p1", "prompt": "def parse_header(line):\\n    "}\n')
    return load_probe_set(f)


def replay_with(metrics_pages: list[str], completion: dict[str, Any]) -> httpx.Client:
    """Serve /metrics pages in order (the last one repeats) and `completion`."""
    pages = list(metrics_pages)

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(200, text=pages.pop(0) if len(pages) > 1 else pages[0])
        return httpx.Response(200, json=completion)

    return httpx.Client(base_url="http://server", transport=httpx.MockTransport(handler))


def replay(metrics_pages: list[str]) -> httpx.Client:
    """The recorded real completion, with these /metrics pages."""
    return replay_with(metrics_pages, COMPLETION)


def run_measure(tmp_path: Path, pages: list[str], source: str) -> Any:
    attempt = Attempt("a", 0, 1, 0, 0, "h", "logs/a__b000__a1.log")
    how = ProbePass("e", attempt, "tiny-target", source, 4)  # type: ignore[arg-type]
    return measure(replay(pages), [one_probe(tmp_path)], how)


def test_per_request_counts_checked_against_the_metrics_delta(tmp_path: Path) -> None:
    m = run_measure(tmp_path, [BEFORE, AFTER], "per_request")
    (rec,) = m.records
    assert rec.source == "per_request" and rec.probe_id == "p1"
    assert (rec.boot_id, rec.arm, rec.experiment) == ("a__b000__a1", "a", "e")
    assert (rec.num_drafts, rec.num_accepted_tokens) == (12, 39)
    assert rec.accepted_per_pos == (10, 10, 10, 9)
    assert m.deltas[0].num_drafts == 12 and m.total == m.deltas[0]
    check_boot_total(m, 4)  # the boot's delta equals its one probe


def test_metrics_delta_path(tmp_path: Path) -> None:
    m = run_measure(tmp_path, [BEFORE, AFTER], "metrics_delta")
    assert m.records[0].source == "metrics_delta" and m.records[0].num_draft_tokens == 48


def test_disagreeing_paths_fail_the_boot(tmp_path: Path) -> None:
    """/metrics that never moves while the response reports 12 drafts: 'metrics mismatch'."""
    with pytest.raises(BootFailed, match="metrics mismatch at probe one/p1"):
        run_measure(tmp_path, [BEFORE], "per_request")


def test_counter_going_down_fails_the_boot(tmp_path: Path) -> None:
    with pytest.raises(BootFailed, match="counter reset"):
        run_measure(tmp_path, [AFTER, BEFORE], "metrics_delta")


def test_malformed_server_data_is_a_boot_failure_not_a_crash(tmp_path: Path) -> None:
    with pytest.raises(BootFailed, match="malformed /metrics"):
        run_measure(tmp_path, ["vllm:spec_decode_num_drafts_total{engine= 1\n"], "metrics_delta")
    bad = json.loads(json.dumps(COMPLETION))
    del bad["metrics"]["speculative_decoding"]["acceptance_histogram"]
    with pytest.raises(BootFailed, match=r"malformed metrics\.speculative_decoding"):
        attempt = Attempt("a", 0, 1, 0, 0, "h", "logs/a__b000__a1.log")
        how = ProbePass("e", attempt, "m", "per_request", 4, Sampling())
        measure(replay_with([BEFORE, AFTER], bad), [one_probe(tmp_path)], how)


def test_boot_total_must_equal_the_probe_sum(tmp_path: Path) -> None:
    m = run_measure(tmp_path, [BEFORE, AFTER], "metrics_delta")
    one_more = dataclasses.replace(m.total, num_drafts=m.total.num_drafts + 1)
    with pytest.raises(BootFailed, match="metrics mismatch: boot /metrics delta"):
        check_boot_total(dataclasses.replace(m, total=one_more), 4)
    # drafting nothing is measured all the same (its speed counts), with the reason why
    nothing = check_boot_total(dataclasses.replace(m, counts=[], total=SpecCounts.zero(4)), 4)
    assert nothing is not None and nothing.startswith("no drafts: speculative decoding off?")
    assert check_boot_total(m, 4) is None


def test_one_line() -> None:
    assert one_line("server exited: boom\n--- tail ---\nmore") == "server exited: boom"
    assert one_line("") == "unknown error"


def experiment(tmp_path: Path, python: str = "") -> Path:
    (tmp_path / "p.jsonl").write_text('{"id": "a", "prompt": "x"}\n{"id": "b", "prompt": "y"}\n')
    toml = tmp_path / "exp.toml"
    toml.write_text(
        f"""
[experiment]
name = "unit"
[server]
model = "models/target"
ready_timeout_s = 30
{f'python = "{python}"' if python else ""}
[server.speculative_config]
method = "draft_model"
model = "models/draft"
num_speculative_tokens = 3
[probes]
sets = ["p.jsonl"]
[[arms]]
name = "baseline"
[[arms]]
name = "fix"
env = {{ FIX = "1" }}
"""
    )
    return toml


def test_manifest(tmp_path: Path) -> None:
    toml = experiment(tmp_path)
    m = build_manifest(load_spec(toml), toml)
    assert m.schema_version == 1 and m.experiment == "unit" and m.baseline == "baseline"
    assert [a.name for a in m.arms] == ["baseline", "fix"]
    assert m.arms[0].definition_sha256 != m.arms[1].definition_sha256
    (ps,) = m.probe_sets
    assert ps.name == "p" and ps.count == 2 and len(ps.sha256) == 64
    assert m.spec_sha256 == load_spec(toml).sha256()
    # what run-ab adds: how boots were ordered and seeded
    ran = build_manifest(load_spec(toml), toml, orchestration={"per_boot_seed": True})
    assert ran.orchestration is not None and ran.orchestration["per_boot_seed"] is True
    assert "shuffled" in ran.orchestration["order"] and m.orchestration is None
    assert m.margins == {
        "acceptance_pos0": 0.005,
        "mean_accepted_length": 0.02,
        "output_tokens_per_s": 0.02,
        "request_mean_accepted_length": 0.02,
    }
    json.dumps(m.to_json())  # JSON-able as is


def test_cli_records_a_failed_boot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A server that exits at once (the fault-injection fake): exit 1, a failed boot row, no
    probe rows, loads back. (A 'python' without vLLM is refused up front by preflight.)"""
    toml = experiment(tmp_path)
    fakes = Path(__file__).resolve().parents[1] / "fakes"
    env = f'env = {{ FIX = "1", PYTHONPATH = "{fakes}", SPECAB_FAKE_FAULT = "crash_at_boot" }}'
    toml.write_text(toml.read_text().replace('env = { FIX = "1" }', env))
    out = tmp_path / "results"
    assert run(["boot", str(toml), "--arm", "fix", "--results-dir", str(out)]) == 1
    assert "FAILED: server exited with code 3 during startup" in capsys.readouterr().out
    res = load_results(out)
    (row,) = res.boots.to_dict("records")
    assert (row["status"], row["arm"], row["attempt"]) == ("failed", "fix", 1)
    assert "\n" not in row["error"] and row["log_path"] == "logs/fix__b000__a1.log"
    assert len(res.probes) == 0
    # a second try appends attempt 2 to the same directory, launched after the first
    assert run(["boot", str(toml), "--arm", "fix", "--results-dir", str(out)]) == 1
    boots = load_results(out).boots.sort_values("attempt")
    assert boots["attempt"].tolist() == [1, 2] and boots["order"].tolist() == [0, 1]


def test_ledger_numbers_attempts_and_launch_order_after_the_disk(tmp_path: Path) -> None:
    """One rule for `specab boot` and run-ab: attempts of (arm, boot) count from 1 past the
    highest on disk, launch order continues past the highest on disk."""
    toml = experiment(tmp_path)
    spec = load_spec(toml)
    writer = ResultsWriter.create(tmp_path / "r", build_manifest(spec, toml))
    ledger = Ledger.read(writer.root)
    a1 = ledger.claim(writer, "fix", 0, block=0, host="n1")
    a2 = ledger.claim(writer, "fix", 0, block=0, host="n1")
    b1 = ledger.claim(writer, "baseline", 3, block=3, host="n2")
    assert [(a.number, a.order) for a in (a1, a2, b1)] == [(1, 0), (2, 1), (1, 2)]
    assert (a2.boot_id, a2.log_path, b1.host) == ("fix__b000__a2", "logs/fix__b000__a2.log", "n2")
    for a in (a1, b1):  # a2 never wrote anything (e.g. the driver was killed)
        req = BootRequest(spec, str(toml), a, engine_seed=None)
        writer.write_boot(failed_record(req, "worker died", started_at=datetime.now(UTC)))
    again = Ledger.read(writer.root)  # the next run, or `specab boot`
    assert (again.ok, again.next_order) == ({}, 3)
    c = again.claim(writer, "fix", 0, block=0, host="n1")
    assert (c.number, c.order) == (2, 3)


STUB_RUNTIME = """#!/bin/sh
# a docker-compatible CLI whose image is pulled only once the file PULLED exists
[ "$1" = run ] || exit 0
[ -f "{pulled}" ] || {{ echo "Error: image not known" >&2; exit 125; }}
echo '{{"version": "0.32.0", "per_request": false, "timing": false}}'
"""
# Answers once (the image's vLLM has every feature), then fails like a daemon that stopped
# answering: each further `run` exits 125 and is counted.
FLAKY_RUNTIME = """#!/bin/sh
[ "$1" = run ] || exit 0
echo x >> "{calls}"
[ "$(wc -l < "{calls}")" -eq 1 ] || {{ echo "Error: daemon timed out" >&2; exit 125; }}
echo '{{"version": "0.32.0", "per_request": true, "timing": true}}'
"""


def test_an_image_not_pulled_on_a_node_fails_the_boot_naming_it_and_is_asked_again(
    tmp_path: Path,
) -> None:
    """A probe of an image that is not on the node yet was cached as "no vLLM", and boots
    then recorded another definition hash and fell back to /metrics deltas: now the boot
    fails naming the image and the node, and the next boot reads the pulled image."""
    from bench.experiment import resolve_arm
    from bench.run import NodeEnvironment, run_boot

    runtime = tmp_path / "stub-runtime"
    runtime.write_text(STUB_RUNTIME.format(pulled=tmp_path / "PULLED"))
    runtime.chmod(0o755)
    for m in ("target", "draft"):
        (tmp_path / "models" / m).mkdir(parents=True)
        (tmp_path / "models" / m / "config.json").write_text("{}")
    toml = experiment(tmp_path)
    text = toml.read_text().replace(
        "[server.speculative_config]",
        f'container = {{ runtime = "{runtime}", image = "img:new" }}\n[server.speculative_config]',
    )
    toml.write_text(text)
    spec = load_spec(toml)
    attempt = Attempt("baseline", 0, 1, 0, 0, "node-7", "logs/baseline__b000__a1.log")
    req = BootRequest(spec, str(toml), attempt, engine_seed=None)
    node = NodeEnvironment(workdir=tmp_path / "work", log_file=tmp_path / "work" / "b.log")
    out = run_boot(req, node)
    assert out.record.status == "failed" and out.probes == []
    error = out.record.error or ""
    assert "cannot read vLLM in image img:new" in error and "on node node-7" in error
    assert "pull img:new` on every node" in error
    (tmp_path / "PULLED").write_text("")  # pulled now: asked again, not remembered as none
    assert resolve_arm(spec, toml, "baseline").vllm_version() == "0.32.0"


def test_an_images_version_and_features_are_one_answer_so_an_arm_never_mixes_methods(
    tmp_path: Path,
) -> None:
    """The image's version and the features the measurement is chosen from are read in one
    run and kept together: a runtime that answered once and then stopped answering cannot
    leave the arm with a version (its definition) but without its per-request metrics, which
    recorded /metrics-delta boots beside per_request boots of the same arm."""
    from bench.experiment import measurement, resolve_arm

    runtime, calls = tmp_path / "flaky-runtime", tmp_path / "calls"
    runtime.write_text(FLAKY_RUNTIME.format(calls=calls))
    runtime.chmod(0o755)
    for m in ("target", "draft"):
        (tmp_path / "models" / m).mkdir(parents=True)
        (tmp_path / "models" / m / "config.json").write_text("{}")
    toml = experiment(tmp_path)
    container = f'container = {{ runtime = "{runtime}", image = "img:flaky" }}\n'
    text = toml.read_text().replace(
        "[server.speculative_config]", container + "[server.speculative_config]"
    )
    toml.write_text(text)
    spec = load_spec(toml)
    for _ in range(3):  # three boots of the arm in one worker
        arm = resolve_arm(spec, toml, "baseline")
        assert arm.vllm_version() == "0.32.0"
        how = measurement(spec, toml, arm)
        assert how.source == "per_request" and how.timing
    assert calls.read_text().count("x") == 1  # asked once, kept
