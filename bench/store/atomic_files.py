"""Files readers never see half-written: a finished temporary file beside the target, then
renamed over it (`atomic_write_bytes`, `atomic_write_json`) or hard-linked to a name that
must not exist yet (`create_exclusive`, the writer claim's primitive)."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any


def _finished_temp(path: Path, data: bytes) -> Path:
    """`data` in a new temp file beside `path`, flushed to disk. Mode 0666 so the process
    umask applies as for any file (mkstemp's 0600 would make shared results unreadable to
    the team)."""
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write via a temp file in the same directory and rename, so readers never see half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _finished_temp(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(
        path, (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode()
    )


def create_exclusive(path: Path, data: bytes) -> None:
    """Create `path` with its whole content at once, or raise FileExistsError: a finished
    temp file hard-linked to the name (`link` fails when it exists; atomic on NFS too)."""
    tmp = _finished_temp(path, data)
    try:
        os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
