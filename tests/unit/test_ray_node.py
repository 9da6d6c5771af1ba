"""cluster/ray-node.sh starts a node's Ray again when it dies while starting (Ray gives a raylet
a fixed 30 s to register, which a loaded node can miss), and only then: a Ray that was up
longer, a clean exit, or a TERM from Slurm ending the step end the step with no other try.
The command is a stand-in that counts its starts and fails as told, since a real raylet
cannot be made to miss its window on demand; the test bed's Slurm tests run the script
with the real `ray start`."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "cluster" / "ray-node.sh"


def _stand_in(tmp_path: Path, body: str, before: str = "") -> tuple[Path, Path]:
    """A command that runs `before`, appends a line to `starts`, then runs `body`."""
    starts = tmp_path / "starts"
    command = tmp_path / "ray"
    command.write_text(f'#!/usr/bin/env bash\n{before}\necho start >> "{starts}"\n{body}\n')
    command.chmod(0o755)
    return command, starts


def _run(command: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), str(command), "start", "--block"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _count(starts: Path) -> int:
    return len(starts.read_text().splitlines()) if starts.exists() else 0


def test_a_start_that_fails_at_once_is_tried_again_until_it_holds(tmp_path: Path) -> None:
    # Fails on its first two starts, then exits cleanly.
    command, starts = _stand_in(tmp_path, f'[ $(wc -l < "{tmp_path}/starts") -ge 3 ]')
    out = _run(command)
    assert out.returncode == 0 and _count(starts) == 3, out
    assert out.stderr.count("failed while starting") == 2, out.stderr
    assert "try 1 of 3" in out.stderr and "try 2 of 3" in out.stderr


def test_tries_are_bounded_and_the_last_exit_status_is_the_steps(tmp_path: Path) -> None:
    command, starts = _stand_in(tmp_path, "exit 7")
    out = _run(command, SPECAB_RAY_START_TRIES="2")
    assert out.returncode == 7 and _count(starts) == 2, out


def test_a_ray_that_was_up_past_the_start_window_is_not_started_again(tmp_path: Path) -> None:
    command, starts = _stand_in(tmp_path, "sleep 2\nexit 1")
    out = _run(command, SPECAB_RAY_START_S="1")
    assert out.returncode == 1 and _count(starts) == 1, out
    assert "failed while starting" not in out.stderr


def test_term_is_passed_on_and_never_followed_by_another_try(tmp_path: Path) -> None:
    # The stand-in exits 1 on TERM, fast: inside the start window, so only the TERM stops a retry.
    # Its trap is set before it counts its start, so the TERM sent after the count finds it.
    before = "sleep 30 &\nchild=$!\ntrap 'kill $child; exit 1' TERM"
    command, starts = _stand_in(tmp_path, "wait", before=before)
    proc = subprocess.Popen(
        ["bash", str(SCRIPT), str(command), "start", "--block"],
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    while _count(starts) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and _count(starts) == 1, err
    assert "failed while starting" not in err
