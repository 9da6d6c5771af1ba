"""One boot end to end, on the node that runs it (`one_boot.run_boot`): node preparation
(`node_prep`: pre_boot, memory wait), the server (`bench.run.process`), warmup and the probe
loop (`probe_loop`, in lanes at concurrency > 1: `lanes`), one request per probe
(`requests`), the speculative-decoding counters from /metrics and from responses,
cross-checked (`counters`), a duet's barrier before the probes (`start_gate`), and one boot
outside Ray under a watchdog (`guarded`). Runtime failures become a failed `BootRecord`,
never an exception."""

from bench.run.boot.commit_builds import built_for_preflight
from bench.run.boot.counters import (
    SpecCounts,
    check_counts,
    counts_from_response,
    drafted_per_position,
    parse_metrics_text,
    positions_in_metrics,
)
from bench.run.boot.failure_reason import one_line
from bench.run.boot.guarded import boot_here, guarded_boot
from bench.run.boot.lanes import lane_of
from bench.run.boot.node_prep import IMAGE_UNREAD, image_problem, prepare_node
from bench.run.boot.one_boot import (
    BootOutcome,
    BootRequest,
    failed_record,
    run_boot,
)
from bench.run.boot.probe_loop import NO_DRAFTS, Measured, ProbePass, check_boot_total, measure
from bench.run.boot.requests import API_KEY_REFUSED, Sampling, request_body, run_probe
from bench.run.boot.start_gate import GateTicket, StartGates, start_gates

__all__ = [
    "API_KEY_REFUSED",
    "IMAGE_UNREAD",
    "NO_DRAFTS",
    "BootOutcome",
    "BootRequest",
    "GateTicket",
    "Measured",
    "ProbePass",
    "Sampling",
    "SpecCounts",
    "StartGates",
    "boot_here",
    "built_for_preflight",
    "check_boot_total",
    "check_counts",
    "counts_from_response",
    "drafted_per_position",
    "failed_record",
    "guarded_boot",
    "image_problem",
    "lane_of",
    "measure",
    "one_line",
    "parse_metrics_text",
    "positions_in_metrics",
    "prepare_node",
    "request_body",
    "run_boot",
    "run_probe",
    "start_gates",
]  # fmt: skip
