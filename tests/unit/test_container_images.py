"""A container image is compared across nodes by its content, with a real podman (each
"node" its own store): one tar imported from two copies whose times differ gets two local
ids and one content; other files, or another environment the container runs with, are
other content; an image a node lacks has none. Another build label alone is the same."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.experiment import ContainerSpec, image_id

pytestmark = pytest.mark.skipif(
    shutil.which("podman") is None or os.geteuid() != 0, reason="needs rootful podman"
)
IMAGE = "localhost/specab-content:1"


def _rootfs(path: Path, extra: bool = False) -> Path:
    with tarfile.open(path, "w") as tf:
        for name in ("etc/os-release", *(("etc/stale-build",) if extra else ())):
            body = b"specab test image\n"
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(body), 1_700_000_000
            tf.addfile(info, io.BytesIO(body))
    return path


@pytest.fixture
def short(tmp_path: Path) -> Iterator[Path]:
    """Where podman's run roots go: it refuses one longer than 50 characters."""
    path = Path(tempfile.mkdtemp(prefix="sc-", dir="/tmp"))
    yield path
    # podman's overlay driver bind-mounts its own directory in each store
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m.startswith(f"{path}/")), reverse=True):
        subprocess.run(["umount", mount], check=False, capture_output=True)
    shutil.rmtree(path, ignore_errors=True)


def _node(tmp_path: Path, name: str, tar: Path, *changes: str) -> ContainerSpec:
    """A runtime whose store is this node's own, holding `tar` imported as IMAGE (`tmp_path`:
    a short directory)."""
    store = tmp_path / name
    runtime = tmp_path / f"podman-{name}"
    runtime.write_text(
        f'#!/bin/sh\nexec podman --root "{store}/root" --runroot "{store}/run" "$@"\n'
    )
    runtime.chmod(0o755)
    argv = [str(runtime), "import", "-q", *(f"--change={c}" for c in changes), str(tar), IMAGE]
    made = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    return ContainerSpec(runtime=str(runtime), image=IMAGE)


def _local_id(c: ContainerSpec) -> str:
    argv = [c.runtime, "image", "inspect", "--format", "{{.Id}}", c.image]
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


def test_one_image_on_two_nodes_is_one_content_and_another_is_not(short: Path) -> None:
    tmp_path = short
    tar = _rootfs(tmp_path / "rootfs.tar")
    copy = Path(shutil.copy(tar, tmp_path / "copy.tar"))
    os.utime(copy, (time.time() - 3600, time.time() - 3600))  # copied an hour later
    h1, h2 = _node(tmp_path, "h1", tar), _node(tmp_path, "h2", copy)
    assert _local_id(h1) != _local_id(h2)  # what the runtime's own id would have refused
    assert image_id(h1) == image_id(h2) is not None
    assert str(image_id(h1)).startswith("sha256:")
    labelled = _node(tmp_path, "label", tar, "LABEL=built.on=h3")
    assert image_id(labelled) == image_id(h1)  # a build label is no content
    stale = _node(tmp_path, "stale", _rootfs(tmp_path / "stale.tar", extra=True))
    assert image_id(stale) != image_id(h1)
    env = _node(tmp_path, "env", tar, "ENV=VLLM_USE_V1=0")
    assert image_id(env) != image_id(h1)  # it runs with another environment
    lacking = ContainerSpec(runtime=h1.runtime, image="localhost/specab-absent:1")
    assert image_id(lacking) is None
