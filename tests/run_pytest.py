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
"""

import os
import sys

if __name__ == "__main__":
    del sys.path[0]  # this script's folder: the tests import through pytest's rootdir only
    import pytest

    status = int(pytest.main(sys.argv[1:]))
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()  # a local instance this process started: its processes go with it
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
