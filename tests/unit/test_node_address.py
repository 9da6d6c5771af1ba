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


# A GB10-like node: docker0 first in interface order (172.17.0.1, which every node holds), a
# management port, then the cluster's network; its hostname maps to 127.0.1.1.
INTERFACES = [
    ("lo", "127.0.0.1", "host"),
    ("docker0", "172.17.0.1", "global"),
    ("mgmt0", "10.200.0.5", "global"),
    ("enp1s0f0np0", "192.168.50.12", "global"),
]
ROUTES = {"192.168.50.1": "192.168.50.12", "192.168.50.11": "192.168.50.12"}
IP_STAND_IN = r"""
if [ "$2" = route ]; then  # ip -4 route get DEST
    src=$(awk -v d="$4" '$1 == d {print $2}' "$SA_DIR/routes")
    [ -n "$src" ] && echo "$4 dev x src $src uid 0"
    exit 0
fi
shift 4  # ip -4 -o addr show [dev IFACE | scope global]
awk -v k="$1" -v v="$2" '(k == "" || (k == "dev" && $2 == v) || (k == "scope" && $8 == v))' \
    "$SA_DIR/addrs"
"""


def _node(
    tmp_path: Path, *args: str, node_addr: str = "", ctl: str = "", slurm: bool = True
) -> subprocess.CompletedProcess[str]:
    """node-address.sh on the node above, in a Slurm step whose NodeAddr and SlurmctldHost
    are `node_addr` and `ctl` (getent resolves "gb10-b" to its cluster address)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "addrs").write_text(
        "".join(
            f"{i}: {n}    inet {a}/24 brd x scope {s} {n}\\ valid_lft forever\n"
            for i, (n, a, s) in enumerate(INTERFACES, 1)
        )
    )
    (tmp_path / "routes").write_text("".join(f"{d} {s}\n" for d, s in ROUTES.items()))
    stand_ins = {
        "hostname": '[ "$1" = "--ip-address" ] && echo 127.0.1.1 || echo gb10-b\n',
        "ip": IP_STAND_IN,
        "getent": '[ "$2" = gb10-b ] && echo "192.168.50.12 STREAM gb10-b"\nexit 0\n',
        "scontrol": (
            f'[ "$2" = node ] && echo "NodeName=gb10-b Arch=aarch64 NodeAddr={node_addr} '
            'NodeHostName=gb10-b"\n'
            f'[ "$2" = config ] && echo "SlurmctldHost[0]        = {ctl}"\nexit 0\n'
        ),
    }
    for name, body in stand_ins.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "SA_DIR": str(tmp_path)}
    if slurm:
        env["SLURMD_NODENAME"] = "gb10-b"
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True)


@pytest.mark.parametrize(
    ("node_addr", "ctl"),
    [
        ("192.168.50.12", ""),  # Slurm's NodeAddr, an address this node holds
        ("gb10-b", ""),  # NodeAddr a name: resolved here
        ("10.9.9.9", "ctl(192.168.50.1)"),  # a NodeAddr not held: the route to slurmctld
        ("", "ctl(192.168.50.1)"),
        ("2001:db8::12", "ctl(192.168.50.1)"),  # IPv6 passed over
    ],
)
def test_a_head_in_a_slurm_step_takes_the_network_slurm_reaches_it_on(
    tmp_path: Path, node_addr: str, ctl: str
) -> None:
    out = _node(tmp_path, node_addr=node_addr, ctl=ctl)
    assert out.returncode == 0 and out.stdout == "192.168.50.12\n", out


def test_a_worker_takes_its_route_to_the_head(tmp_path: Path) -> None:
    out = _node(tmp_path, "192.168.50.11", node_addr="10.200.0.5")
    assert out.returncode == 0 and out.stdout == "192.168.50.12\n", out


def test_outside_slurm_a_container_bridge_first_in_order_is_passed_over(tmp_path: Path) -> None:
    out = _node(tmp_path, slurm=False)
    assert out.returncode == 0 and out.stdout == "10.200.0.5\n", out  # docker0 skipped
