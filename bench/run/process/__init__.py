"""One node's processes of a boot, and nothing outlives them: the process tree of one member
(`member_process`: own session, a log file, SIGTERM -> grace -> SIGKILL, a /proc check),
the start/stop contract, plan and watch every such process shares (`lifecycle`),
what /proc says (`procfs`), whether a member's container is gone after its stop
(`container_gone`), the API server with its free port and /health deadline
(`api_server`), a gang of members across nodes (`gang`), which server object a boot runs
(`server_for_boot`), the root cause of a failed server read from its log (`root_cause`),
and the detached stdlib-only watchdog that kills a boot's groups when its owner dies
(`reaper`, run as a script by its file path)."""

from bench.run.process.api_server import NOT_HEALTHY, ServerProcess, free_port
from bench.run.process.container_gone import (
    container_exists,
    forget_lingering,
    lingering_containers,
    memory_held,
)
from bench.run.process.gang import GangServer, MemberStart, exit_problem, start_member
from bench.run.process.lifecycle import Watch
from bench.run.process.member_process import (
    CAUSE_LINES,
    LINGER_LIMIT_S,
    MemberProcess,
    TreeSettings,
)
from bench.run.process.procfs import descendants, group_members, log_tail
from bench.run.process.reaper import BootGuard, clean_up, kill_groups, read_recorded
from bench.run.process.root_cause import cause_context, exception_line, root_cause, summarize_tail
from bench.run.process.server_for_boot import LocalMembers, MemberLauncher, ServerSetup, make_server

__all__ = [
    "CAUSE_LINES", "LINGER_LIMIT_S", "NOT_HEALTHY", "BootGuard", "GangServer", "LocalMembers",
    "MemberLauncher", "MemberProcess", "MemberStart", "ServerProcess", "ServerSetup",
    "TreeSettings", "Watch", "cause_context", "clean_up",
    "container_exists", "descendants", "exception_line", "exit_problem", "forget_lingering",
    "free_port", "group_members", "kill_groups", "lingering_containers", "log_tail",
    "make_server", "memory_held", "read_recorded", "root_cause", "start_member",
    "summarize_tail",
]  # fmt: skip
