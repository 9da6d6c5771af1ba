"""The probe loop of one boot: warmup, then every probe sequentially with /metrics scrapes
around each, so per-probe counts can come from the response or from the counter deltas and
the two are checked against each other whenever both exist."""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx

from bench.errors import BootFailed
from bench.experiment import Probe, ProbeSet
from bench.records import AcceptanceSource, ProbeRecord
from bench.run._attempts import Attempt
from bench.run._metrics import SpecCounts, check_counts, counts_from_response, scrape
from bench.run._probes import Sampling, run_probe


@dataclass(frozen=True)
class Measured:
    records: list[ProbeRecord]
    counts: list[SpecCounts]  # what each record holds (per-request or /metrics delta)
    deltas: list[SpecCounts]  # the /metrics delta around each probe
    total: SpecCounts  # the whole /metrics delta over the measured probes
    probe_seconds: float


def check_boot_total(m: Measured, k: int) -> None:
    """The boot's whole /metrics delta must equal the sum over its probes, with drafts."""
    probe_sum = sum(m.counts, SpecCounts.zero(k))
    if probe_sum != m.total:
        raise BootFailed(
            f"metrics mismatch: boot /metrics delta {m.total.as_row()} != "
            f"sum over probes {probe_sum.as_row()}"
        )
    if m.total.num_drafts == 0:
        raise BootFailed("no drafts: speculative decoding off?")
    check_counts(m.total, "the boot")


def _settled_delta(
    client: httpx.Client, before: SpecCounts, k: int, expect: SpecCounts | None
) -> tuple[SpecCounts, SpecCounts]:
    """(snapshot, delta since `before`). When a value is expected, rescrape briefly in case
    the server records the last step's stats just after sending the response. (vLLM 0.32
    records them in the same event-loop turn that finishes the request, so with one request
    in flight the first scrape already sees them; the retry is a guard for other builds.)"""
    for _ in range(10):
        now = scrape(client, k)
        delta = now.minus(before)
        if expect is None or delta == expect:
            break
        time.sleep(0.1)
    return now, delta


def measure(
    client: httpx.Client,
    sets: list[ProbeSet],
    *,
    model: str,
    sampling: Sampling,
    warmup: int,
    source: AcceptanceSource,
    k: int,
    experiment: str,
    attempt: Attempt,
) -> Measured:
    """Warmup (discarded), then every probe sequentially with /metrics scrapes around each."""
    probes: list[Probe] = [p for s in sets for p in s.probes]
    for i in range(warmup):
        run_probe(client, probes[i % len(probes)], model, sampling)
    t0 = time.perf_counter()
    start = prev = scrape(client, k)
    records: list[ProbeRecord] = []
    counts_seen: list[SpecCounts] = []
    deltas: list[SpecCounts] = []
    for probe in probes:
        resp = run_probe(client, probe, model, sampling)
        what = f"probe {probe.set_name}/{probe.id}"
        counts: SpecCounts | None = None
        if source == "per_request":
            if resp.spec_decoding is None:
                raise BootFailed(f"{what}: response has no metrics.speculative_decoding")
            counts = counts_from_response(resp.spec_decoding, k)
        prev_next, delta = _settled_delta(client, prev, k, counts)
        prev = prev_next
        if counts is not None and counts != delta:
            raise BootFailed(
                f"metrics mismatch at {what}: per-request {counts.as_row()} "
                f"vs /metrics delta {delta.as_row()}"
            )
        if counts is None:
            counts = delta
        check_counts(counts, what)
        deltas.append(delta)
        counts_seen.append(counts)
        records.append(
            ProbeRecord(
                experiment=experiment,
                arm=attempt.arm,
                boot=attempt.boot,
                boot_id=attempt.boot_id,
                probe_set=probe.set_name,
                probe_id=probe.id,
                **counts.as_row(),
                prompt_tokens=resp.prompt_tokens,
                completion_tokens=resp.completion_tokens,
                output_sha256=resp.output_sha256,
                source=source,
                latency_s=resp.latency_s,
            )
        )
    total = prev.minus(start)
    return Measured(records, counts_seen, deltas, total, time.perf_counter() - t0)
