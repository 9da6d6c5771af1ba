"""Fault injector for server lifecycle tests: a stand-in for the vLLM API server process.

Called as `python lifecycle_server.py --host H --port P`; FAKE_MODE picks the fault:
  ok        spawn a child and a grandchild that ignores SIGTERM, then serve /health
  chatty    write ~1 MiB to stdout first (would block on an undrained pipe), then serve
  setsid    spawn a child that leaves the process group (setsid), then serve
  die       print a fake traceback and exit 3 at once
  hang      never serve /health
  port-race first launch (no FAKE_MARKER file yet) reports "Address already in use" and exits
"""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

_IGNORE_TERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
_SPAWN_GRANDCHILD = (
    "import subprocess, sys, time; "
    f"subprocess.Popen([sys.executable, '-c', {_IGNORE_TERM!r}]); time.sleep(600)"
)


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    host = sys.argv[sys.argv.index("--host") + 1]
    port = int(sys.argv[sys.argv.index("--port") + 1])
    mode = os.environ.get("FAKE_MODE", "ok")
    print(f"fake server pid={os.getpid()} mode={mode} port={port}", flush=True)
    if mode == "die":
        print(
            "Traceback (most recent call last):\nValueError: model dir does not exist", flush=True
        )
        sys.exit(3)
    if mode == "port-race":
        marker = Path(os.environ["FAKE_MARKER"])
        if not marker.exists():
            marker.write_text("x")
            print("OSError: [Errno 98] Address already in use", flush=True)
            sys.exit(1)
    if mode == "hang":
        time.sleep(600)
    if mode == "chatty":
        for _ in range(1024):
            print("x" * 1023, flush=False)
        sys.stdout.flush()
    if mode in ("ok", "chatty"):
        subprocess.Popen([sys.executable, "-c", _SPAWN_GRANDCHILD])
    if mode == "setsid":
        subprocess.Popen([sys.executable, "-c", _IGNORE_TERM], start_new_session=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    http.server.HTTPServer((host, port), _Health).serve_forever()


if __name__ == "__main__":
    main()
