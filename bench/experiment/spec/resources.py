"""Where a boot's server runs: per-node Ray resources and the number of nodes one boot spans
(`[resources]`), and the container it runs in (`[server].container`, per arm too).

Split from `experiment_file.py` only for size; that module imports these and `load_spec`
validates them.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

# A command name (found on PATH) or an absolute path; no spaces, no shell.
RUNTIME_RE = r"^(/[^\s]+|[A-Za-z0-9][A-Za-z0-9_.-]*)$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ContainerSpec(_Model):
    """The server (every member of a gang boot) runs inside this image, one container per
    member, started and stopped by specab on the member's node."""

    runtime: Annotated[str, Field(pattern=RUNTIME_RE)] = Field(
        description="Container CLI on every node, docker-compatible: docker, podman, nerdctl "
        "(a name on PATH or an absolute path)."
    )
    image: Annotated[str, Field(min_length=1, pattern=r"^\S+$")] = Field(
        description="Image holding the vLLM build under test, e.g. nvcr.io/nvidia/vllm:26.01-py3."
    )
    options: list[str] = Field(
        default_factory=list,
        description="Extra `run` options placed before the image, one item per argument, e.g. "
        '["--gpus", "all", "--ipc", "host", "--ulimit", "memlock=-1"]. Machine-specific flags '
        "(an OCI runtime, ulimits, extra -v mounts) belong here.",
    )


class ResourcesSection(_Model):
    nodes: int = Field(
        1,
        ge=1,
        description="Nodes one boot spans. >1 makes a gang boot: one Ray placement group of "
        "`nodes` bundles (STRICT_SPREAD); the head runs the API server, every other node a "
        "headless engine (vLLM --nnodes/--node-rank). cpu, gpu, memory_gb and custom are "
        "then per node.",
    )
    cpu: float = Field(1.0, ge=0, description="Ray CPUs per boot (per node of a gang boot).")
    gpu: float = Field(0.0, ge=0, description="Ray GPUs per boot (per node of a gang boot).")
    memory_gb: float | None = Field(
        None, gt=0, description="Ray memory per boot, GiB (per node of a gang boot)."
    )
    custom: dict[str, float] = Field(
        default_factory=dict,
        description="Custom Ray resources per boot (per node of a gang boot), e.g. {GB10 = 1}.",
    )
