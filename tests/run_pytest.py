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
`node id <TAB> wall s <TAB> the machine's busy CPU-s`. The machine's, from /proc/stat: a
count over this process's tree does not see Ray's workers and the servers they start, whose
time never reaches this process. It is the test's own cost when its lane runs alone
(`benchmarks/bench_lanes.py`); under `make test` it holds the other lanes' work too, and
only the wall is the test's.
"""

import os
import sys
import time
from pathlib import Path


def _busy_cpu_seconds() -> float:
    """The machine's busy CPU-s so far: user, nice, system, irq, softirq and steal."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # less idle, iowait


class TestCost:
    """Each test's wall and the machine's CPU over it, one line each, appended to `path`."""

    def __init__(self, path: str) -> None:
        self.path = path

    def pytest_runtest_protocol(self, item, nextitem):  # type: ignore[no-untyped-def]
        self.start = (time.monotonic(), _busy_cpu_seconds())

    def pytest_runtest_logfinish(self, nodeid, location):  # type: ignore[no-untyped-def]
        wall = time.monotonic() - self.start[0]
        cpu = _busy_cpu_seconds() - self.start[1]
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
