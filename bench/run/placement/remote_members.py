"""Gang members on other nodes: one Ray actor per member, in its bundle of the boot's
placement group, owning the member's process tree on its node.

The actor does on its node what the boot task does on the head's: node preparation
(pre_boot, memory wait), the launch plan on its own disk, the member process under its own
`BootGuard` watchdog (the head task owns the actors, so when that task's worker dies Ray
kills the actors, and each watchdog kills its member's groups and containers), the patch
check of its model workers, the stop, and its log (shipped back when the node does not
share the driver's results directory). A container member's node must hold the head's image."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace
from typing import Any

from bench.errors import BootFailed, SpecabError
from bench.experiment import LaunchPlan, check_patches_applied
from bench.run.boot import image_problem, prepare_node
from bench.run.node import (
    NodeAsk,
    NodeEnvironment,
    fabric_ip,
    member_log_name,
    node_environment,
)
from bench.run.process import (
    LINGER_LIMIT_S,
    BootGuard,
    MemberProcess,
    MemberStart,
    exit_problem,
    start_member,
)

RAY_TIMEOUT_S = 120.0  # a call to a live actor answers in well under this


@dataclass(frozen=True)
class MemberNode:
    """Node-side settings of a remote member (picklable)."""

    label: str  # the node's label in this run (errors, record)
    ask: NodeAsk  # what the member asks of its node (`bench.run.node`)
    pre_boot: tuple[str, ...] = ()
    min_free_memory_gb: float | None = None
    memory_wait_s: float = 300.0


def _one_line(exc: Exception) -> str:
    if isinstance(exc, BootFailed):
        return " ".join(exc.reason.strip().splitlines()[0].split()) if exc.reason else "failed"
    return f"{type(exc).__name__}: {exc}"


class MemberActor:
    """The body of the Ray actor (see `_actor_class`)."""

    def __init__(self) -> None:
        self._proc: MemberProcess | None = None
        self._plan: LaunchPlan | None = None
        self._guard: BootGuard | None = None
        self._node: NodeEnvironment | None = None
        self._launch: MemberStart | None = None

    def prepare(self, ms: MemberStart, node: MemberNode) -> str | None:
        """Prepare the node (log, scratch, watchdog, pre_boot, memory wait); why it could
        not, else None. Nothing of the member runs yet: every node of the gang is prepared
        before the head or any member launches."""
        import ray

        if (wrong := image_problem(ms.arm.container, node.label, ms.image_id)) is not None:
            return wrong
        try:
            env = node_environment(node.ask, str(ray.get_runtime_context().get_node_id()))
            self._node = env
            self._guard = BootGuard(env.guard_file(f"{ms.boot_id}.m{ms.rank}"), grace_s=5.0)
            self._guard.__enter__()
            prepare_node(
                node.pre_boot, node.min_free_memory_gb, env.log_file, wait_s=node.memory_wait_s
            )
        except (BootFailed, OSError, SpecabError) as exc:
            return _one_line(exc)
        self._launch = ms
        return None

    def launch(self) -> str | None:
        """Start the member on the prepared node; why it could not, else None."""
        ms, node = self._launch, self._node
        if ms is None or node is None:
            return "its node was not prepared"
        try:
            self._proc, self._plan = start_member(
                ms,
                workdir=node.workdir,
                log=node.log_file,
                environ={**os.environ, **node.server_env},
                node_ip=fabric_ip(),
                watch=self._guard,
            )
        except (BootFailed, OSError, SpecabError) as exc:
            return _one_line(exc)
        return None

    def poll(self) -> tuple[int | None, list[str]]:
        rc = self._proc.poll() if self._proc is not None else None
        return rc, (self._proc.tail() if rc is not None and self._proc is not None else [])

    def after_ready(self) -> None:
        if self._proc is not None:
            self._proc.remember_descendants()

    def check_patches(self) -> tuple[str | None, tuple[str, ...]]:
        if self._plan is None:
            return None, ()
        try:
            return None, check_patches_applied(self._plan)
        except BootFailed as exc:
            return _one_line(exc), ()

    def stop(self) -> tuple[str | None, tuple[str, ...]]:
        """Stop the member (SIGTERM, grace, SIGKILL, container removed): (survivors or
        None, what outlived SIGKILL for a while before it went)."""
        if self._proc is None:
            return None, ()
        try:
            self._proc.stop()
        except BootFailed as exc:
            return _one_line(exc), ()
        return None, self._proc.lingering()

    def log_bytes(self) -> bytes | None:
        """The member's log, when it was not written into the driver's results dir."""
        return self._node.shipped_log() if self._node is not None else None

    def close(self) -> None:
        """The boot is over: release the watchdog (nothing left to kill) and scratch."""
        if self._guard is not None:
            self._guard.__exit__(None, None, None)
            self._guard = None
        if self._node is not None:
            self._node.release()


@functools.lru_cache(maxsize=1)
def _actor_class() -> Any:
    import ray

    return ray.remote(max_restarts=0, max_task_retries=0)(MemberActor)


class RemoteMember:
    """A `MemberHandle` for member `ms.rank`, run by an actor in bundle `rank` of the boot's
    placement group (the head task's own bundle is 0)."""

    def __init__(self, ms: MemberStart, node: MemberNode, pg: Any, options: dict[str, Any]):
        self.rank, self.label = ms.rank, node.label
        self._ms, self._node, self._pg, self._options = ms, node, pg, options
        self._actor: Any = None
        self._prep: Any = None
        self._start: Any = None
        self._stopping: Any = None
        self.log: bytes | None = None  # shipped after the stop
        self._lingered: tuple[str, ...] = ()

    def _who(self) -> str:
        return f"gang member {self.rank} (node {self.label})"

    def begin_prepare(self) -> None:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        strategy = PlacementGroupSchedulingStrategy(
            placement_group=self._pg, placement_group_bundle_index=self.rank
        )
        cls = _actor_class().options(**self._options, scheduling_strategy=strategy)
        self._actor = cls.remote()
        self._prep = self._actor.prepare.remote(self._ms, self._node)

    def prepared(self) -> None:
        """Wait for the node's preparation (pre_boot commands, then the memory wait, each
        bounded by memory_wait_s); BootFailed naming the member if it failed or hung."""
        import ray
        from ray.exceptions import GetTimeoutError, RayError

        if self._prep is None:
            return
        wait = self._node.memory_wait_s * (len(self._node.pre_boot) + 1) + RAY_TIMEOUT_S
        try:
            err = ray.get(self._prep, timeout=wait)
        except GetTimeoutError:
            err = f"its node was not prepared within {wait:.0f} s"
        except RayError as exc:  # the actor, its worker or its node died
            err = f"lost: {type(exc).__name__}: {str(exc).strip()[:200]}"
        if err is not None:
            raise BootFailed(f"{self._who()} could not prepare its node: {err}")

    def begin(self) -> None:
        if self._actor is None:
            self.begin_prepare()
        self._start = self._actor.launch.remote()

    def problem(self) -> str | None:
        import ray
        from ray.exceptions import RayError

        if self._start is None:
            return None
        try:
            done, _ = ray.wait([self._start], timeout=0)
            if not done:
                return None  # still starting
            if (err := ray.get(self._start)) is not None:
                return f"{self._who()} could not start: {err}"
            rc, tail = ray.get(self._actor.poll.remote(), timeout=RAY_TIMEOUT_S)
        except RayError as exc:  # the actor, its worker or its node died
            return f"{self._who()} lost: {type(exc).__name__}: {str(exc).strip()[:200]}"
        return None if rc is None else exit_problem(self._who(), rc, tail)

    def after_ready(self) -> None:
        import ray

        ray.get(self._actor.after_ready.remote(), timeout=RAY_TIMEOUT_S)

    def check_patches(self) -> tuple[str, ...]:
        import ray

        err, noops = ray.get(self._actor.check_patches.remote(), timeout=RAY_TIMEOUT_S)
        if err is not None:
            raise BootFailed(f"{self._who()}: {err}")
        return tuple(noops)

    def begin_stop(self) -> None:
        if self._actor is not None and self._stopping is None:
            self._stopping = self._actor.stop.remote()

    def finish_stop(self) -> None:
        """Wait for the actor's stop, fetch the log, release and end the actor."""
        import ray
        from ray.exceptions import RayError

        if self._actor is None:
            return
        actor, self._actor = self._actor, None
        err = None
        try:
            # queued behind a preparation still running: allow for that wait too
            prep = self._node.memory_wait_s * (len(self._node.pre_boot) + 1)
            wait = self._ms.stop_grace_s + prep + LINGER_LIMIT_S + RAY_TIMEOUT_S
            err, lingered = ray.get(self._stopping, timeout=wait)
            self._lingered = tuple(f"{self._who()}: {w}" for w in lingered)
            self.log = ray.get(actor.log_bytes.remote(), timeout=RAY_TIMEOUT_S)
            ray.get(actor.close.remote(), timeout=RAY_TIMEOUT_S)
        except RayError:
            pass  # the actor died: its watchdog killed what it had started
        finally:
            ray.kill(actor, no_restart=True)
        if err is not None:
            raise BootFailed(f"{self._who()}: {err}")

    def lingering(self) -> tuple[str, ...]:
        return self._lingered

    def retarget(self, master_port: int) -> None:
        """Stopped (its actor ended): the next `begin` prepares a new actor that joins the
        rendezvous on `master_port`."""
        self._ms = replace(self._ms, master_port=master_port)
        self._prep = self._start = self._stopping = None


class RayMembers:
    """Starts the non-head members of a gang boot inside the placement group the head task
    runs in (bundle r = member r), with the per-node resources of `options`."""

    def __init__(self, nodes: list[MemberNode], options: dict[str, Any]) -> None:
        from ray.util import get_current_placement_group

        self._pg = get_current_placement_group()
        if self._pg is None:
            raise RuntimeError("a gang boot's task must run in its placement group")
        self._nodes = nodes  # index r - 1 = member r
        self._options = options
        self.started: list[RemoteMember] = []

    def head_ip(self) -> str:
        return fabric_ip()

    def member(self, ms: MemberStart) -> RemoteMember:
        m = RemoteMember(ms, self._nodes[ms.rank - 1], self._pg, self._options)
        self.started.append(m)
        return m

    def shipped_logs(self, boot_id: str) -> dict[str, bytes]:
        """{file name: bytes} of member logs written away from the driver's results dir."""
        return {member_log_name(boot_id, m.rank): m.log for m in self.started if m.log is not None}
