"""cluster/node-address.sh picks an IPv4 address: a hostname that resolves to IPv6 first
(some hosts print it before their IPv4) gives its IPv4, never an unbracketed IPv6 that a
`host:port` string would break on; with only IPv6 and loopback, one line, exit 2. `hostname`
and `ip` are stand-ins on PATH, so what this machine's network holds does not matter."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "cluster" / "node-address.sh"


def _address(tmp_path: Path, resolves_to: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_ins = {
        "hostname": f'[ "$1" = "--ip-address" ] && echo "{resolves_to}" || echo node1\n',
        "ip": "exit 0\n",  # no interface has a global IPv4, no route to a head
    }
    for name, body in stand_ins.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True)


@pytest.mark.parametrize(
    ("resolves_to", "printed"),
    [
        ("2001:db8::5 192.0.2.7", "192.0.2.7"),
        ("fe80::1 127.0.1.1 10.1.2.3", "10.1.2.3"),
        ("192.0.2.9", "192.0.2.9"),
    ],
)
def test_the_hostnames_ipv4_is_printed_past_ipv6_and_loopback(
    tmp_path: Path, resolves_to: str, printed: str
) -> None:
    out = _address(tmp_path, resolves_to)
    assert out.returncode == 0 and out.stdout == printed + "\n", out


def test_only_ipv6_and_loopback_stop_in_one_line(tmp_path: Path) -> None:
    out = _address(tmp_path, "2001:db8::5 ::1 127.0.1.1")
    assert out.returncode == 2 and out.stdout == "", out
    assert len(out.stderr.strip().splitlines()) == 1 and "SPECAB_NODE_IFACE" in out.stderr
    assert "resolves to 2001:db8::5" in out.stderr
