#!/usr/bin/env python3
"""A test bed of real hosts on one Linux machine (root): each host is a network namespace with
its own address on a private bridge (no route out), and one long-lived holder process gives it
its own hostname (UTS), process table (PID namespace), a tmpfs /tmp and /dev/shm, and an
/etc/hosts naming every host. The checkout (and anything else under --share) stays visible at
the same path, as a cluster's shared filesystem would be. Host i runs on core i (mod the
machine's cores).

    sudo python3 cluster/testbed.py up --hosts 2 --state /tmp/tb.json
    sudo python3 cluster/testbed.py up --hosts 4 --pairs --state /tmp/tb.json  # + pair links
    sudo python3 cluster/testbed.py run --state /tmp/tb.json 2 -- hostname -I
    sudo python3 cluster/testbed.py down --state /tmp/tb.json     # verified: nothing left

`down` kills each holder (the kernel then ends its whole PID namespace, and with it every
process started on that host), removes the namespaces, links and bridge, and checks that none
is left. Stdlib only, so it runs before any virtualenv exists.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

SUBNET = "10.99.{net}.{host}"
# --pairs: hosts 1+2, 3+4, ... also joined by a link of their own (as Sparks by their
# ConnectX-7 ports), each pair on its own subnet: no route from one pair's link to another's
FABRIC_SUBNET = "10.{pair}.{net}.{host}"  # pair 0 -> 10.100.NET.x, pair 1 -> 10.101.NET.x
FABRIC_IFACE = "fab0"


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def refusal() -> str | None:
    """Why this machine cannot host the test bed (None: it can)."""
    if os.geteuid() != 0:
        return "the test bed needs root (network, mount, UTS and PID namespaces)"
    for tool in ("ip", "unshare", "nsenter", "mount"):
        if shutil.which(tool) is None:
            return f"the test bed needs `{tool}` (Debian: iproute2 / util-linux)"
    probe = sh("unshare", "--mount", "--uts", "--pid", "--fork", "true", check=False)
    if probe.returncode != 0:
        return f"unshare refused here: {probe.stderr.strip() or probe.returncode}"
    return None


def _is_ns_init(pid: int) -> bool:
    """PID 1 of a PID namespace below ours (its `NSpid:` ends in 1)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    ns = next((ln.split()[1:] for ln in status.splitlines() if ln.startswith("NSpid:")), [])
    return len(ns) > 1 and ns[-1] == "1"


def _init_pid(outer: int, deadline_s: float = 10.0) -> int:
    """The holder's PID-namespace init (the child `unshare --fork` started), found by being
    PID 1 of its namespace: not by depth, where a short-lived child of the holder's script
    (its `touch`, say) could be taken for it and be gone a moment later."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        todo, found = [outer], None
        while todo and found is None:  # nsenter execs unshare, which forks the init
            pid = todo.pop()
            if pid != outer and _is_ns_init(pid):
                found = pid
                break
            try:
                todo += [
                    int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
                ]
            except OSError:
                continue
        if found is not None and Path(f"/proc/{found}/root/tmp/.testbed-ready").exists():
            return found
        time.sleep(0.05)
    raise RuntimeError("a host's holder did not come up")


_REAPER = (
    "import os, time\n"
    "while True:\n"
    "    try:\n"
    "        os.wait()\n"
    "    except ChildProcessError:\n"
    "        time.sleep(0.5)\n"
)


def _holder_script(name: str, hosts_file: str, keep: Path, shared: list[str]) -> str:
    """Runs as PID 1 of the host's PID namespace, in its own (private) mount namespace.
    Shared paths under /tmp (a checkout cloned there, its venv) are carried over the host's
    fresh /tmp at the same path, as a cluster's shared filesystem would be."""
    park = [f"mkdir -p {keep}/{i} && mount --bind {p} {keep}/{i}" for i, p in enumerate(shared)]
    back = [f"mkdir -p {p} && mount --bind {keep}/{i} {p}" for i, p in enumerate(shared)]
    return "; ".join(
        [
            "set -e",
            f"hostname {name}",
            *park,
            "mount -t tmpfs -o mode=1777 tmpfs /tmp",
            *back,
            "mount -t tmpfs -o mode=1777 tmpfs /dev/shm",
            f"mount --bind {hosts_file} /etc/hosts",
            "touch /tmp/.testbed-ready",
            # PID 1 of the host reaps what daemons (ray start, slurmd) leave to it
            f"exec {sys.executable} -c '{_REAPER}'",
        ]
    )


def _shared_under_tmp(extra: list[str]) -> list[str]:
    """The checkout, the interpreter's prefix and `extra`, where they live under /tmp."""
    here = Path(__file__).resolve().parents[1]
    paths = {str(p) for p in (here, Path(sys.prefix).resolve(), *map(Path, extra))}
    under = sorted(p for p in paths if Path(p).resolve().is_relative_to("/tmp"))
    # a path inside another shared one comes with it
    return [p for p in under if not any(p != q and Path(p).is_relative_to(q) for q in under)]


def _bridge_up() -> tuple[str, int, str]:
    """A new bridge on a subnet no other bed uses: two beds may be up at once (two pytest
    processes, or `up` run twice), and a subnet on two bridges would cross their routes."""
    with open("/run/testbed.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        used = set(re.findall(r"inet 10\.99\.(\d+)\.254/", sh("ip", "-o", "-4", "addr").stdout))
        tag = secrets.token_hex(2)
        free = [n for n in range(100, 250) if str(n) not in used]
        net = free[int(tag, 16) % len(free)]
        bridge = f"tb{tag}"
        sh("ip", "link", "add", bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{SUBNET.format(net=net, host=254)}/24", "dev", bridge)
        sh("ip", "link", "set", bridge, "up")
    return tag, net, bridge


def _pair_links(info: dict[str, object]) -> None:
    """A veth between the two hosts of each pair (`fab0` on both), on the pair's subnet."""
    hosts = info["hosts"]
    assert isinstance(hosts, dict)
    names = list(hosts)
    for p in range(len(names) // 2):
        ends = names[2 * p : 2 * p + 2]
        link = f"tb{info['tag']}f{p}"
        sh("ip", "link", "add", f"{link}a", "type", "veth", "peer", "name", f"{link}b")
        for side, h in zip("ab", ends, strict=True):
            ns, addr = hosts[h]["ns"], FABRIC_SUBNET.format(
                pair=100 + p, net=info["net"], host=names.index(h) + 1
            )
            sh("ip", "link", "set", f"{link}{side}", "netns", ns)
            sh("ip", "-n", ns, "link", "set", f"{link}{side}", "name", FABRIC_IFACE)
            sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", FABRIC_IFACE)
            sh("ip", "-n", ns, "link", "set", FABRIC_IFACE, "up")
            hosts[h]["fabric"] = {"iface": FABRIC_IFACE, "addr": addr, "group": f"pair{p + 1}"}


def up(
    n_hosts: int, state: Path, share: list[str] | None = None, *, pairs: bool = False
) -> dict[str, object]:
    why = refusal()
    if why:
        raise SystemExit(f"testbed: {why}")
    tag, net, bridge = _bridge_up()
    names = [f"h{i}" for i in range(1, n_hosts + 1)]
    addrs = {h: SUBNET.format(net=net, host=i) for i, h in enumerate(names, 1)}
    etc = Path(f"/run/testbed-{tag}")
    etc.mkdir(parents=True, exist_ok=True)
    hosts_file = etc / "hosts"
    lines = ["127.0.0.1 localhost", *(f"{a} {h}" for h, a in addrs.items())]
    hosts_file.write_text("\n".join(lines) + "\n")
    info: dict[str, object] = {
        "tag": tag,
        "bridge": bridge,
        "net": net,
        "dir": str(etc),
        "gateway": SUBNET.format(net=net, host=254),
        "hosts": {},
    }
    state.write_text(json.dumps(info))  # written early: `down` can clean a half-built bed
    shared = _shared_under_tmp(share or [])
    for i, h in enumerate(names, 1):
        ns, veth = f"tb{tag}-{h}", f"tb{tag}v{i}"
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", veth, "type", "veth", "peer", "name", f"{veth}p")
        sh("ip", "link", "set", f"{veth}p", "netns", ns)
        sh("ip", "link", "set", veth, "master", bridge, "up")
        sh("ip", "-n", ns, "link", "set", f"{veth}p", "name", "eth0")
        sh("ip", "-n", ns, "addr", "add", f"{addrs[h]}/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        holder = subprocess.Popen(
            [
                "nsenter",
                f"--net=/run/netns/{ns}",
                "unshare",
                "--mount",
                "--uts",
                "--pid",
                "--fork",
                "--mount-proc",
                "--propagation",
                "private",
                "sh",
                "-c",
                _holder_script(h, str(hosts_file), etc / f"keep-{h}", shared),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        hosts = info["hosts"]
        assert isinstance(hosts, dict)
        cores = sorted(os.sched_getaffinity(0))
        hosts[h] = {
            "ns": ns,
            "veth": veth,
            "addr": addrs[h],
            "outer": holder.pid,
            "pid": None,
            "core": cores[(i - 1) % len(cores)],
        }
        state.write_text(json.dumps(info))
        hosts[h]["pid"] = _init_pid(holder.pid)
        state.write_text(json.dumps(info))
    if pairs:  # the links live in the hosts' namespaces: removed with them by `down`
        _pair_links(info)
        state.write_text(json.dumps(info))
    return info


SLURM_CONF = """ClusterName=testbed
SlurmctldHost={ctl}({gateway})
SlurmctldPort={port}
SlurmdPort={dport}
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={dir}/slurmctld
SlurmctldPidFile={dir}/slurmctld.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdSpoolDir=/tmp/slurmd
SlurmdPidFile=/tmp/slurmd.pid
SlurmdLogFile=/tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SlurmdTimeout=30
KillWait=5
{nodes}
PartitionName=testbed Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def _pidfile(path: Path, timeout_s: float = 15.0) -> int:
    """A daemon's PID from its pid file (written by the daemon after its parent returned)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        with contextlib.suppress(OSError, ValueError):
            return int(path.read_text().strip())
        time.sleep(0.05)
    raise RuntimeError(f"{path} was not written")


def slurm_up(info: dict[str, object], state: Path, cpus: int = 1, timeout_s: float = 30) -> str:
    """A real Slurm over the hosts: a private munged and slurmctld in the root namespace, one
    slurmd per host inside it (its spool in the host's own /tmp). Returns SLURM_CONF."""
    for tool in ("munged", "slurmctld", "slurmd", "sinfo"):
        if shutil.which(tool) is None:
            raise SystemExit(f"testbed: Slurm needs `{tool}` (Debian: slurm-wlm munge)")
    d = Path(str(info["dir"]))
    sock = d / "munge.socket"
    sh(
        "munged",
        f"--socket={sock}",
        "--key-file=/etc/munge/munge.key",
        "--force",
        f"--log-file={d}/munged.log",
        f"--pid-file={d}/munged.pid",
        f"--seed-file={d}/munged.seed",
    )
    info["munged"] = _pidfile(d / "munged.pid")
    state.write_text(json.dumps(info))
    hosts = info["hosts"]
    assert isinstance(hosts, dict)
    port = 20000 + int(str(info["tag"]), 16) % 20000
    nodes = "\n".join(
        f"NodeName={h} NodeAddr={v['addr']} CPUs={cpus} State=UNKNOWN" for h, v in hosts.items()
    )
    conf = d / "slurm.conf"
    conf.write_text(
        SLURM_CONF.format(
            ctl=os.uname().nodename.split(".")[0],
            gateway=info["gateway"],
            port=port,
            dport=port + 1,
            sock=sock,
            dir=d,
            nodes=nodes,
        )
    )
    (d / "slurmctld").mkdir(exist_ok=True)
    env = {**os.environ, "SLURM_CONF": str(conf)}
    subprocess.run(["slurmctld"], check=True, env=env, capture_output=True)
    info["slurmctld"] = _pidfile(d / "slurmctld.pid")
    info["slurm_conf"] = str(conf)
    state.write_text(json.dumps(info))
    for h in hosts:
        subprocess.run(
            [*enter(info, h), "slurmd", "-N", h], check=True, env=env, capture_output=True
        )
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        idle = subprocess.run(
            ["sinfo", "-h", "-t", "idle", "-o", "%n"], env=env, capture_output=True, text=True
        )
        if sorted(idle.stdout.split()) == sorted(hosts):
            return str(conf)
        time.sleep(0.3)
    raise RuntimeError(f"Slurm nodes did not become idle: {idle.stdout} {idle.stderr}")


def load(state: Path) -> dict[str, object]:
    return dict(json.loads(state.read_text()))


def enter(info: dict[str, object], host: str) -> list[str]:
    """The argv prefix that runs a command on `host` (its net, mount, UTS and PID ns), on
    the host's own core: hosts of one machine would otherwise all pin servers to core 0."""
    hosts = info["hosts"]
    assert isinstance(hosts, dict)
    name = host if host in hosts else f"h{host}"
    pid, core = hosts[name]["pid"], hosts[name].get("core")
    pin = ["taskset", "-c", str(core)] if core is not None and shutil.which("taskset") else []
    return ["nsenter", "-t", str(pid), "--net", "--mount", "--uts", "--pid", "--", *pin]


def _pidns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _members(ns_link: str) -> list[int]:
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit() and _pidns(int(p)) == ns_link:
            out.append(int(p))
    return out


def down(state: Path, timeout_s: float = 20.0) -> list[str]:
    """Tear everything down; returns what was still left after the timeout (empty: clean)."""
    if not state.is_file():
        return []
    info = load(state)
    hosts = info.get("hosts") or {}
    assert isinstance(hosts, dict)
    links = {h: _pidns(int(v["pid"])) for h, v in hosts.items() if v.get("pid")}
    for v in hosts.values():
        for pid in (v.get("pid"), v.get("outer")):
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
    for daemon in ("slurmctld", "munged"):  # the root-namespace daemons, by their PIDs
        if info.get(daemon):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(str(info[daemon])), signal.SIGKILL)
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and any(link and _members(link) for link in links.values()):
        time.sleep(0.1)
    for v in hosts.values():
        sh("ip", "netns", "del", str(v["ns"]), check=False)
        sh("ip", "link", "del", str(v["veth"]), check=False)
    sh("ip", "link", "del", str(info["bridge"]), check=False)
    shutil.rmtree(str(info.get("dir", "")), ignore_errors=True)
    left = [f"process {p} on {h}" for h, link in links.items() if link for p in _members(link)]
    netns = sh("ip", "netns", "list", check=False).stdout
    left += [f"netns {v['ns']}" for v in hosts.values() if str(v["ns"]) in netns]
    linkdump = sh("ip", "-o", "link", "show", check=False).stdout
    left += [
        f"link {name}"
        for name in [str(info["bridge"])] + [str(v["veth"]) for v in hosts.values()]
        if f" {name}:" in linkdump or f" {name}@" in linkdump
    ]
    if not left:
        state.unlink()
    return left


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up")
    u.add_argument("--hosts", type=int, default=2)
    u.add_argument("--state", type=Path, required=True)
    u.add_argument("--slurm", action="store_true", help="also run a real Slurm over the hosts")
    u.add_argument("--pairs", action="store_true", help="link hosts 1+2, 3+4, ... pairwise")
    d = sub.add_parser("down")
    d.add_argument("--state", type=Path, required=True)
    r = sub.add_parser("run")
    r.add_argument("--state", type=Path, required=True)
    r.add_argument("host")
    r.add_argument("argv", nargs=argparse.REMAINDER)
    c = sub.add_parser("check")
    del c
    a = ap.parse_args()
    if a.cmd == "check":
        why = refusal()
        print(why or "ok")
        return 1 if why else 0
    if a.cmd == "up":
        info = up(a.hosts, a.state, pairs=a.pairs)
        if a.slurm:
            slurm_up(info, a.state)
        print(json.dumps(info, indent=1))
        return 0
    if a.cmd == "down":
        left = down(a.state)
        for item in left:
            print(f"left: {item}", file=sys.stderr)
        return 1 if left else 0
    argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    return subprocess.call(enter(load(a.state), a.host) + argv)


if __name__ == "__main__":
    raise SystemExit(main())
