"""Secrets: which settings are secret, their redacted form in every definition and manifest,
the command line that never carries one, the header the probes send, the one-line root
cause of an HTTP 401 that stops the run at once, and logs scrubbed of what the server echoed.
"""

from __future__ import annotations

import json
import sys
import tomllib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from bench.errors import BootFailed, SpecabError
from bench.experiment import (
    REDACTED,
    build_manifest,
    launch_plan,
    parse_spec,
    redact_args,
    resolve_arm,
    scrub,
    secret_values,
)
from bench.experiment.spec import is_secret_env, is_secret_flag
from bench.records import BootRecord
from bench.run.boot import API_KEY_REFUSED, Sampling, run_probe
from bench.run.driver import RepeatGuard
from bench.run.process import MemberProcess, TreeSettings

KEY = "sk-live-0123456789abcdef"
TOKEN = "hf_abcdefghijklmnop"


def _write_model(d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps({"model_type": "qwen3", "head_dim": 64}))


def _experiment(tmp_path: Path, server_args: str = "", arm: str = "") -> Path:
    _write_model(tmp_path / "target")
    (tmp_path / "p.jsonl").write_text('{"id": "a", "prompt": "x"}\n')
    f = tmp_path / "exp.toml"
    f.write_text(
        "[experiment]\nname = 't'\n[server]\nmodel = 'target'\n"
        "speculative_config = { method = 'ngram', num_speculative_tokens = 2,"
        " prompt_lookup_max = 2 }\n"
        f"args = {{ max-num-batched-tokens = 512, api-key = '{KEY}'{server_args} }}\n"
        f"env = {{ HF_TOKEN = '{TOKEN}', VLLM_API_KEY = '{KEY}' }}\n"
        "[probes]\nsets = ['p.jsonl']\n"
        f"[[arms]]\nname = 'base'\n{arm}\n[[arms]]\nname = 'other'\n"
    )
    return f


def _resolve(f: Path, name: str = "base"):  # type: ignore[no-untyped-def]
    return resolve_arm(parse_spec(tomllib.loads(f.read_text()), f), f, name)


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("api-key", True),
        ("api_key", True),
        ("hf-token", True),
        ("db-password", True),
        ("client_secret", True),
        ("max-num-batched-tokens", False),
        ("tokenizer", False),
        ("ssl-keyfile", False),  # a path
        ("kv-cache-dtype", False),
    ],
)
def test_a_flag_is_secret_by_its_last_word(name: str, secret: bool) -> None:
    assert is_secret_flag(name) is secret


def test_env_names_keep_the_broad_rule_the_stored_hashes_were_made_with() -> None:
    assert all(map(is_secret_env, ("HF_TOKEN", "VLLM_API_KEY", "PGPASSWORD", "MY_SECRET")))
    assert not is_secret_env("HF_HUB_OFFLINE")
    assert redact_args({"api-key": KEY, "hf-token": True, "max-num-batched-tokens": 512}) == {
        "api-key": REDACTED,
        "hf-token": True,  # a bare flag carries no secret
        "max-num-batched-tokens": 512,
    }


def test_the_manifest_holds_no_secret_and_its_hashes_cover_the_redacted_form(
    tmp_path: Path,
) -> None:
    f = _experiment(tmp_path)
    spec = parse_spec(tomllib.loads(f.read_text()), f)
    manifest = json.dumps(build_manifest(spec, f).to_json())
    assert KEY not in manifest and TOKEN not in manifest
    assert manifest.count(REDACTED) >= 5  # definitions' args and env, the spec's server
    before = _resolve(f).definition_sha256()
    f.write_text(f.read_text().replace(KEY, "sk-another-key-000000"))
    spec_g = parse_spec(tomllib.loads(f.read_text()), f)
    assert spec_g.sha256() == spec.sha256()  # a new key is not a new experiment
    assert _resolve(f).definition_sha256() == before


def test_the_key_moves_from_the_command_line_to_the_servers_environment(tmp_path: Path) -> None:
    arm = _resolve(_experiment(tmp_path))
    plan = launch_plan(arm, tmp_path / "work", engine_seed=1, environ={}, create=False)
    assert KEY not in " ".join(plan.argv) and "--api-key" not in plan.argv
    assert "--max-num-batched-tokens" in plan.argv  # a harmless flag with "token" in it stays
    assert plan.env["VLLM_API_KEY"] == KEY and plan.env["HF_TOKEN"] == TOKEN
    assert plan.client_headers == {"Authorization": f"Bearer {KEY}"}
    assert plan.redacted_env()["VLLM_API_KEY"] == REDACTED


def test_a_key_inherited_from_the_callers_environment_is_sent_too(tmp_path: Path) -> None:
    f = _experiment(tmp_path)
    f.write_text(f.read_text().replace(f", api-key = '{KEY}'", "").replace(KEY, "x" * 8))
    spec = parse_spec(tomllib.loads(f.read_text()), f)
    plain = spec.model_copy(
        update={"server": spec.server.model_copy(update={"env": {}, "args": {}})}
    )
    arm = resolve_arm(plain, f, "base")
    plan = launch_plan(arm, tmp_path, engine_seed=None, environ={"VLLM_API_KEY": KEY})
    assert plan.client_headers == {"Authorization": f"Bearer {KEY}"}
    bare = launch_plan(arm, tmp_path, engine_seed=None, environ={})
    assert bare.client_headers == {}


def test_a_secret_flag_no_variable_carries_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    f = _experiment(tmp_path, arm="args = { db-password = 'hunter22' }")
    with pytest.raises(SpecabError) as info:
        _resolve(f)
    line = info.value.one_line()
    assert "arms(base).args.db-password" in line and "no secret on a command line" in line
    assert "hunter22" not in line


def _client(status: int) -> httpx.Client:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json={"error": "Unauthorized"})

    return httpx.Client(base_url="http://server", transport=httpx.MockTransport(answer))


def test_http_401_is_one_root_cause_line_naming_the_key() -> None:
    from bench.experiment import Probe

    probe = Probe(set_name="s", id="p1", prompt="x", messages=None, max_tokens=None, line=1)
    with pytest.raises(BootFailed) as none_sent:
        run_probe(_client(401), probe, "m", Sampling())
    assert none_sent.value.reason.startswith(f"{API_KEY_REFUSED}; the probes sent none")
    keyed = _client(401)
    keyed.headers["Authorization"] = f"Bearer {KEY}"
    with pytest.raises(BootFailed) as refused:
        run_probe(keyed, probe, "m", Sampling())
    assert "refused the key specab sent" in refused.value.reason
    assert KEY not in refused.value.reason and "\n" not in refused.value.reason


def _failed(arm: str, error: str) -> BootRecord:
    now = datetime.now(UTC)
    return BootRecord(
        experiment="t", arm=arm, boot=0, attempt=1, boot_id=f"{arm}__b000__a1",
        status="failed", error=error, order=0, block=0, host="h", gpu="", started_at=now,
        ready_at=now, finished_at=now, boot_seconds=1.0, probe_seconds=None,
        num_speculative_tokens=2, vllm_version="", log_path="logs/x.log",
        failed_phase="first_request",
    )  # fmt: skip


def test_a_refused_key_stops_the_run_at_its_first_failure() -> None:
    guard = RepeatGuard(proven=["keyed"])  # even an arm that booted ok before
    assert guard.repeats(_failed("keyed", f"{API_KEY_REFUSED}; the probes sent none (…)"))
    assert not RepeatGuard().repeats(_failed("other", "server exited with code 1"))


@dataclass
class _Plan:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


def test_the_stored_log_and_its_tail_are_scrubbed_of_what_the_server_echoed(
    tmp_path: Path,
) -> None:
    code = "import os; print('key is', os.environ['VLLM_API_KEY'], flush=True)"
    plan = _Plan([sys.executable, "-c", code], {"VLLM_API_KEY": KEY, "PATH": "/usr/bin"})
    member = MemberProcess(plan, tmp_path / "server.log", TreeSettings(stop_grace_s=1.0))  # type: ignore[arg-type]
    member.launch(plan.argv)
    while member.alive():
        pass
    assert any(REDACTED in line for line in member.tail())
    assert all(KEY not in line for line in member.tail())
    member.stop()
    text = (tmp_path / "server.log").read_text()
    assert f"key is {REDACTED}" in text and KEY not in text


def test_scrubbing_leaves_short_harmless_values_alone() -> None:
    values = secret_values({"VLLM_API_KEY": KEY, "TOKENIZERS_PARALLELISM": "false"})
    assert values == (KEY,)
    assert scrub(f"false {KEY}", values) == f"false {REDACTED}"


def test_a_numeric_key_is_a_secret_too(tmp_path: Path) -> None:
    """TOML lets a key be a number: it is redacted and kept off the command line alike."""
    f = _experiment(tmp_path)
    f.write_text(f.read_text().replace(f"api-key = '{KEY}'", "api-key = 1234567890"))
    arm = _resolve(f)
    assert arm.definition()["args"]["api-key"] == REDACTED
    plan = launch_plan(arm, tmp_path / "work", engine_seed=None, environ={}, create=False)
    assert "1234567890" not in " ".join(plan.argv) and plan.env["VLLM_API_KEY"] == "1234567890"
