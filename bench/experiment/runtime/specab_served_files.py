"""Data files a diff patch changes beside vLLM's modules (a tuned JSON config, a chat
template), served to every server process. Copied into the patch directory with
`specab_patch.py`; stdlib only.

vLLM finds such files by path next to its modules (`os.path.dirname(__file__)`), so they
cannot be served through the import system as modules are. Instead, for exactly the build
paths a diff changes, reading them opens the patched copy, and a deleted (or renamed away)
file is absent: `open` raises FileNotFoundError and `os.path.exists`/`isfile` say False; an
added one exists. Every other path, and every write, goes to the real functions untouched.
Files read through `os.stat` or `os.listdir` directly are not redirected.
"""

import builtins
import errno
import hashlib
import importlib.util
import io
import os

_served = {}  # absolute build path -> patched copy's path, or None (deleted)
_real = {"open": builtins.open, "exists": os.path.exists, "isfile": os.path.isfile}


def build_root():
    """The directory holding the `vllm` package this interpreter would import (not imported
    here), or None."""
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    locations = getattr(spec, "submodule_search_locations", None) if spec else None
    return os.path.dirname(next(iter(locations))) if locations else None


def _sha256(path):
    try:
        with _real["open"](path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def serve(root, path, patched, original_sha256):
    """Serve `patched` (None: deleted) for the repository path `path` (vllm/...) under
    `root`; returns an error text when the build's file is not the one the diff was made
    against, and serves nothing then."""
    target = os.path.join(root, *path.split("/"))
    have = _sha256(target)
    if have != original_sha256:
        return (
            f"{path} here ({target}) is not the file the diff was applied to (sha256 "
            f"{str(have)[:12]}, expected {str(original_sha256)[:12]}): another vLLM build"
        )
    for key in {os.path.abspath(target), os.path.realpath(target)}:
        _served[key] = patched
    _install()
    return None


def _lookup(file):
    """(True, served path or None) for a path this process serves; (False, None) otherwise."""
    if isinstance(file, int) or not _served:
        return False, None
    try:
        key = os.path.abspath(os.fspath(file))
    except (TypeError, ValueError):
        return False, None
    if key in _served:
        return True, _served[key]
    return False, None


def _open(file, mode="r", *args, **kwargs):
    served, patched = _lookup(file)
    if served and not any(c in str(mode) for c in "wax+"):
        if patched is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), os.fspath(file))
        file = patched
    return _real["open"](file, mode, *args, **kwargs)


def _exists(path):
    served, patched = _lookup(path)
    return patched is not None if served else _real["exists"](path)


def _isfile(path):
    served, patched = _lookup(path)
    return patched is not None if served else _real["isfile"](path)


def _install():
    if builtins.open is _open:
        return
    builtins.open = _open
    io.open = _open  # pathlib's read_text and open go through io.open
    os.path.exists = _exists
    os.path.isfile = _isfile
