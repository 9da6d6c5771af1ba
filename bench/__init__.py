"""specab: multi-boot A/B benchmarks of speculative-decoding acceptance."""

import contextlib
import ctypes
import importlib
import sys
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("specab")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+src"


def lazy_attribute(package: str, where: Mapping[str, str], name: str) -> Any:
    """What a package face's `__getattr__` (PEP 562) returns: `name` from its module, imported
    on first use (`where`: name -> module). Every name of that module is bound in the face at
    once: importing a module also binds it in its package under its own name, which a name
    of the same spelling (`status_view`) must override."""
    if name not in where:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    module = importlib.import_module(where[name])
    face = sys.modules[package]
    for other, at in where.items():
        if at == where[name]:
            setattr(face, other, getattr(module, other))
    return getattr(face, name)


def release_freed_memory() -> None:
    """Give the pages of freed arrays back to the OS now (glibc's `malloc_trim`; elsewhere
    nothing). glibc keeps freed blocks below its mmap threshold, which rises as large blocks
    are freed, in the heap: after loading 10^6 probe rows and building the cells from them,
    `analyze --json` held 25 MB it no longer used when the resampling began."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


__all__ = ["__version__", "lazy_attribute", "release_freed_memory"]
