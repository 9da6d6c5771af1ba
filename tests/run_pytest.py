"""`make test`'s pytest: pytest's own main, then an exit with its status, without the
interpreter's teardown.

Why: the suite's process hosts several Ray sessions one after another (the shared local
instance, the product's own `connect`, the force-cancel test's own), which Ray does not
support cleanly: its native threads can outlive a session (ray-project/ray#31145). On the
project's CI host the suite's process died with SIGSEGV after pytest had printed
"1231 passed", and `make test` failed on exit status 139. The tests' verdict is final by
then; the teardown left to skip frees memory and runs atexit hooks, and the one that
matters here, Ray's shutdown of a local instance still up, is run first. The product's own
processes are not run this way: the tests that start them assert their exit status.

With SPECAB_TEST_COST=FILE it also writes, per test (its setup, call and teardown), a line
`node id <TAB> wall s <TAB> CPU-s of this process's tree`: the CPU of this process and of
every process below it (Ray's daemons and workers, fake and real servers, the test bed's
hosts), alive or reaped by one of them, so a lane's figures hold under load too.
`benchmarks/bench_lanes.py` tabulates them.
"""

import os
import sys
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _tree_cpu_seconds(root: int) -> float:
    """CPU-s of `root` and its descendants: each live one's own time plus what it reaped."""
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue  # gone meanwhile: its time is in its reaper's by the next sample
        fields = stat[stat.rindex(")") + 2 :].split()
        pid = int(proc.name)
        children.setdefault(int(fields[1]), []).append(pid)
        ticks[pid] = sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total / TICK


class TestCost:
    """Each test's wall and process-tree CPU, one line each, appended to `path`."""

    def __init__(self, path: str) -> None:
        self.path = path

    def pytest_runtest_protocol(self, item, nextitem):  # type: ignore[no-untyped-def]
        self.start = (time.monotonic(), _tree_cpu_seconds(os.getpid()))

    def pytest_runtest_logfinish(self, nodeid, location):  # type: ignore[no-untyped-def]
        wall = time.monotonic() - self.start[0]
        cpu = _tree_cpu_seconds(os.getpid()) - self.start[1]
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(f"{nodeid}\t{wall:.2f}\t{cpu:.2f}\n")


if __name__ == "__main__":
    del sys.path[0]  # this script's folder: the tests import through pytest's rootdir only
    import pytest

    cost = os.environ.get("SPECAB_TEST_COST")
    status = int(pytest.main(sys.argv[1:], plugins=[TestCost(cost)] if cost else []))
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()  # a local instance this process started: its processes go with it
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
