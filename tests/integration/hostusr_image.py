"""A container image for podman tests that needs no registry: an empty root whose /bin,
/lib... point into /usr, plus a copy of /etc, imported with `podman import`; the host's /usr
and Python are mounted at run time (`run_options`). Rootful podman only (the image borrows
the host's /usr). Shared by test_container.py and the Slurm test bed's container mode."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

# present only inside the image: a process whose root holds it runs in a container
MARKER = "etc/specab-test-image"


def podman_problem() -> str | None:
    """Why podman cannot run these tests here, or None."""
    if shutil.which("podman") is None:
        return "podman is not installed (apt-get install -y podman runc)"
    if os.geteuid() != 0:
        return "the test image borrows the host's /usr: rootful podman only"
    cmd = ["podman", "info", "--format", "{{.Host.OCIRuntime.Name}}"]
    try:
        info = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"podman info failed: {exc}"
    return None if info.returncode == 0 else f"podman info failed: {info.stderr.strip()[:200]}"


def run_options(*, venv: bool = True) -> list[str]:
    """What this kind of machine needs (a VM without CAP_SYS_RESOURCE, cgroup v1 hybrid):
    runc instead of crun, limits no higher than ours, the host's /usr and Python mounted
    (and the venv, unless whoever runs the container mounts it itself)."""
    opts = ["--runtime", "runc"] if shutil.which("runc") else []
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[0], 32768)
    opts += ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}"]
    for p in sorted({"/usr", sys.base_prefix, *([sys.prefix] if venv else [])}):
        opts += ["-v", f"{p}:{p}:ro"]
    return opts


def write_rootfs_tar(tar: Path) -> Path:
    """The image's root file system as a tar for `podman import`, with `MARKER` in it."""
    with tarfile.open(tar, "w") as tf:
        for d in ("proc", "sys", "dev", "tmp", "run", "usr", "root"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            tf.addfile(info)
        for d in ("bin", "lib", "lib64", "sbin"):
            info = tarfile.TarInfo(d)
            info.type, info.linkname = tarfile.SYMTYPE, f"usr/{d}"
            tf.addfile(info)
        tf.add("/etc", arcname="etc", filter=lambda t: t if t.isdir() or t.isfile() else None)
        info = tarfile.TarInfo(MARKER)
        tf.addfile(info)
    return tar


# Each host's own podman storage, in its private /tmp (hosts share /var/lib/containers but
# not /run or /dev/shm, where podman keeps state and locks: one store per "machine").
PODMAN_DIR = "/tmp/specab-podman"
PODMAN_ENV = {
    "CONTAINERS_STORAGE_CONF": f"{PODMAN_DIR}/storage.conf",
    "CONTAINERS_CONF": f"{PODMAN_DIR}/containers.conf",
}
STORAGE_CONF = f"""[storage]
driver = "vfs"
graphroot = "{PODMAN_DIR}/root"
runroot = "{PODMAN_DIR}/run"
"""
CONTAINERS_CONF = f'[engine]\ntmp_dir = "{PODMAN_DIR}/libpod"\n'


def host_podman_store(run: Callable[..., Any], host: str, tar: Path, image: str | None) -> None:
    """On a test-bed host (`run` = Bed.run), its own podman store, holding `image` imported
    from `tar` (None: an empty store); podman then needs `PODMAN_ENV` there."""
    for conf, text in zip(PODMAN_ENV.values(), (STORAGE_CONF, CONTAINERS_CONF), strict=True):
        made = run(host, ["sh", "-c", f"mkdir -p {PODMAN_DIR} && cat > {conf}"], input=text)
        assert made.returncode == 0, made.stderr
    if image is not None:
        made = run(host, ["podman", "import", str(tar), image], env=PODMAN_ENV)
        assert made.returncode == 0, made.stderr
