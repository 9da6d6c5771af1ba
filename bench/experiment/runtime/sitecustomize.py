"""specab patch runtime entry point (generated patch directory, first on PYTHONPATH).

Python imports `sitecustomize` at start-up in every interpreter that sees this PYTHONPATH,
so this runs in the API server and in every spawned engine-core / worker process. It first
runs the sitecustomize this one shadows (the next one on sys.path), then the arm's patches.
Stdlib only: it runs under whatever interpreter serves the arm.
"""

import os
import sys


def _chain_previous(here):
    import importlib.machinery
    import importlib.util

    def _norm(p):
        return os.path.realpath(os.path.abspath(p or os.getcwd()))

    rest = [p for p in sys.path if _norm(p) != _norm(here)]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["_specab_chained_sitecustomize"] = module
    spec.loader.exec_module(module)


def _main():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        _chain_previous(here)
    except Exception as exc:  # the shadowed sitecustomize failing must not hide our patches
        sys.stderr.write(f"specab: chained sitecustomize failed: {type(exc).__name__}: {exc}\n")
    if here not in sys.path:
        sys.path.insert(0, here)
    import specab_patch

    specab_patch.run_patches(here)


_main()
