"""Which GPUs a container arm's server sees: the boot's, as the host numbers them.

A user's `--gpus all` (docker, NVIDIA's container toolkit) hands the container every GPU of
the host. A container started by a Slurm step is not bound by the job's device cgroup, and
the ids the boot holds (CUDA_VISIBLE_DEVICES, from Ray) are the job's: relative to the GPUs
Slurm allotted it (`SLURM_STEP_GPUS` / `SLURM_JOB_GPUS` list their host ids). Passed as they
are, they can name another job's GPU. So `--gpus all` becomes `--gpus device=<host ids of
the boot's GPUs>`, and inside, where the runtime numbers the devices it passed from 0,
CUDA_VISIBLE_DEVICES becomes 0..n-1."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

GPU_ENV = "CUDA_VISIBLE_DEVICES"
SLURM_GPU_ENV = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS")


def slurm_gpus(environ: Mapping[str, str]) -> str:
    """The host ids of the GPUs Slurm allotted here ('' outside Slurm, or none allotted)."""
    return next((environ[k] for k in SLURM_GPU_ENV if environ.get(k)), "")


def _all_gpus_at(options: Sequence[str]) -> int | None:
    """Index of a `--gpus all` / `--gpus=all` in the options (None: the user chose devices)."""
    for i, o in enumerate(options):
        if o == "--gpus=all" or (
            o == "--gpus" and i + 1 < len(options) and options[i + 1] == "all"
        ):
            return i
    return None


def allotted_gpus(
    options: Sequence[str], env: Mapping[str, str], host_gpus: str
) -> tuple[list[str], dict[str, str]]:
    """The run options and the container's environment with `--gpus all` narrowed to the
    boot's GPUs (unchanged when the options name devices themselves or the boot has none)."""
    out, inner = list(options), dict(env)
    at = _all_gpus_at(out)
    visible = [g for g in env.get(GPU_ENV, "").split(",") if g.strip()]
    if at is None or not visible:
        return out, inner
    allotted = [g.strip() for g in host_gpus.split(",") if g.strip()]
    if allotted and all(g.isdigit() and int(g) < len(allotted) for g in visible):
        host_ids = [allotted[int(g)] for g in visible]  # the job's ids -> the host's
    else:
        host_ids = visible
    width = 1 if out[at] == "--gpus=all" else 2
    out[at : at + width] = ["--gpus", f"device={','.join(host_ids)}"]
    inner[GPU_ENV] = ",".join(str(i) for i in range(len(host_ids)))
    return out, inner
