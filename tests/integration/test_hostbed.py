"""Ray across three real hosts of the namespace test bed (cluster/testbed.py: each host its
own address, hostname, process table, /tmp and /dev/shm), in the order a cluster's life goes:

1. `cluster/ray-job-submit.sh` as users get it, against the head's dashboard: the job runs
   run-ab on the cluster, --results-dir holds the results, `ray job logs` shows the run and
   its statement of whether arms stayed balanced across the hosts.
2. GPU accounting on hosts that declare two GPUs each to Ray (`ray start --num-gpus 2`;
   no GPU exists, the servers only see the ids): concurrent boots on a host never share an
   id, a TP = 2 boot gets two, and the recorded `gpu` column is what the server saw.
   A two-host gang whose head loses its port: the whole gang, remote member included,
   starts again on a new rendezvous port.
3. An image missing on one host (podman, each host its own store): attempts placed there
   fail naming the image and the host, and no arm mixes definitions.
4. Hosts that fail mid-boot: host 2 killed (its holder: the kernel ends its whole PID
   namespace), then host 3 cut off the network (its end of the bridge down). Each time the
   attempt fails naming the host, nothing more is placed there, the boot is retried on a
   live host, the run finishes with every boot once, and nothing is left running anywhere.

Ray's health checks are shortened on the bed (FAST_DETECT, Ray's defaults in the comment)
so a dead host is noticed in seconds; the measured detection times are printed. Fake servers
(tests/fakes): the real-vLLM gang across two hosts is test_gang_hosts_real.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hostusr_image import (
    PODMAN_ENV,
    host_podman_store,
    podman_problem,
    run_options,
    write_rootfs_tar,
)
from polling import wait_until
from testbed_helpers import RAY, ROOT, Bed, namespace_hosts

from bench.experiment import content_digest
from bench.stats.compare import balanced
from bench.store import load_results

pytestmark = [pytest.mark.testbed, pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(600)]

# Ray's defaults (ray_config_def.h): first check after 5 s, every 3 s, 10 s timeout, dead
# after 5 failures; a raylet that cannot reach the GCS exits after 60 s.
FAST_DETECT = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "2000",
    "RAY_health_check_failure_threshold": "5",
    "RAY_gcs_rpc_server_reconnect_timeout_s": "10",
}
# SPECAB_BED_RAY_DEFAULTS=1 measures with Ray's defaults instead (docs/cluster.md quotes both).
if os.environ.get("SPECAB_BED_RAY_DEFAULTS") == "1":
    FAST_DETECT = {}
DETECT_BOUND_S = 60.0 if FAST_DETECT else 180.0  # fault -> the failed attempt's row
CLEAN_BOUND_S = 60.0 if FAST_DETECT else 180.0  # fault -> nothing of it left on the host
SERVER = "vllm.entrypoints.openai.api_server"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Bed, str, Path]]:
    """Three hosts, a Ray head with its dashboard on h1 and workers on h2 and h3, each
    declaring two (fake) GPUs. The shared directory is outside /tmp: every host has its own
    /tmp."""
    shared = Path(tempfile.mkdtemp(prefix="specab-hostbed-", dir="/var/tmp"))
    state = tmp_path_factory.mktemp("hostbed") / "bed.json"
    try:
        with namespace_hosts(3, state) as bed:
            # Ray told not to set CUDA_VISIBLE_DEVICES (as some sites do): what a server
            # sees is then specab's doing alone
            env = {**FAST_DETECT, "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}
            env |= PODMAN_ENV  # each host's own podman store (test 3), in its private /tmp
            # a compile cache announced but not made on the host (torch sets the variable
            # when it first compiles): a container boot must still mount it (test 3)
            env |= {"TORCHINDUCTOR_CACHE_DIR": "/tmp/specab-bed-inductor"}
            address = bed.ray_cluster(cpus=1, gpus=2, dashboard=True, env=env)
            yield bed, address, shared
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _servers(bed: Bed, host: str) -> list[str]:
    """The (fake or real) vLLM servers running on `host`."""
    return bed.processes(host, SERVER)


def _failed_on(root: Path, host: str) -> bool:
    boots = load_results(root).boots if (root / "boots").is_dir() else None
    return boots is not None and bool(((boots["host"] == host) & (boots["status"] != "ok")).any())


# ------------------------------------------------------------------ 0. a node's address
LOOPBACK_NAME = (
    'printf "127.0.1.1 $(hostname)\n127.0.0.1 localhost\n" > /tmp/hosts-loopback && '
    "mount --bind /tmp/hosts-loopback /etc/hosts && "
)


def test_a_node_named_on_loopback_still_gets_its_routable_address(cluster) -> None:
    """/etc/hosts mapping the hostname to 127.0.1.1 (Ubuntu, DGX OS): `hostname --ip-address`
    is loopback there, so cluster/specab.sbatch's address script takes the node's global
    address (alone, the head's) or its source address toward the head (a worker), and a node
    with nothing routable stops in one line, exit 2 (a private mount namespace: the host's
    own /etc/hosts is left as it is)."""
    bed, _, _ = cluster
    script = str(ROOT / "cluster" / "node-address.sh")
    h1, h2 = bed.hosts[:2]
    named = bed.run(h2, ["unshare", "-m", "sh", "-c", LOOPBACK_NAME + "hostname --ip-address"])
    assert named.stdout.split()[0].startswith("127."), named  # the trap is set
    for head in ("", bed.addr(h1)):
        out = bed.run(h2, ["unshare", "-m", "sh", "-c", f"{LOOPBACK_NAME}{script} {head}"])
        assert out.returncode == 0 and out.stdout.strip() == bed.addr(h2), (head, out)
    alone = bed.run(h2, ["unshare", "-m", "-n", "sh", "-c", LOOPBACK_NAME + script])
    assert alone.returncode == 2 and len(alone.stderr.strip().splitlines()) == 1, alone
    assert "no routable address" in alone.stderr and "SPECAB_NODE_IFACE" in alone.stderr


# ------------------------------------------------------------------ 1. ray job submit
def test_ray_job_submit_runs_the_experiment_and_ray_job_logs_shows_it(
    cluster: tuple[Bed, str, Path], fake_experiment: Callable[..., Path]
) -> None:
    bed, _, shared = cluster
    env = {"SPECAB_FAKE_PROBE_S": "0.2", "SPECAB_FAKE_ECHO_ENV": "CUDA_VISIBLE_DEVICES"}
    spec = fake_experiment(shared / "job", {"base": env, "same": env}, name="job", boots_per_arm=3)
    root = shared / "job" / "results"
    dashboard = f"http://{bed.addr('h1')}:8265"
    run_env = {
        **os.environ,
        "PATH": f"{Path(RAY).parent}:{os.environ.get('PATH', '')}",
        "RAY_DASHBOARD": dashboard,
        "RAY_AUTH_MODE": "disabled",
        "SPECAB_JOB_PYTHON": sys.executable,
        "SPECAB_JOB_ID": f"specab-bed-{os.getpid()}",
    }
    script = ROOT / "cluster" / "ray-job-submit.sh"
    t0 = time.monotonic()
    job = subprocess.run(
        [str(script), str(spec), "--results-dir", str(root), "--no-report"],
        env=run_env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    took = time.monotonic() - t0
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    ok = load_results(root).ok_boots()
    assert len(ok) == 6 and not ok.duplicated(["arm", "boot"]).any()
    assert sorted(set(ok["host"])) == bed.hosts  # every host ran boots
    # a boot without GPUs on a node that has some sees none, whatever Ray does
    assert all(_gpus_seen(root, b) == "" for b in ok["boot_id"]) and set(ok["gpu"]) == {""}
    # the dispatcher evens out each arm's hosts where a slot is free; the end of the run
    # says whether the shares came out equal (a host still busy takes no boot)
    by_arm = [list(ok.loc[ok["arm"] == a, "host"]) for a in ("base", "same")]
    expect = "balanced: every arm" if balanced(*by_arm) else "NOT balanced across hosts"
    logs = subprocess.run(
        [RAY, "job", "logs", "--address", dashboard, run_env["SPECAB_JOB_ID"]],
        env=run_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert logs.returncode == 0, logs.stderr
    assert "ok boots per node" in logs.stdout and "verdict" in logs.stdout
    assert expect in logs.stdout, by_arm
    status = subprocess.run(
        [RAY, "job", "status", "--address", dashboard, run_env["SPECAB_JOB_ID"]],
        env=run_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "succeeded" in (status.stdout + status.stderr).lower()
    print(f"ray job submit on the bed: submit to done {took:.1f} s")


# ------------------------------------------------------------------ 2. GPU accounting
def _gpus_seen(root: Path, boot_id: str) -> str:
    """CUDA_VISIBLE_DEVICES as the (fake) server printed it at start-up."""
    log = (root / "logs" / f"{boot_id}.log").read_text()
    line = next(x for x in log.splitlines() if "fake server env: CUDA_VISIBLE_DEVICES=" in x)
    return line.split("=", 1)[1].strip()


def test_gpus_declared_to_ray_reach_each_server_and_concurrent_boots_never_share_one(
    cluster: tuple[Bed, str, Path], fake_experiment: Callable[..., Path]
) -> None:
    bed, address, shared = cluster
    env = {"SPECAB_FAKE_PROBE_S": "0.5", "SPECAB_FAKE_ECHO_ENV": "CUDA_VISIBLE_DEVICES"}
    runs = {
        # two boots per host at once (1 CPU, 2 GPUs each), one GPU each
        "gpu1": ({"cpu": 0.5, "gpu": 1}, {}, 1),
        # tensor parallel 2 on one node: both of the host's GPUs
        "gpu2": ({"cpu": 0.5, "gpu": 2}, {"args": {"tensor-parallel-size": 2}}, 2),
    }
    for name, (resources, server, width) in runs.items():
        spec = fake_experiment(
            shared / name,
            {"a": env, "b": env},
            name=name,
            boots_per_arm=3,
            resources=resources,
            server=server,
        )
        root = shared / name / "results"
        argv = ["run-ab", str(spec), "--results-dir", str(root), "--quiet", "--no-report"]
        done = bed.run("h1", [sys.executable, "-m", "bench.cli", *argv, "--address", address], 300)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        ok = load_results(root).ok_boots()
        assert len(ok) == 6
        overlaps = 0
        for row in ok.itertuples():
            ids = row.gpu.split(",")
            assert len(ids) == width and set(ids) <= {"0", "1"}, row.gpu
            assert _gpus_seen(root, row.boot_id) == row.gpu  # the record = what it saw
            for other in ok[(ok["host"] == row.host) & (ok["boot_id"] > row.boot_id)].itertuples():
                if other.started_at < row.finished_at and row.started_at < other.finished_at:
                    overlaps += 1
                    assert not set(ids) & set(other.gpu.split(",")), (row.gpu, other.gpu)
        if width == 1:
            assert overlaps >= 1  # boots did share a host at the same time
        else:
            assert overlaps == 0  # a host's two GPUs hold one TP = 2 boot at a time


def _master_ports(log: str) -> list[str]:
    lines = [x for x in log.splitlines() if x.startswith("[specab] launching")]
    return [x.split("--master-port ")[1].split()[0] for x in lines]


def test_a_gangs_port_collision_restarts_its_remote_member_on_the_new_port(
    cluster: tuple[Bed, str, Path], fake_experiment: Callable[..., Path]
) -> None:
    """A two-host gang whose head loses a port to another process (torch's EADDRINUSE, the
    fake's first start): the whole gang starts again on a new rendezvous port, the member on
    the other host (a new actor there) joining the new one, and the boot is ok."""
    bed, address, shared = cluster
    env = {"SPECAB_FAKE_PROBE_S": "0.2", "SPECAB_FAKE_FAULT": "port_in_use"}
    env |= {"SPECAB_FAKE_FAULT_TIMES": "1"}
    spec = fake_experiment(
        shared / "ports",
        {"a": env, "b": env},
        name="ports",
        boots_per_arm=1,
        resources={"nodes": 2, "cpu": 0.5},
        server={"args": {"tensor-parallel-size": 2}, "ready_timeout_s": 60.0},
    )
    root = shared / "ports" / "results"
    argv = ["run-ab", str(spec), "--results-dir", str(root), "--quiet", "--no-report"]
    done = bed.run("h1", [sys.executable, "-m", "bench.cli", *argv, "--address", address], 300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ok = load_results(root).ok_boots()
    assert len(ok) == 2
    hit = [r for r in ok.itertuples() if "address already in use" in _log(root, r.boot_id)]
    assert len(hit) == 1, [r.boot_id for r in ok.itertuples()]
    row = hit[0]
    assert row.member_hosts[0] != row.member_hosts[1], row.member_hosts  # two hosts
    head = _master_ports(_log(root, row.boot_id))
    member = _master_ports(_log(root, f"{row.boot_id}.m1"))
    assert len(head) == 2 and head[0] != head[1], head  # a new rendezvous port
    assert member[-1] == head[-1], (member, head)  # the remote member joined the new one


def _log(root: Path, name: str) -> str:
    return (root / "logs" / f"{name}.log").read_text()


# ------------------------------------------------------------------ 3. an image not on every host
def test_an_image_missing_on_one_host_fails_its_boots_there_and_never_mixes_an_arm(
    cluster: tuple[Bed, str, Path], fake_experiment: Callable[..., Path]
) -> None:
    """Container arms (podman, each host its own store): the image is on h1 and h2, not on
    h3. An attempt placed on h3 fails naming the image and the node, h3 takes no more boots
    of that arm, and the run ends with every boot ok on h1 and h2; no ok boot guessed its
    image's vLLM (each arm has one definition and one vLLM version). Before, a failed probe
    was cached as "no vLLM" (h3's boots recorded another definition and the directory was
    refused as mixed); then, with the probe fixed, the retries kept landing on h3, the host
    free first, and boots ran out of attempts there. The hosts' Ray announces a compile
    cache that no host has made: each boot's node makes it before mounting it."""
    why = podman_problem()
    if why is not None:
        pytest.skip(why)
    bed, address, shared = cluster
    image = f"localhost/specab-bed-image:{os.getpid()}"
    tar = write_rootfs_tar(shared / "rootfs.tar")
    for h in bed.hosts:
        host_podman_store(bed.run, h, tar, image if h != "h3" else None)
    container = {
        "runtime": "podman",
        "image": image,
        "options": [*run_options(), "-v", f"{ROOT}:{ROOT}:ro", "-v", f"{shared}:{shared}"],
    }
    env = {"SPECAB_FAKE_PROBE_S": "0.3"}
    spec = fake_experiment(
        shared / "image",
        {"a": env, "b": env},
        name="image",
        boots_per_arm=3,
        server={"container": container, "python": sys.executable},
        # b: two ranks in one container, which gets the host's /dev/shm by default
        arm_extra={"b": {"args": {"tensor-parallel-size": 2}}},
    )
    root = shared / "image" / "results"
    argv = ["run-ab", str(spec), "--results-dir", str(root), "--quiet", "--no-report"]
    done = bed.run(
        "h1", [sys.executable, "-m", "bench.cli", *argv, "--address", address], 400, env=PODMAN_ENV
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    res = load_results(root)
    boots = res.boots
    on3 = boots[boots["host"] == "h3"]
    assert len(on3) >= 1, (boots[["arm", "host", "status"]], done.stdout[-2000:])
    assert (on3["status"] != "ok").all() and len(on3) <= 2  # one attempt per arm at most
    for error in on3["error"]:
        assert f"cannot read vLLM in image {image} with podman on node h3" in error, error
    ok = res.ok_boots()
    assert set(ok["host"]) <= {"h1", "h2"} and len(ok) == 6, ok["host"].tolist()
    assert ok["vllm_version"].notna().all()
    assert (ok.groupby("arm")["definition_sha256"].nunique() == 1).all()
    for row in ok.itertuples():  # podman's own default is 64 MiB, too small for NCCL
        shm = int(_log(root, row.boot_id).split("fake server /dev/shm: ")[1].split()[0])
        assert (shm > 64) == (row.arm == "b"), (row.arm, shm)
    print(
        f"image missing on h3: {len(on3)} attempt(s) there failed naming it, {len(ok)} boots"
        " ok on h1/h2"
    )
    for h in bed.hosts:
        left = bed.run(h, ["podman", "ps", "-aq"], env=PODMAN_ENV).stdout.split()
        assert left == [], (h, left)
        bed.run(h, ["podman", "rmi", "-f", image], env=PODMAN_ENV)


def _other_content(tar: Path, out: Path) -> Path:
    """The same root file system with one more file: another image id under one tag."""
    shutil.copy(tar, out)
    with tarfile.open(out, "a") as tf:
        info = tarfile.TarInfo("etc/specab-stale-build")
        tf.addfile(info)
    return out


def _inspect(bed: Bed, host: str, image: str, fmt: str) -> str:
    argv = ["podman", "image", "inspect", "--format", fmt, image]
    return str(bed.run(host, argv, env=PODMAN_ENV).stdout.strip())


def _content(bed: Bed, image: str) -> str:
    """The image's content on h1 (the driver's), from podman's own listing of it."""
    fmt = "{{json .RootFS.Layers}}\t{{json .Config}}"
    layers, config = _inspect(bed, "h1", image, fmt).split("\t")
    return content_digest(json.loads(layers), json.loads(config))


def test_a_gangs_member_without_the_image_or_with_a_stale_one_is_refused_and_avoided(
    cluster: tuple[Bed, str, Path], fake_experiment: Callable[..., Path]
) -> None:
    """Two-host gangs of container arms (podman, each host its own store): arm `stale`'s image
    is on h1 and h2 (h2's from a copy of the tar: another local id, the same content), and
    on h3 under the same tag with other content; arm `gone`'s is not on h3 at all. Every node
    of a gang is checked like the head, against the content the driver read the definition
    from (h1's): an attempt that puts h3 in a gang fails naming h3, h3 takes no more boots of
    that arm, and every ok boot ran h1's image on h1 and h2 (its image_id recorded). Before,
    only the head's node was probed: a member on h3 pulled or served another build while the
    row recorded the head's."""
    why = podman_problem()
    if why is not None:
        pytest.skip(why)
    bed, address, shared = cluster
    stale, gone = (f"localhost/specab-gang-{n}:{os.getpid()}" for n in ("stale", "gone"))
    tar = write_rootfs_tar(shared / "gang-rootfs.tar")
    other = _other_content(tar, shared / "gang-other.tar")
    # h2 imports a copy of the tar made an hour later: the same content under another local
    # id (podman dates an import by its tar), as when each node gets its own copy
    copy = shutil.copy(tar, shared / "gang-rootfs-copy.tar")
    os.utime(copy, (time.time() - 3600, time.time() - 3600))
    tars = {"h1": tar, "h2": Path(copy), "h3": other}
    for h in bed.hosts:
        host_podman_store(bed.run, h, tars[h], stale)
        if h != "h3":
            host_podman_store(bed.run, h, tars[h], gone)
    options = [*run_options(), "-v", f"{ROOT}:{ROOT}:ro", "-v", f"{shared}:{shared}"]
    env = {"SPECAB_FAKE_PROBE_S": "0.2"}
    spec = fake_experiment(
        shared / "gang-image",
        {"stale": env, "gone": env},
        name="gang-image",
        boots_per_arm=2,
        resources={"nodes": 2, "cpu": 0.5},
        server={"args": {"tensor-parallel-size": 2}, "ready_timeout_s": 60.0,
                "python": sys.executable},
        arm_extra={
            arm: {"container": {"runtime": "podman", "image": image, "options": options}}
            for arm, image in (("stale", stale), ("gone", gone))
        },
    )  # fmt: skip
    root = shared / "gang-image" / "results"
    argv = ["run-ab", str(spec), "--results-dir", str(root), "--quiet", "--no-report"]
    argv += ["--address", address]
    done = bed.run("h1", [sys.executable, "-m", "bench.cli", *argv], 400, env=PODMAN_ENV)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    res = load_results(root)
    boots = res.boots
    with_h3 = boots[[("h3" in list(m)) for m in boots["member_hosts"]]]
    assert len(with_h3) >= 1, boots[["arm", "member_hosts", "status"]]  # h3 was tried
    for row in with_h3.itertuples():
        assert row.status != "ok", row
        said = "another image under" if row.arm == "stale" else "cannot read vLLM in image"
        assert said in row.error and "on node h3" in row.error, row.error
    ok = res.ok_boots()
    assert len(ok) == 4 and all(set(m) <= {"h1", "h2"} for m in ok["member_hosts"])
    local = {h: _inspect(bed, h, stale, "{{.Id}}") for h in ("h1", "h2")}
    assert local["h1"] != local["h2"]  # the trap was set: ids differ, content does not
    driver = {image: _content(bed, image) for image in (stale, gone)}
    for row in ok.itertuples():
        assert row.image_id == driver[stale if row.arm == "stale" else gone], row
    for h in bed.hosts:
        left = bed.run(h, ["podman", "ps", "-aq"], env=PODMAN_ENV).stdout.split()
        assert left == [], (h, left)
        bed.run(h, ["podman", "rmi", "-f", stale, gone], env=PODMAN_ENV)


# ------------------------------------------------------------------ 4. hosts that fail
def test_a_host_killed_and_a_host_cut_off_mid_boot_are_retried_elsewhere(
    cluster: tuple[Bed, str, Path], fake_experiment: Callable[..., Path]
) -> None:
    """Last in this module: it takes hosts 2 and 3 out of the cluster for good."""
    bed, address, shared = cluster
    env = {"SPECAB_FAKE_PROBE_S": "1.0"}
    spec = fake_experiment(
        shared / "faults",
        {"base": env, "same": env},
        name="faults",
        boots_per_arm=3,
        experiment={"max_attempts": 3},
    )
    root = shared / "faults" / "results"
    out = shared / "faults" / "driver.out"
    argv = ["run-ab", str(spec), "--results-dir", str(root), "--quiet", "--no-report"]
    with out.open("w") as fh:
        driver = bed.popen(
            "h1",
            [sys.executable, "-m", "bench.cli", *argv, "--address", address],
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    text = lambda: out.read_text()  # noqa: E731
    try:
        wait_until(lambda: _servers(bed, "h2"), 120, text)
        time.sleep(1.0)  # inside a probe
        os.kill(int(bed.info["hosts"]["h2"]["pid"]), signal.SIGKILL)
        t_kill = time.monotonic()
        # h3 is cut while the run still has boots to give it: waiting for h2's failed row
        # first let a loaded machine finish every boot before h3 got another one (CI)
        wait_until(lambda: _servers(bed, "h3"), 120, text)
        time.sleep(1.0)
        subprocess.run(["ip", "link", "set", str(bed.info["hosts"]["h3"]["veth"]), "down"],
                       check=True)  # fmt: skip
        t_cut = time.monotonic()
        wait_until(lambda: _failed_on(root, "h2"), DETECT_BOUND_S - (t_cut - t_kill), text)
        killed = time.monotonic() - t_kill
        wait_until(
            lambda: _failed_on(root, "h3"), DETECT_BOUND_S - (time.monotonic() - t_cut), text
        )
        cut = time.monotonic() - t_cut
        gone = wait_until(lambda: not _servers(bed, "h3"), CLEAN_BOUND_S, text) + cut
        rc = driver.wait(timeout=300)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    log = text()
    assert rc == 0, log[-4000:]
    res = load_results(root)
    ok, failed = res.ok_boots(), res.boots[res.boots["status"] != "ok"]
    assert len(ok) == 6 and not ok.duplicated(["arm", "boot"]).any()  # none lost, none twice
    assert not res.boots.duplicated(["arm", "boot", "attempt"]).any()
    for host in ("h2", "h3"):
        rows = failed[failed["host"] == host]
        assert len(rows) >= 1 and rows["error"].str.contains(host).all(), rows["error"].tolist()
        for arm, b in zip(rows["arm"], rows["boot"], strict=True):  # retried on a live host
            again = ok[(ok["arm"] == arm) & (ok["boot"] == b)]
            assert len(again) == 1 and again["host"].iloc[0] != host
        assert f"node {host} left the cluster" in log
    by_arm = [list(ok.loc[ok["arm"] == a, "host"]) for a in ("base", "same")]
    if len(set(ok["host"])) > 1:  # the end of the run says whether the shares stayed equal
        even = balanced(*by_arm)
        assert ("balanced: every arm" if even else "NOT balanced across hosts") in log, by_arm
    late = ok[ok["started_at"] > failed["started_at"].max()]
    assert set(late["host"]) == {"h1"}  # after both faults only the head's host takes boots
    assert _servers(bed, "h1") == [] and _servers(bed, "h3") == []  # nothing left anywhere
    print(
        f"host killed: failed attempt recorded after {killed:.1f} s; host cut off: after "
        f"{cut:.1f} s, its server gone after {gone:.1f} s (Ray: {FAST_DETECT or 'defaults'})"
    )
