"""The probe loop of one boot: warmup, then every probe.

At concurrency 1 the probes run one after another in probe-set order with /metrics scrapes
around each, so per-probe counts can come from the response or from the counter deltas and
the two are checked against each other whenever both exist. At concurrency c > 1 they run in
c lanes (`lanes`); per-probe counts then come only from the responses (a /metrics delta
cannot be split between probes in flight together), and the boot's whole /metrics delta
must still equal their sum (`check_boot_total`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from bench.errors import BootFailed
from bench.experiment import Probe, ProbeSet
from bench.records import AcceptanceSource, ProbeRecord, token_ids_sha256
from bench.run.attempt import Attempt
from bench.run.boot.counters import (
    SpecCounts,
    check_counts,
    counts_from_response,
    drafted_per_position,
    ordered_steps,
    scrape,
)
from bench.run.boot.lanes import LaneClient, run_lanes
from bench.run.boot.requests import ProbeResponse, Sampling, run_probe


@dataclass(frozen=True)
class Measured:
    records: list[ProbeRecord]
    counts: list[SpecCounts]  # what each record holds (per-request or /metrics delta)
    deltas: list[SpecCounts]  # the /metrics delta around each probe (empty when concurrent)
    total: SpecCounts  # the whole /metrics delta over the measured probes
    probe_seconds: float
    speculative: bool = True  # False: a no-speculation boot (all counts must be zero)


NO_DRAFTS = "no drafts"  # a speculative boot that drafted nothing: its reason starts so


def check_boot_total(m: Measured, k: int) -> str | None:
    """The boot's whole /metrics delta must equal the sum over its probes, and a
    no-speculation boot must not have drafted. A speculative boot that drafted nothing is
    measured all the same (its speed counts): returns why it did not draft, else None."""
    probe_sum = sum(m.counts, SpecCounts.zero(k))
    if probe_sum != m.total:
        raise BootFailed(
            f"metrics mismatch: boot /metrics delta {m.total.as_row()} != "
            f"sum over probes {probe_sum.as_row()}"
        )
    if not m.speculative:
        if m.total.num_drafts or m.total.num_draft_tokens:
            raise BootFailed(f"drafts in a no-speculation boot: {m.total.as_row()}")
        return None
    if m.total.num_drafts == 0:
        return f"{NO_DRAFTS}: speculative decoding off? (none of {len(m.records)} requests drafted)"
    check_counts(m.total, "the boot")
    return None


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


@dataclass(frozen=True)
class _Rows:
    """What every probe row of one boot shares."""

    experiment: str
    attempt: Attempt
    source: AcceptanceSource
    k: int
    speculative: bool
    per_pass: int = 0  # probes in one pass over the set; 0: a single pass (no pass_index)

    def response_counts(self, probe: Probe, resp: ProbeResponse) -> SpecCounts | None:
        """Counts from the response (source per_request), zero for a no-speculation boot,
        else None (they come from the /metrics delta)."""
        if not self.speculative:
            return SpecCounts.zero(0)
        if self.source != "per_request":
            return None
        if resp.spec_decoding is None:
            raise BootFailed(
                f"probe {probe.set_name}/{probe.id}: response has no metrics.speculative_decoding"
            )
        return counts_from_response(resp.spec_decoding, self.k)

    def record(
        self, probe: Probe, seq: int, resp: ProbeResponse, counts: SpecCounts
    ) -> ProbeRecord:
        check_counts(counts, f"probe {probe.set_name}/{probe.id}")
        hist = drafted = None
        steps: tuple[tuple[int, ...] | None, tuple[int, ...] | None] = (None, None)
        if self.speculative and self.source == "per_request" and resp.spec_decoding:
            hist = tuple(int(x) for x in resp.spec_decoding["acceptance_histogram"])
            drafted = drafted_per_position(resp.spec_decoding, self.k)
            steps = ordered_steps(resp.spec_decoding)
        a = self.attempt
        return ProbeRecord(
            experiment=self.experiment,
            arm=a.arm,
            boot=a.boot,
            boot_id=a.boot_id,
            probe_set=probe.set_name,
            probe_id=probe.id,
            **counts.as_row(),
            prompt_tokens=resp.prompt_tokens,
            completion_tokens=resp.completion_tokens,
            output_sha256=resp.output_sha256,
            source=self.source,
            latency_s=resp.latency_s,
            category=probe.category,
            ttft_s=resp.ttft_s,
            tpot_s=resp.tpot_s,
            queue_s=resp.queue_s,
            sequence=seq,
            pass_index=seq // self.per_pass if self.per_pass else None,
            acceptance_histogram=hist,
            drafted_per_pos=drafted,
            step_accepted=steps[0],
            step_drafted=steps[1],
            prompt_ids_sha256=(
                token_ids_sha256(resp.prompt_token_ids) if resp.prompt_token_ids else None
            ),
            output_token_ids=resp.output_token_ids,
        )


@dataclass(frozen=True)
class ProbePass:
    """How one boot probes: whose rows they are (experiment, attempt), what it sends
    (model, sampling, warmup requests, passes over the sets, concurrency) and how it counts
    (acceptance source, K, whether the arm speculates at all)."""

    experiment: str
    attempt: Attempt
    model: str
    source: AcceptanceSource
    k: int
    sampling: Sampling = field(default_factory=Sampling)
    warmup: int = 0
    passes: int = 1
    concurrency: int = 1
    speculative: bool = True


def measure(
    client: httpx.Client,
    sets: list[ProbeSet],
    how: ProbePass,
    *,
    lane_client: LaneClient | None = None,
    on_response: Callable[[], None] | None = None,
    before_probes: Callable[[], None] | None = None,
) -> Measured:
    """Warmup (discarded, one at a time), then every probe: in probe-set order at
    concurrency 1, else in `concurrency` lanes (see the module docstring), each with a client
    from `lane_client` (default: a new one to `client`'s server). `on_response` is called
    once the boot's first request (warmup, else measured) has answered. `passes` > 1 runs
    the whole probe set that many times, in order; each row records its pass.
    `before_probes` runs after the warmup, before the first measured probe (a duet's
    barrier)."""
    model, sampling, warmup, k = how.model, how.sampling, how.warmup, how.k
    passes, concurrency, speculative = how.passes, how.concurrency, how.speculative
    one_pass: list[Probe] = [p for s in sets for p in s.probes]
    for i in range(warmup):
        run_probe(client, one_pass[i % len(one_pass)], model, sampling)
        if i == 0 and on_response is not None:
            on_response()
    if before_probes is not None:
        before_probes()
    probes = one_pass * passes
    rows = _Rows(
        how.experiment, how.attempt, how.source, k, speculative, len(one_pass) if passes > 1 else 0
    )
    if concurrency > 1:
        if warmup == 0 and on_response is not None:
            on_response()  # lanes cannot tell which request came first: count it as probes
        base = client.base_url
        headers = client.headers  # the API key, when the server requires one
        new = lane_client or (
            lambda: httpx.Client(base_url=base, timeout=60, trust_env=False, headers=headers)
        )
        return _concurrent(client, new, probes, rows, model, sampling, concurrency)
    t0 = time.perf_counter()
    start = prev = scrape(client, k)
    records: list[ProbeRecord] = []
    counts_seen: list[SpecCounts] = []
    deltas: list[SpecCounts] = []
    for seq, probe in enumerate(probes):
        resp = run_probe(client, probe, model, sampling)
        if seq == 0 and warmup == 0 and on_response is not None:
            on_response()
        counts = rows.response_counts(probe, resp)
        prev, delta = _settled_delta(client, prev, k, counts)
        if counts is not None and counts != delta:
            raise BootFailed(
                f"metrics mismatch at probe {probe.set_name}/{probe.id}: per-request "
                f"{counts.as_row()} vs /metrics delta {delta.as_row()}"
            )
        counts = delta if counts is None else counts
        records.append(rows.record(probe, seq, resp, counts))
        deltas.append(delta)
        counts_seen.append(counts)
    total = prev.minus(start)
    return Measured(
        records, counts_seen, deltas, total, time.perf_counter() - t0, speculative=speculative
    )


def _concurrent(
    client: httpx.Client,
    new_client: LaneClient,
    probes: list[Probe],
    rows: _Rows,
    model: str,
    sampling: Sampling,
    concurrency: int,
) -> Measured:
    """Every probe in `concurrency` lanes; counts from the responses, one /metrics delta."""
    t0 = time.perf_counter()
    start = scrape(client, rows.k)
    responses = run_lanes(new_client, probes, model, sampling, concurrency)
    records: list[ProbeRecord] = []
    counts_seen: list[SpecCounts] = []
    for seq, (probe, resp) in enumerate(zip(probes, responses, strict=True)):
        counts = rows.response_counts(probe, resp)
        if counts is None:  # measurement() refuses this combination before any boot
            raise BootFailed(f"concurrency {concurrency} needs per-request acceptance counts")
        records.append(rows.record(probe, seq, resp, counts))
        counts_seen.append(counts)
    expect = sum(counts_seen, SpecCounts.zero(rows.k))
    _, total = _settled_delta(client, start, rows.k, expect)
    elapsed = time.perf_counter() - t0
    return Measured(records, counts_seen, [], total, elapsed, speculative=rows.speculative)
