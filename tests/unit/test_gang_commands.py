"""Gang boots and containers on paper: every member's command (head, headless workers, the
container wrap), what validate and materialize print, the bad gang settings, and the
dispatcher's choice of N distinct nodes. No process is started here."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from bench.cli import run
from bench.errors import SpecabError
from bench.experiment import (
    container_name,
    launch_plan,
    load_spec,
    member_command,
    resolve_arm,
)
from bench.experiment.launch import ContainerRef, mount_paths
from bench.run.driver import plan_order
from bench.run.placement import NodeSlots, boot_capacity

BASE = """
[experiment]
name = "g"
boots_per_arm = 2

[server]
model = "models/target"
speculative_config = { method = "draft_model", model = "models/draft", num_speculative_tokens = 3 }
args = { tensor-parallel-size = 2, max-model-len = 512 }
env = { HF_TOKEN = "hf_secret", VLLM_CPU_KVCACHE_SPACE = "1" }
{server_extra}

[probes]
sets = ["probes.jsonl"]

[resources]
nodes = 2
gpu = 1

[[arms]]
name = "base"
{arm_extra}
"""


def write(tmp_path: Path, server_extra: str = "", arm_extra: str = "") -> Path:
    for m in ("target", "draft"):
        d = tmp_path / "models" / m
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    (tmp_path / "probes.jsonl").write_text('{"id": "a", "prompt": "x"}\n')
    f = tmp_path / "exp.toml"
    f.write_text(BASE.replace("{server_extra}", server_extra).replace("{arm_extra}", arm_extra))
    return f


NODE_PREP = 'pre_boot = ["sync; echo 3 > /proc/sys/vm/drop_caches"]\nmin_free_memory_gb = 100.0'


def primed_experiments(root: Path) -> list[Path]:
    """The command lines vLLM's parser answers here, parsed before the first test
    (tests/conftest.py primes them all in one vLLM import)."""
    return [write(root, server_extra=NODE_PREP)]


def plan_of(f: Path, workdir: Path, environ: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    spec = load_spec(f)
    arm = resolve_arm(spec, f, "base")
    env = {"PATH": "/usr/bin", "HOME": "/home/u", "HF_TOKEN": "hf_secret"} | (environ or {})
    return launch_plan(arm, workdir, engine_seed=7, environ=env)


def test_head_and_worker_commands_share_every_server_argument(tmp_path: Path) -> None:
    plan = plan_of(write(tmp_path), tmp_path / "work")
    head = member_command(plan, 0, master_addr="10.0.0.1", master_port=29500, node_ip="10.0.0.1")
    worker = member_command(plan, 1, master_addr="10.0.0.1", master_port=29500, node_ip="10.0.0.2")
    assert head.argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    runner = Path(worker.argv[1])
    assert runner.name == "specab_member.py" and runner.is_file()  # materialized on the node
    assert (
        runner.read_text()
        == (Path(__file__).parents[2] / "bench/experiment/runtime/specab_member.py").read_text()
    )
    gang = ["--distributed-executor-backend", "mp", "--nnodes", "2"]
    master = ["--master-addr", "10.0.0.1", "--master-port", "29500"]
    assert head.argv[3:] == [*plan.server_args, *gang, "--node-rank", "0", *master]
    assert worker.argv[2:] == [*plan.server_args, *gang, "--node-rank", "1", *master, "--headless"]
    assert "--seed" in plan.server_args and "--host" not in worker.argv
    assert (head.env["VLLM_HOST_IP"], worker.env["VLLM_HOST_IP"]) == ("10.0.0.1", "10.0.0.2")
    assert head.container is None and worker.container is None


def test_single_node_command_is_the_plan_unchanged(tmp_path: Path) -> None:
    f = write(tmp_path)
    f.write_text(f.read_text().replace("nodes = 2", "nodes = 1"))
    plan = plan_of(f, tmp_path / "work")
    m = member_command(plan, 0)
    assert (m.argv, m.env) == (plan.argv, plan.env)
    assert plan.runner is None and "VLLM_HOST_IP" not in m.env


CONTAINER = (
    'container = { runtime = "podman", image = "nvcr.io/nvidia/vllm:26.01-py3", '
    'options = ["--gpus", "all", "--ipc", "host"] }'
)


def test_container_command_mounts_paths_and_passes_env_explicitly(tmp_path: Path) -> None:
    plan = plan_of(write(tmp_path, server_extra=CONTAINER), tmp_path / "work")
    name = container_name("g", "base__b000__a1", 1, "abc123")
    m = member_command(
        plan,
        1,
        master_addr="10.0.0.1",
        master_port=29500,
        node_ip="10.0.0.2",
        container_name=name,
        labels={"specab.boot": "base__b000__a1", "specab.member": "1"},
        cwd=str(tmp_path / "work" / "cwd" / "x"),
    )
    argv = m.argv
    head = [
        "podman",
        "run",
        "--pull",
        "never",
        "--rm",
        "--name",
        "specab-g-base__b000__a1-m1-abc123",
    ]
    assert argv[:7] == head  # never an implicit pull: a node without the image fails at once
    assert argv[7:12] == ["--network", "host", "--init", "-w", str(tmp_path / "work/cwd/x")]
    image = argv.index("nvcr.io/nvidia/vllm:26.01-py3")
    assert argv[image - 4 : image] == ["--gpus", "all", "--ipc", "host"]  # options last
    inner = argv[image + 1 :]
    assert inner[0] == "python3"  # the image's interpreter (no python given)
    assert inner[1].endswith("specab_member.py") and inner[-1] == "--headless"
    pairs = [argv[i + 1] for i in range(image) if argv[i] == "-e"]
    assert "VLLM_HOST_IP=10.0.0.2" in pairs and "VLLM_CPU_KVCACHE_SPACE=1" in pairs
    assert "HF_TOKEN" in pairs and not any("hf_secret" in a for a in argv)  # value by name
    assert not any(p.startswith(("PATH=", "HOME=")) for p in pairs)  # host-only names stay out
    assert m.env["HF_TOKEN"] == "hf_secret"  # ...from the CLI's own environment
    mounts = [argv[i + 1] for i in range(image) if argv[i] == "-v"]
    for m_dir in (tmp_path / "models" / "target", tmp_path / "models" / "draft"):
        assert f"{m_dir}:{m_dir}:ro" in mounts  # the models, read-only
    assert f"{tmp_path / 'work'}:{tmp_path / 'work'}" in mounts
    labels = [argv[i + 1] for i in range(image) if argv[i] == "--label"]
    assert labels == ["specab.boot=base__b000__a1", "specab.member=1"]
    assert m.container == ContainerRef("podman", "specab-g-base__b000__a1-m1-abc123")


def test_container_stop_and_check_commands_go_by_name() -> None:
    ref = ContainerRef("docker", "specab-x")
    assert ref.stop_commands(10.4) == [
        ["docker", "stop", "-t", "10", "specab-x"],
        ["docker", "rm", "-f", "specab-x"],
    ]
    assert ref.exists_command()[:5] == ["docker", "ps", "-a", "--filter", "name=^specab-x$"]


def test_mount_paths_once_and_not_nested(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "f.txt").write_text("x")
    got = mount_paths([tmp_path / "a" / "b", tmp_path / "a", tmp_path / "f.txt", "rel/x"], {})
    assert got == [str(tmp_path)]  # the file's directory contains the others
    cache = {"TRITON_CACHE_DIR": "/opt/cache/triton"}
    assert mount_paths(["$WORKDIR"], cache) == ["$WORKDIR", "/opt/cache/triton"]


@pytest.mark.parametrize(
    ("args", "field", "problem"),
    [
        ("{ tensor-parallel-size = 3 }", "tensor-parallel-size", "must divide"),
        ("{ tensor-parallel-size = 2, nnodes = 2 }", "args", "'nnodes' is set by specab"),
        (
            '{ tensor-parallel-size = 2, distributed-executor-backend = "ray" }',
            "distributed-executor-backend",
            "mp backend",
        ),
    ],
)
def test_bad_gang_settings_are_user_errors(
    tmp_path: Path, args: str, field: str, problem: str
) -> None:
    f = write(tmp_path)
    f.write_text(
        f.read_text().replace(
            "args = { tensor-parallel-size = 2, max-model-len = 512 }", f"args = {args}"
        )
    )
    with pytest.raises(SpecabError) as info:
        plan_of(f, tmp_path / "work")
    assert problem in info.value.problem and field in (info.value.field or "")


def test_validate_prints_head_and_worker_and_node_preparation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write(tmp_path, server_extra=NODE_PREP)
    assert run(["validate", str(f)]) == 0
    out = capsys.readouterr().out
    assert "gang boots: 2 nodes per boot" in out
    assert "before every boot, on each node: sync; echo 3 > /proc/sys/vm/drop_caches" in out
    assert "MemAvailable >= 100 GiB" in out
    head = next(x for x in out.splitlines() if "head (node-rank 0, API server) command:" in x)
    worker = next(x for x in out.splitlines() if "worker (node-rank 1) command:" in x)
    assert '--master-addr "$HEAD_IP" --master-port "$MASTER_PORT"' in head
    assert head.endswith('--host 127.0.0.1 --port "$PORT"')
    assert "specab_member.py" in worker and worker.endswith("--headless")
    assert "$WORKDIR/runtime/" in worker


def test_validate_prints_the_full_container_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write(tmp_path, arm_extra=CONTAINER)  # per arm
    assert run(["validate", str(f)]) == 0
    out = capsys.readouterr().out
    head = next(x for x in out.splitlines() if "head (node-rank 0, API server) command:" in x)
    words = shlex.split(head.split("command: ", 1)[1])
    assert words[:7] == [
        "podman",
        "run",
        "--pull",
        "never",
        "--rm",
        "--name",
        "specab-g-$BOOT_ID-m0",
    ]
    assert "nvcr.io/nvidia/vllm:26.01-py3" in words and "-e" in words
    assert words[words.index("nvcr.io/nvidia/vllm:26.01-py3") + 1] == "python3"


def test_materialize_writes_one_script_per_member(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write(tmp_path)
    out = tmp_path / "out"
    assert run(["materialize", str(f), "--arm", "base", "--out", str(out)]) == 0
    head = (out / "command.sh").read_text()
    worker = (out / "command-m1.sh").read_text()
    assert "--node-rank 0" in head and '"${MASTER_PORT:?set MASTER_PORT}"' in head
    assert '"${PORT:-8000}"' in head
    assert "--headless" in worker and '"VLLM_HOST_IP=${NODE_IP:?set NODE_IP}"' in worker
    members = json.loads((out / "plan.json").read_text())["members"]
    assert [m["rank"] for m in members] == [0, 1]
    # the script refuses to run without the gang's addresses
    env = {"PATH": "/usr/bin:/bin", "HF_TOKEN": "t"}
    proc = subprocess.run(
        ["sh", str(out / "command-m1.sh")], capture_output=True, text=True, env=env
    )
    assert proc.returncode != 0 and "set NODE_IP" in proc.stderr, proc.stderr


def test_nodes_is_validated_and_documented() -> None:
    from bench.experiment import ResourcesSection

    assert ResourcesSection().nodes == 1
    with pytest.raises(ValueError):
        ResourcesSection(nodes=0)
    text = textwrap.dedent(str(ResourcesSection.model_fields["nodes"].description))
    assert "STRICT_SPREAD" in text and "per node" in text


def test_boot_capacity_counts_gangs_of_distinct_nodes() -> None:
    assert boot_capacity([1, 1], 2) == 1
    assert boot_capacity([2, 2], 2) == 2
    assert boot_capacity([3, 1], 2) == 1  # the second node serves one gang only
    assert boot_capacity([3, 1, 1], 2) == 2
    assert boot_capacity([1, 1, 1], 1) == 3 and boot_capacity([1], 2) == 0


def test_dispatcher_places_a_gang_on_distinct_nodes_rotating_the_head() -> None:
    from bench.run.driver import Dispatcher

    nodes = [NodeSlots("n1", "a", 1), NodeSlots("n2", "b", 1), NodeSlots("n3", "c", 1)]
    d = Dispatcher(nodes, 1, {}, lambda a: None, gang=2)  # type: ignore[arg-type,return-value]
    todo = plan_order(["x"], 3, seed=0)
    heads, sets = [], []
    for _ in range(3):
        place = d.reserve(todo)
        assert place is not None and len(place.members) == 2
        ids = [n.node_id for n, _ in place.members]
        assert len(set(ids)) == 2 and ids[0] == place.node.node_id
        heads.append(ids[0])
        sets.append(frozenset(ids))
        # what launch() counts, without Ray
        d._per_node_arm[(ids[0], "x")] += 1
        for n in ids:
            d._member_arm[(n, "x")] += 1
            d._per_node_total[n] += 1
        for n, slot in place.members:
            d._free[n.node_id].add(slot)
    assert sorted(heads) == ["n1", "n2", "n3"]  # the head rotates over the nodes
    assert len(set(sets)) == 3  # and so do the node pairs
    busy = Dispatcher(nodes[:1], 1, {}, lambda a: None, gang=2)  # type: ignore[arg-type,return-value]
    assert busy.reserve(plan_order(["x"], 1, seed=0)) is None  # one node cannot host a gang


def test_run_ab_refuses_a_bad_gang_before_ray_and_the_results_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write(tmp_path)
    f.write_text(f.read_text().replace("tensor-parallel-size = 2", "tensor-parallel-size = 3"))
    root = tmp_path / "results"
    assert run(["run-ab", str(f), "--results-dir", str(root), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "resources] nodes = 2 must divide" in err
    assert "Fix: set tensor-parallel-size = 2" in err
    assert not root.exists()


def test_a_node_that_left_takes_no_more_boots_and_a_failure_does_not_count_towards_balance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a boot on node b fails and Ray lists b dead: b's slots are gone for good (a
    retry pinned there would fail again), the failed attempt no longer counts as x's boot
    on b, and once too few nodes are left for a boot, the dispatcher says so."""
    from datetime import UTC, datetime

    import ray

    from bench.run.driver import Dispatcher, InFlight

    nodes = [NodeSlots("n1", "a", 1), NodeSlots("n2", "b", 1)]
    d = Dispatcher(nodes, 2, {}, lambda a: None)  # type: ignore[arg-type,return-value]
    todo = plan_order(["x"], 3, seed=0)
    first, second = d.reserve(todo), d.reserve(todo)
    assert first is not None and second is not None
    on_b = first if first.node.node_id == "n2" else second
    f = InFlight(on_b, None, datetime.now(UTC), 0.0)  # type: ignore[arg-type]
    d._per_node_arm[("n2", "x")] += 1  # what launch() counts, without Ray
    d._member_arm[("n2", "x")] += 1
    d._per_node_total["n2"] += 1
    monkeypatch.setattr(ray, "nodes", lambda: [{"NodeID": "n1", "Alive": True},
                                               {"NodeID": "n2", "Alive": False}])  # fmt: skip
    assert d.drop_lost(f) == ["b"] and d.lost_nodes == ["b"]
    assert d.drop_lost(f) == []  # reported once
    d.uncount(f)
    assert d._per_node_arm[("n2", "x")] == 0 and d._per_node_total["n2"] == 0
    d._release(f)  # the dead node's slot does not come back
    assert "n2" not in d._free and d.can_place()
    gang = Dispatcher(nodes, 1, {}, lambda a: None, gang=2)  # type: ignore[arg-type,return-value]
    place = gang.reserve(plan_order(["x"], 1, seed=0))
    assert place is not None
    gang.drop_lost(InFlight(place, None, datetime.now(UTC), 0.0))  # type: ignore[arg-type]
    assert not gang.can_place()  # one live node cannot host a 2-node gang


def test_a_container_running_several_ranks_shares_the_hosts_ipc_unless_told_otherwise(
    tmp_path: Path,
) -> None:
    """Tensor parallelism needs more /dev/shm than a container's 64 MB: --ipc host is the
    default where a member runs several ranks; the user's own --ipc/--shm-size wins."""
    bare = 'container = { runtime = "podman", image = "vllm:x" }'
    f = write(tmp_path, server_extra=bare)  # TP = 2 over 2 nodes: one rank a member
    one = member_command(plan_of(f, tmp_path / "w1"), 1, container_name="c", cwd="/tmp")
    assert "--ipc" not in one.argv
    f.write_text(f.read_text().replace("nodes = 2", "nodes = 1"))  # both ranks on one node
    two = member_command(plan_of(f, tmp_path / "w2"), 0, container_name="c", cwd="/tmp")
    image = two.argv.index("vllm:x")
    assert two.argv[:image].count("--ipc") == 1
    assert two.argv[two.argv.index("--ipc") + 1] == "host"
    own = 'container = { runtime = "podman", image = "vllm:x", options = ["--shm-size=8g"] }'
    f.write_text(f.read_text().replace(bare, own))
    mine = member_command(plan_of(f, tmp_path / "w3"), 0, container_name="c", cwd="/tmp")
    assert "--ipc" not in mine.argv and "--shm-size=8g" in mine.argv


def test_gang_members_stay_within_the_heads_fabric_group() -> None:
    """Two linked pairs (fabric groups): every gang of 2 lands within one pair, whichever
    node heads it, while the head still rotates over all four nodes; the capacity counts
    one gang per pair; a group left with one live node no longer takes gangs."""
    from bench.run.driver import Dispatcher
    from bench.run.placement import gang_capacity

    nodes = [
        NodeSlots("n1", "a", 1, "pair1"),
        NodeSlots("n2", "b", 1, "pair2"),
        NodeSlots("n3", "c", 1, "pair1"),
        NodeSlots("n4", "d", 1, "pair2"),
    ]
    assert gang_capacity(nodes, 2) == 2 and gang_capacity(nodes[:3], 2) == 1
    assert gang_capacity(nodes, 1) == 4
    d = Dispatcher(nodes, 2, {}, lambda a: None, gang=2)  # type: ignore[arg-type,return-value]
    pair_of = {n.node_id: n.fabric for n in nodes}
    todo = plan_order(["x", "y"], 4, seed=0)
    heads = []
    while todo:
        held = [d.reserve(todo), d.reserve(todo)]  # two at once: one per pair
        assert all(p is not None for p in held)
        assert d.reserve(todo) is None  # no third gang fits
        for place in held:
            assert place is not None
            ids = [n.node_id for n, _ in place.members]
            assert len({pair_of[i] for i in ids}) == 1, ids
            heads.append(ids[0])
            d._per_node_arm[(ids[0], place.plan.arm)] += 1
            for n in ids:
                d._member_arm[(n, place.plan.arm)] += 1
                d._per_node_total[n] += 1
        for place in held:
            assert place is not None
            for n, slot in place.members:
                d._free[n.node_id].add(slot)
    assert set(heads) == {"n1", "n2", "n3", "n4"}
    del d._free["n3"]  # n3 left the cluster: pair1 has one node, pair2 still takes gangs
    assert d.can_place()
    place = d.reserve(plan_order(["x"], 1, seed=0))
    assert place is not None and {n.node_id for n, _ in place.members} == {"n2", "n4"}
    del d._free["n4"]
    assert not d.can_place()


def test_a_gang_larger_than_every_fabric_group_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three nodes, but pairwise linked (pair1: 2 nodes, pair2: 1): a 3-node gang has no
    group to run in, and `cluster_slots` says so before any results directory exists."""
    import ray

    from bench.experiment import ResourcesSection
    from bench.run.placement import cluster_slots

    def node(i: int, group: str) -> dict[str, Any]:
        res = {"CPU": 1.0, f"specab_fabric_{group}": 1.0}
        return {"NodeID": f"n{i}", "Alive": True, "NodeManagerHostname": f"h{i}", "Resources": res}

    monkeypatch.setattr(
        ray, "nodes", lambda: [node(1, "pair1"), node(2, "pair1"), node(3, "pair2")]
    )
    slots = cluster_slots(ResourcesSection(nodes=2, cpu=1), "exp.toml")
    assert [n.fabric for n in slots] == ["pair1", "pair1", "pair2"]
    with pytest.raises(SpecabError) as err:
        cluster_slots(ResourcesSection(nodes=3, cpu=1), "exp.toml")
    line = str(err.value)
    assert "no group has that many" in line and "pair1: 2, pair2: 1" in line
    assert err.value.field == "resources.nodes"


def test_a_docker_container_runs_as_the_invoking_user_unless_told_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NGC images run as root: under a rootful daemon their files in the user's mounts are
    root's (a root-squashed NFS home then keeps them for good). Docker/nerdctl run by a
    user get `--user UID:GID` and a HOME the user can write; podman (rootless: root is
    already the user) and root itself are left alone; the user's own --user/-u wins."""

    def argv(container: str, euid: int) -> list[str]:
        monkeypatch.setattr(os, "geteuid", lambda: euid)
        monkeypatch.setattr(os, "getegid", lambda: 1000)
        f = write(tmp_path / f"{euid}-{len(container)}", server_extra=f"container = {container}")
        work = tmp_path / f"w{euid}-{len(container)}"
        return member_command(plan_of(f, work), 1, container_name="c", cwd="/tmp").argv

    docker = argv('{ runtime = "docker", image = "vllm:x" }', 1000)
    at = docker.index("--user")
    assert docker[at + 1] == "1000:1000" and at < docker.index("vllm:x")
    assert "HOME=/tmp" in docker[: docker.index("vllm:x")]
    nerdctl = argv('{ runtime = "/usr/bin/nerdctl", image = "vllm:x" }', 1000)
    assert "--user" in nerdctl
    assert "--user" not in argv('{ runtime = "podman", image = "vllm:x" }', 1000)
    assert "--user" not in argv('{ runtime = "docker", image = "vllm:x" }', 0)
    own = argv('{ runtime = "docker", image = "vllm:x", options = ["-u", "2000"] }', 1000)
    assert own.count("-u") == 1 and "--user" not in own


def test_slots_are_counterbalanced_so_a_slower_slot_falls_on_every_arm_alike() -> None:
    """Two slots on one node, boots two at a time in shuffled blocks: each arm runs in each
    slot about equally often (the slot it used least), not in whichever slot is lowest."""
    from collections import Counter

    from bench.run.driver import Dispatcher

    d = Dispatcher([NodeSlots("n1", "a", 2)], 2, {}, lambda a: None)  # type: ignore[arg-type,return-value]
    todo = plan_order(["x", "y"], 8, seed=2)  # x first in 2 blocks of 8: lowest-slot 2 vs 6
    used: Counter[tuple[str, int]] = Counter()
    while todo:
        held = [p for p in (d.reserve(todo), d.reserve(todo)) if p is not None]
        for place in held:
            used[(place.plan.arm, place.slot)] += 1
            d._slot_arm[("n1", place.slot, place.plan.arm)] += 1  # what launch() counts
            d._per_node_arm[("n1", place.plan.arm)] += 1
            d._per_node_total["n1"] += 1
        for place in held:
            d._free["n1"].add(place.slot)
    for arm in "xy":
        assert abs(used[(arm, 0)] - used[(arm, 1)]) <= 1, dict(used)


def test_a_node_that_cannot_read_an_arms_image_takes_no_more_of_that_arm() -> None:
    """Arm x's attempt on node b failed: b's podman store lacks x's image. x's retries and
    later boots go to a, y still runs on b; and once every node is barred for x, x is
    placed anyway (its attempts then run out) instead of waiting forever."""
    from datetime import UTC, datetime

    from bench.run.driver import Dispatcher, InFlight

    nodes = [NodeSlots("n1", "a", 1), NodeSlots("n2", "b", 1)]
    d = Dispatcher(nodes, 2, {}, lambda a: None)  # type: ignore[arg-type,return-value]
    todo = plan_order(["x", "y"], 4, seed=0)
    first, second = d.reserve(todo), d.reserve(todo)
    assert first is not None and second is not None
    on_b = first if first.node.node_id == "n2" else second
    assert d.bar(InFlight(on_b, None, datetime.now(UTC), 0.0)) == "b"  # type: ignore[arg-type]
    barred_arm = on_b.plan.arm
    for place in (first, second):
        d._release(InFlight(place, None, datetime.now(UTC), 0.0))  # type: ignore[arg-type]
    placed = []
    while (place := d.reserve(todo)) is not None:
        placed.append((place.node.label, place.plan.arm))
        d._per_node_arm[(place.node.node_id, place.plan.arm)] += 1  # what launch() counts
        d._per_node_total[place.node.node_id] += 1
        d._release(InFlight(place, None, datetime.now(UTC), 0.0))  # type: ignore[arg-type]
    assert ("b", barred_arm) not in placed and any(node == "b" for node, _ in placed)
    assert len(placed) == 6  # every boot still placed
    d._barred.add(("n1", barred_arm))  # no node left for that arm: the bar lifts
    again = plan_order([barred_arm], 1, seed=0)
    assert d.reserve(again) is not None


def test_a_container_under_slurm_gets_the_gpus_slurm_allotted_not_all(tmp_path: Path) -> None:
    """`--gpus all` gives a container every GPU of the host, outside the job's device cgroup,
    and the boot's CUDA_VISIBLE_DEVICES holds the job's ids, not the host's: the container
    gets exactly the boot's GPUs by their host ids, numbered from 0 inside. Outside Slurm the
    ids are the host's already; options that name devices are the user's to keep."""
    f = write(tmp_path, server_extra=CONTAINER)
    f.write_text(f.read_text().replace("nodes = 2", "nodes = 1"))

    def command(environ: dict[str, str]) -> list[str]:
        plan = plan_of(f, tmp_path / "w", environ={**environ, "CUDA_VISIBLE_DEVICES": "1"})
        return member_command(plan, 0, container_name="c", cwd="/tmp").argv

    slurm = command({"SLURM_JOB_GPUS": "4,6"})  # the job holds host GPUs 4 and 6
    image = slurm.index("nvcr.io/nvidia/vllm:26.01-py3")
    assert slurm[image - 4 : image] == ["--gpus", "device=6", "--ipc", "host"]
    assert "CUDA_VISIBLE_DEVICES=0" in slurm and "all" not in slurm[:image]
    plain = command({})
    assert plain[plain.index("--gpus") : plain.index("--gpus") + 2] == ["--gpus", "device=1"]
    named = f.read_text().replace('"--gpus", "all"', '"--gpus", "device=3"')
    f.write_text(named)
    assert "device=3" in command({"SLURM_JOB_GPUS": "4,6"})


def test_a_container_arm_keeps_its_jit_caches_on_the_node_outside_sbatch(tmp_path: Path) -> None:
    """Outside cluster/specab.sbatch nothing places FlashInfer's or CUDA's JIT caches: in a
    container they would land in the image's home and be rebuilt at every boot. The node
    gives each unplaced one a directory under its workdir, and the container mounts it; one
    the environment places already (as the sbatch script does) is left where it is."""
    from bench.run import jit_cache_env

    workdir = tmp_path / "node"
    jit = jit_cache_env(workdir, {"TRITON_CACHE_DIR": "/cache/triton"})
    assert jit == {
        "TORCHINDUCTOR_CACHE_DIR": str(workdir / "jit" / "inductor"),
        "FLASHINFER_WORKSPACE_BASE": str(workdir / "jit" / "flashinfer"),
        "CUDA_CACHE_PATH": str(workdir / "jit" / "cuda"),
    }
    plan = plan_of(write(tmp_path, server_extra=CONTAINER), tmp_path / "w", environ=jit)
    argv = member_command(plan, 0, container_name="c", cwd="/tmp").argv
    for path in jit.values():
        assert f"{path}:{path}" in argv  # mounted at the same path
    assert f"CUDA_CACHE_PATH={jit['CUDA_CACHE_PATH']}" in argv  # and named inside
