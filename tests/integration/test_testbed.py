"""The namespace test bed itself (cluster/testbed.py): three hosts, each with its own address,
hostname, process table, /tmp and /dev/shm, reachable from each other by name; `down` leaves
no process, namespace or link; two beds up at once take different subnets. Seconds, no vLLM."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from testbed_helpers import TB, namespace_hosts

pytestmark = [pytest.mark.testbed]

SERVE = (
    "import http.server as h, sys; "
    "h.HTTPServer((sys.argv[1], 8000), h.SimpleHTTPRequestHandler).serve_forever()"
)
FETCH = (
    "import urllib.request as u, sys; "
    "print(u.urlopen(f'http://{sys.argv[1]}:8000/', timeout=5).status)"
)


def test_three_hosts_are_separate_machines_and_leave_nothing(tmp_path: Path) -> None:
    state = tmp_path / "bed.json"
    with namespace_hosts(3, state) as bed:
        assert bed.info["up_s"] < 10
        seen = {}
        for h in bed.hosts:
            out = bed.run(h, ["sh", "-c", "hostname; hostname -I; ls /proc | grep -c '^[0-9]'; "
                                          "hostname > /tmp/who; ls /dev/shm | wc -l"])  # fmt: skip
            name, addr, procs, shm = out.stdout.split()
            assert name == h and addr == bed.addr(h)
            assert int(procs) < 10  # its own PID namespace: the holder, sh and a few
            assert shm == "0"
            seen[h] = addr
        assert len(set(seen.values())) == 3
        # /tmp is private: each host reads back the name it wrote, not another's
        for h in bed.hosts:
            assert bed.run(h, ["cat", "/tmp/who"]).stdout == f"{h}\n"
        # reachable by name over the bridge
        server = bed.popen("h2", [sys.executable, "-c", SERVE, bed.addr("h2")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            for _ in range(50):
                got = bed.run("h1", [sys.executable, "-c", FETCH, "h2"], timeout=10)
                if got.stdout.strip() == "200":
                    break
            assert got.stdout.strip() == "200", got.stderr
        finally:
            server.kill()
        # a process left running on a host dies with it
        bed.popen("h3", ["sleep", "600"])
    assert not state.exists()
    assert (
        "tb" + bed.info["tag"]
        not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    )


def test_two_beds_up_at_once_take_different_subnets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tags "0064" and "00fa" both mapped to 10.99.200.0/24 when a bed's subnet came from its
    tag alone: the second bed's bridge then shared the first's subnet and routes."""
    tags = iter(["0064", "00fa"])
    monkeypatch.setattr(TB.secrets, "token_hex", lambda n: next(tags))
    with (
        namespace_hosts(1, tmp_path / "a.json") as a,
        namespace_hosts(1, tmp_path / "b.json") as b,
    ):
        assert a.info["net"] != b.info["net"]
        for bed in (a, b):
            assert bed.run("h1", ["hostname", "-I"]).stdout.split() == [bed.addr("h1")]


def test_refusal_is_a_sentence_or_none() -> None:
    why = TB.refusal()
    assert why is None or why.startswith(("the test bed needs", "unshare refused"))
