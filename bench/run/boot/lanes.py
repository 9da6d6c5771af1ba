"""Concurrent probes: c lanes (threads), each with its own HTTP client, each sending its
probes one after another. The assignment is fixed before the first request: probe i (in
probe-set order, its `sequence`) goes to lane i mod c as that lane's (i div c)-th request,
so every boot of an arm runs the same lanes in the same order.

The first lane to fail stops the others before their next request and its error is raised
at once (the boot then stops the server, which ends requests still in flight); a bug in a
lane propagates with its traceback like anywhere else in the boot.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait

import httpx

from bench.experiment import Probe
from bench.run.boot.requests import ProbeResponse, Sampling, run_probe


def lane_of(sequence: int, concurrency: int) -> int:
    """The lane that sends probe number `sequence`."""
    return sequence % concurrency


LaneClient = Callable[[], httpx.Client]  # a new client per lane (tests pass MockTransports)


def _lane(
    new_client: LaneClient,
    probes: list[tuple[int, Probe]],
    model: str,
    sampling: Sampling,
    stop: threading.Event,
) -> list[tuple[int, ProbeResponse]]:
    out: list[tuple[int, ProbeResponse]] = []
    with new_client() as client:
        for seq, probe in probes:
            if stop.is_set():
                break
            out.append((seq, run_probe(client, probe, model, sampling)))
    return out


def run_lanes(
    new_client: LaneClient,
    probes: list[Probe],
    model: str,
    sampling: Sampling,
    concurrency: int,
) -> list[ProbeResponse]:
    """Every probe's response, in `probes` order, sent by `concurrency` lanes, each with its
    own client from `new_client`."""
    plan: list[list[tuple[int, Probe]]] = [[] for _ in range(min(concurrency, len(probes)))]
    for seq, probe in enumerate(probes):
        plan[lane_of(seq, concurrency)].append((seq, probe))
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=len(plan), thread_name_prefix="specab-lane")
    futures: list[Future[list[tuple[int, ProbeResponse]]]] = []
    try:
        futures = [pool.submit(_lane, new_client, lane, model, sampling, stop) for lane in plan]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for f in futures:  # the first failure in lane order among those that finished
            if f in done and f.exception() is not None:
                stop.set()
                f.result()  # raises it
        by_seq = dict(pair for f in futures for pair in f.result())
    finally:
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)
    return [by_seq[i] for i in range(len(probes))]
