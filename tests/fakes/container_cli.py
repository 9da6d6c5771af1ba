"""A docker-compatible container CLI stand-in (stdlib only): the container kill path without
a container runtime. Real podman is exercised by tests/integration/test_container.py where it
is installed; this one makes the same properties testable everywhere:

- `run --rm --name NAME [-e K=V | -e K] [-v SRC:DST[:ro]] [-w DIR] [--entrypoint EXE] ...
  IMAGE ARGV...`
  starts ARGV as the "container": detached in its own session and owned by the "runtime"
  (recorded under $FAKE_CONTAINER_STATE), with exactly the -e environment (plus PATH), in
  -w; a -v source that does not exist fails like docker (exit 125). The client stays in
  the foreground (output shared), proxies SIGTERM, and returns the container's exit code.
  Killing the client does NOT stop the container (as with conmon / containerd-shim).
- `stop -t N NAME`: SIGTERM the container's group, wait N s, SIGKILL; `rm -f NAME`: SIGKILL;
  `ps -a --filter name=^NAME$ --format ...`: prints NAME while the container exists.
- The image is ignored: ARGV runs on the host.
- FAKE_CONTAINER_LINGER_S=N: `stop` and `rm -f` return once the processes are gone, but the
  container goes on existing (`ps` lists it) for N s more, as a runtime does while it hands
  back a GB10's ~100 GB of unified memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STATE = Path(os.environ.get("FAKE_CONTAINER_STATE", "/tmp/fake-containers"))
_WITH_VALUE = {"--name", "--network", "-w", "--label", "-e", "-v", "--pull", "--entrypoint"}
_WITH_VALUE |= {"--shm-size", "--ulimit", "--runtime", "--ipc", "--gpus"}


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _record(name: str) -> dict[str, float] | None:
    try:
        rec: dict[str, float] = json.loads((STATE / f"{name}.json").read_text())
    except (OSError, ValueError):
        return None
    if time.time() < rec.get("gone_at", 0.0):
        return rec  # removed, but the runtime has not let it go yet
    return rec if any(_alive(p) for p in _group(int(rec["pgid"]))) else None


def _group(pgid: int) -> list[int]:
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                raw = Path(f"/proc/{p}/stat").read_text()
            except OSError:
                continue
            if int(raw[raw.rindex(")") + 2 :].split()[2]) == pgid:
                out.append(int(p))
    return out


def _kill(name: str, grace: float) -> None:
    rec = _record(name)
    if rec is not None:
        pgid = int(rec["pgid"])
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(_alive(p) for p in _group(pgid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    _gone(name)


def _gone(name: str) -> None:
    """The container's processes have ended: its record goes, at once or, with
    FAKE_CONTAINER_LINGER_S, that long after (the first time only)."""
    path = STATE / f"{name}.json"
    linger = float(os.environ.get("FAKE_CONTAINER_LINGER_S", "0"))
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if linger > 0 and name and "gone_at" not in rec:  # named: not an image probe
        path.write_text(json.dumps({**rec, "gone_at": time.time() + linger}))
    elif time.time() >= rec.get("gone_at", 0.0):
        path.unlink(missing_ok=True)


def _run(args: list[str]) -> int:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    name, cwd, entrypoint, i = "", "/", "", 0
    while args[i].startswith("-"):
        opt = args[i]
        value = args[i + 1] if opt in _WITH_VALUE else ""
        i += 2 if opt in _WITH_VALUE else 1
        if opt == "--name":
            name = value
        elif opt == "-w":
            cwd = value
        elif opt == "--entrypoint":
            entrypoint = value
        elif opt == "-e":
            k, eq, v = value.partition("=")
            env[k] = v if eq else os.environ.get(k, "")
        elif opt == "-v" and not Path(value.split(":")[0]).exists():
            print(f"Error: no such file or directory: {value.split(':')[0]}", flush=True)
            return 125
    image, argv = args[i], args[i + 1 :]
    argv = [entrypoint, *argv] if entrypoint else argv  # docker: the entrypoint, then args
    print(f"fake-container {name} image={image}", flush=True)
    STATE.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(argv, env=env, cwd=cwd, start_new_session=True)
    (STATE / f"{name}.json").write_text(json.dumps({"pid": proc.pid, "pgid": proc.pid}))
    signal.signal(signal.SIGTERM, lambda *_: os.killpg(proc.pid, signal.SIGTERM))
    rc = proc.wait()
    _gone(name)  # --rm
    return rc


def main(argv: list[str]) -> int:
    cmd, args = argv[0], argv[1:]
    if cmd == "run":
        return _run(args)
    if cmd == "stop":
        _kill(args[-1], float(args[args.index("-t") + 1]))
        return 0
    if cmd == "rm":
        _kill(args[-1], 0.0)
        return 0
    if cmd == "ps":
        want = args[args.index("--filter") + 1].removeprefix("name=^").removesuffix("$")
        if _record(want) is not None:
            print(want)
        else:
            _gone(want)  # a lingering one's time is up
        return 0
    print(f"fake container CLI: unsupported command {cmd!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
