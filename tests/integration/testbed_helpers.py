"""The test bed of namespace hosts (cluster/testbed.py) for the suite: a context manager that
brings N hosts up and always tears them down (verified), commands on a host, and a Ray
cluster with one node per host. Tests skip, saying why, where the machine refuses it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).with_name("ray"))


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("testbed", ROOT / "cluster" / "testbed.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TB = _module()


class Bed:
    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info

    @property
    def hosts(self) -> list[str]:
        return list(self.info["hosts"])

    def addr(self, host: str) -> str:
        return str(self.info["hosts"][host]["addr"])

    def run(self, host: str, argv: Sequence[str], timeout: float = 120, **kw: Any):
        env = {**os.environ, "RAY_AUTH_MODE": "disabled", **kw.pop("env", {})}
        return subprocess.run(
            [*TB.enter(self.info, host), *argv],
            capture_output=True, text=True, timeout=timeout, env=env, **kw,
        )  # fmt: skip

    def processes(self, host: str, *needles: str) -> list[str]:
        """`pid args` of the processes on `host` whose command line holds any of `needles`."""
        ps = self.run(host, ["ps", "-e", "-o", "pid=,args="], timeout=30).stdout.splitlines()
        return [line.strip() for line in ps if any(n in line for n in needles)]

    def popen(self, host: str, argv: Sequence[str], **kw: Any) -> subprocess.Popen[str]:
        env = {**os.environ, "RAY_AUTH_MODE": "disabled", **kw.pop("env", {})}
        return subprocess.Popen([*TB.enter(self.info, host), *argv], text=True, env=env, **kw)

    def ray_cluster(
        self,
        cpus: int = 1,
        *,
        gpus: int = 0,
        dashboard: bool = False,
        env: dict[str, str] | None = None,
    ) -> str:
        """A Ray head on the first host and a worker on every other (each on its host's own
        core, see cluster/testbed.py); returns HEAD:PORT. `dashboard`: the head serves the
        dashboard and job API on its address, port 8265. `env` goes to every `ray start`
        (Ray's RAY_<config> settings). `gpus`: each node declares that many GPUs to Ray (no
        GPU exists: Ray hands out their ids, specab sets CUDA_VISIBLE_DEVICES). A bed up with
        pair links (`pairs=True`): each node declares its pair as its fabric group and the
        link as its fabric interface, as the GB10 recipe does (docs/cluster.md), while Ray
        itself stays on the bridge."""
        head = self.hosts[0]
        address = f"{self.addr(head)}:6379"
        for h in self.hosts:
            if h == head:
                role = ["--head", "--port", "6379"]
                role += (
                    ["--include-dashboard=true", "--dashboard-host", self.addr(h)]
                    if dashboard
                    else ["--include-dashboard=false"]
                )
            else:
                role = ["--address", address]
            argv = [RAY, "start", *role, "--node-ip-address", self.addr(h)]
            host_env = dict(env or {})
            if fabric := self.info["hosts"][h].get("fabric"):
                argv += ["--resources", json.dumps({f"specab_fabric_{fabric['group']}": 1})]
                host_env["SPECAB_FABRIC_IFACE"] = fabric["iface"]
            out = self.run(
                h,
                [*argv, "--num-cpus", str(cpus), "--num-gpus", str(gpus), "--disable-usage-stats"],
                env=host_env,
            )
            assert out.returncode == 0, out.stdout + out.stderr
        return address


@contextmanager
def namespace_hosts(n: int, state: Path, *, pairs: bool = False) -> Iterator[Bed]:
    why = TB.refusal()
    if why:
        pytest.skip(f"no namespace test bed here: {why}")
    t0 = time.monotonic()
    try:
        info = TB.up(n, state, pairs=pairs)
        bed = Bed(info)
        bed.info["up_s"] = time.monotonic() - t0
        yield bed
    finally:
        left = TB.down(state)
        assert left == [], f"test bed left behind: {left}"
