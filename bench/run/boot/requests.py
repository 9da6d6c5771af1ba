"""The probe runner: one request over the OpenAI completions / chat APIs per probe."""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from typing import Any

import httpx

from bench.errors import BootFailed
from bench.experiment import Probe, ProbesSection


@dataclass(frozen=True)
class Sampling:
    """Per-request body fields shared by every probe of a boot."""

    max_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    ignore_eos: bool = False
    timeout_s: float = 300.0

    @classmethod
    def from_spec(cls, p: ProbesSection) -> Sampling:
        return cls(
            max_tokens=p.max_tokens,
            temperature=p.temperature,
            top_p=p.top_p,
            seed=p.seed,
            ignore_eos=p.ignore_eos,
            timeout_s=p.request_timeout_s,
        )


@dataclass(frozen=True)
class ProbeResponse:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    spec_decoding: dict[str, Any] | None  # the response's metrics.speculative_decoding
    # Server-side timings (vLLM --enable-per-request-metrics), seconds; None when absent.
    ttft_s: float | None = None  # scheduled -> first token (queue time excluded)
    tpot_s: float | None = None  # mean time per output token after the first
    queue_s: float | None = None  # queued -> scheduled
    # As the server tokenized the prompt (chat template applied) and generated; None from a
    # server that does not return token ids.
    prompt_token_ids: tuple[int, ...] | None = None
    output_token_ids: tuple[int, ...] | None = None

    @property
    def output_sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def request_body(probe: Probe, model: str, sampling: Sampling) -> tuple[str, dict[str, Any]]:
    """(endpoint path, JSON body) for one probe."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": probe.max_tokens or sampling.max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "n": 1,  # per-request spec-decode metrics exist only for single-sequence requests
        "stream": False,
        # the ids the engine saw and made: what a reference forward is given, and where two
        # arms' outputs part (a server that does not know the field ignores it)
        "return_token_ids": True,
    }
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    if sampling.ignore_eos:
        body["ignore_eos"] = True
    if probe.messages is not None:
        body["messages"] = list(probe.messages)
        return "/v1/chat/completions", body
    body["prompt"] = probe.prompt
    return "/v1/completions", body


API_KEY_REFUSED = "the server requires an API key"


def key_refused(client: httpx.Client, where: str) -> BootFailed:
    """The one root-cause line of an HTTP 401: the probes sent no key, or one the server
    refused (no retry helps: `repeat_guard` stops the run at the first)."""
    if "authorization" in client.headers:
        said = (
            "it refused the key specab sent (the server's VLLM_API_KEY, from the arm's "
            "args api-key or env, or inherited from the caller's environment)"
        )
        fix = "make the arm's api-key or VLLM_API_KEY the key the server checks"
    else:
        said = "the probes sent none (the server's key is not one specab gave it)"
        fix = (
            "set it as the arm's args api-key or env VLLM_API_KEY (specab sends it), or "
            "remove the key the server reads (a VLLM_API_KEY in the image's environment)"
        )
    return BootFailed(f"{API_KEY_REFUSED}; {said} ({where}: HTTP 401). Fix: {fix}")


def run_probe(client: httpx.Client, probe: Probe, model: str, sampling: Sampling) -> ProbeResponse:
    """One request; BootFailed for anything but a well-formed 200 response."""
    path, body = request_body(probe, model, sampling)
    t0 = time.perf_counter()
    try:
        resp = client.post(path, json=body, timeout=sampling.timeout_s)
    except httpx.HTTPError as exc:
        raise BootFailed(f"probe {probe.set_name}/{probe.id}: request failed: {exc!r}") from None
    latency = time.perf_counter() - t0
    if resp.status_code == 401:
        raise key_refused(client, f"probe {probe.set_name}/{probe.id}")
    if resp.status_code != 200:
        raise BootFailed(
            f"probe {probe.set_name}/{probe.id}: HTTP {resp.status_code}: "
            + " ".join(resp.text[:300].split())
        )
    try:
        obj = resp.json()
        choice = obj["choices"][0]
        text = choice["message"]["content"] if probe.messages is not None else choice["text"]
        usage = obj["usage"]
        metrics = obj.get("metrics") or {}
        return ProbeResponse(
            text=text or "",
            prompt_tokens=int(usage["prompt_tokens"]),
            completion_tokens=int(usage["completion_tokens"]),
            latency_s=latency,
            spec_decoding=metrics.get("speculative_decoding"),
            ttft_s=_seconds(metrics, "time_to_first_token_ms"),
            tpot_s=_seconds(metrics, "mean_itl_ms"),
            queue_s=_seconds(metrics, "queue_time_ms"),
            prompt_token_ids=_ids(choice.get("prompt_token_ids") or obj.get("prompt_token_ids")),
            output_token_ids=_ids(choice.get("token_ids")),
        )
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise BootFailed(
            f"probe {probe.set_name}/{probe.id}: malformed response ({exc!r})"
        ) from None


def _ids(value: Any) -> tuple[int, ...] | None:
    """Token ids from a response; ValueError for anything but a list of integers."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(type(i) is int for i in value):
        raise ValueError(f"token ids {str(value)[:80]}")
    return tuple(value)


def _seconds(metrics: dict[str, Any], key: str) -> float | None:
    """A `metrics` timing in ms as seconds; ValueError for one no clock can produce."""
    value = metrics.get(key)
    if value is None:
        return None
    ms = float(value)
    if not math.isfinite(ms) or ms < 0:
        raise ValueError(f"metrics.{key} = {value!r}")
    return ms / 1000.0
