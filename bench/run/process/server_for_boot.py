"""Which server object one boot runs: a `ServerProcess` (one node) or a `GangServer` (the
head's ServerProcess plus a member per other node), each member's command from
`bench.experiment.member_command` (container-wrapped when the arm runs in one).

Where the other members run is the launcher's business: `LocalMembers` starts them on this
machine (`specab boot` of a gang, tests); the Ray task passes `RayMembers`
(`bench.run.placement`), which starts each in its bundle of the boot's placement group.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bench.experiment import (
    Experiment,
    LaunchPlan,
    ResolvedArm,
    container_name,
    member_command,
    ready_timeout,
)
from bench.run.node import member_log_name
from bench.run.process.api_server import ServerProcess, free_port
from bench.run.process.gang import GangServer, LocalMember, MemberHandle, MemberStart
from bench.run.process.lifecycle import Watch
from bench.run.process.member_process import TreeSettings


class MemberLauncher(Protocol):
    def head_ip(self) -> str: ...  # the master address the other members reach

    def member(self, ms: MemberStart) -> MemberHandle: ...


class LocalMembers:
    """Every member on this machine, each its own process tree and log."""

    def __init__(self, workdir: Path, head_log: Path, environ: Mapping[str, str]) -> None:
        self._workdir, self._head_log, self._environ = workdir, head_log, environ

    def head_ip(self) -> str:
        return "127.0.0.1"

    def member(self, ms: MemberStart) -> MemberHandle:
        log = self._head_log.with_name(member_log_name(ms.boot_id, ms.rank))
        return LocalMember(ms, workdir=self._workdir, log=log, environ=self._environ)


@dataclass(frozen=True)
class ServerSetup:
    """What the boot decided for its server: where, how long, what it records."""

    experiment: str
    boot_id: str
    engine_seed: int | None
    host: str
    ready_timeout_s: float
    stop_grace_s: float
    log_file: Path
    cwd: Path
    extra_args: tuple[str, ...] = ()
    image_id: str = ""  # container arms: the image's id on the head's node (members match it)

    @classmethod
    def of(
        cls,
        spec: Experiment,
        arm: ResolvedArm,
        boot_id: str,
        seed: int | None,
        paths: tuple[Path, Path],
    ) -> ServerSetup:
        """`paths`: the server's log and working directory."""
        srv = spec.server
        log, cwd = paths
        return cls(
            experiment=spec.experiment.name,
            boot_id=boot_id,
            engine_seed=seed,
            host=srv.host,
            ready_timeout_s=ready_timeout(arm, srv.ready_timeout_s, spec.resources.gpu)[0],
            stop_grace_s=srv.stop_grace_s,
            log_file=log,
            cwd=cwd,
        )


def make_server(
    arm: ResolvedArm,
    plan: LaunchPlan,
    s: ServerSetup,
    *,
    on_started: Callable[[int, int], None] | None = None,
    watch: Watch | None = None,
    members: MemberLauncher | None = None,
) -> ServerProcess | GangServer:
    """The boot's server, not started yet (use it as a context manager)."""
    token = secrets.token_hex(3)
    addr, port = "", 0
    if plan.nodes > 1:
        if members is None:
            raise ValueError("a gang boot needs a member launcher")
        addr = members.head_ip()
        port = free_port(addr)  # the head's torch.distributed rendezvous, on its node
    cmd = member_command(
        plan,
        0,
        master_addr=addr,
        master_port=port,
        node_ip=addr,
        container_name=container_name(s.experiment, s.boot_id, 0, token),
        labels={"specab.boot": s.boot_id, "specab.member": "0"},
        cwd=str(s.cwd),
    )
    head = ServerProcess(
        cmd,
        s.log_file,
        ready_timeout_s=s.ready_timeout_s,
        host=s.host,
        extra_args=s.extra_args,
        how=TreeSettings(
            stop_grace_s=s.stop_grace_s,
            cwd=s.cwd,
            on_started=on_started,
            watch=watch,
            container=cmd.container,
        ),
    )
    if plan.nodes == 1:
        return head
    assert members is not None
    others = [
        members.member(
            MemberStart(
                rank=r,
                nodes=plan.nodes,
                arm=arm,
                engine_seed=s.engine_seed,
                experiment=s.experiment,
                boot_id=s.boot_id,
                token=token,
                master_addr=addr,
                master_port=port,
                stop_grace_s=s.stop_grace_s,
                extra_args=s.extra_args,
                image_id=s.image_id,
            )
        )
        for r in range(1, plan.nodes)
    ]
    return GangServer(head, others)
