"""A local Ray that specab starts leaves no session directory behind (each run used to add
one under Ray's temp dir), and another process's session there is never touched."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

SCRIPT = """
from bench.run.placement import connect, disconnect, local_session
assert connect(None, num_cpus=1)
session = local_session()
assert session is not None and session.is_dir()
print(session, flush=True)
disconnect(session)
"""


def test_a_local_ray_session_is_removed_and_no_other() -> None:
    # a short temp root: Ray's socket paths must stay within 107 bytes
    with tempfile.TemporaryDirectory(prefix="rs-", dir="/tmp") as root:
        _check(Path(root))


def _check(tmp_path: Path) -> None:
    other = tmp_path / "ray" / "session_another_user"
    other.mkdir(parents=True)
    env = {**os.environ, "RAY_TMPDIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=240
    )
    assert out.returncode == 0, out.stderr[-2000:]
    session = Path(out.stdout.strip().splitlines()[-1])
    assert session.parent == tmp_path / "ray"
    assert not session.exists() and other.is_dir()
    assert not (tmp_path / "ray" / "session_latest").is_symlink()
