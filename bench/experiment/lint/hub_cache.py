"""Find a hub model's config.json in the local Hugging Face cache, as huggingface_hub does.

Lint never downloads: a hub id is read from the cache the server would use (the arm's env
over the caller's), `<cache>/models--ORG--NAME/snapshots/<commit>/config.json` with the
commit named by `refs/<revision>` (default `main`). huggingface_hub's own
`try_to_load_from_cache` does the lookup where it is installed (it comes with vLLM); a
stdlib copy of that layout serves a driver without it (tests check both agree).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

CONFIG = "config.json"
# ORG/NAME or NAME: what huggingface_hub accepts as a model id
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")


def is_hub_id(value: str) -> bool:
    return bool(_HUB_ID.match(value)) and ".." not in value and "--" not in value


def hub_cache_dir(environ: Mapping[str, str]) -> Path:
    """HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else HF_HOME/hub, else
    $XDG_CACHE_HOME (or ~/.cache)/huggingface/hub: huggingface_hub's order, read from
    `environ` at call time (huggingface_hub reads its constants once, at import)."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if name in environ:
            return Path(environ[name]).expanduser()
    home = environ.get("HF_HOME")
    if home is None:
        home = os.path.join(environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def _stdlib_lookup(cache: Path, repo_id: str, revision: str) -> Path | None:
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    ref = repo / "refs" / revision
    commit = ref.read_text(encoding="utf-8").strip() if ref.is_file() else revision
    found = repo / "snapshots" / commit / CONFIG
    return found if found.is_file() else None


def cached_config(
    repo_id: str, environ: Mapping[str, str], *, revision: str | None = None, use_hub: bool = True
) -> Path | None:
    """The cached config.json of `repo_id`, or None when it is not in the cache."""
    cache = hub_cache_dir(environ)
    rev = revision or "main"
    if use_hub:
        try:
            from huggingface_hub import try_to_load_from_cache
        except ImportError:  # a driver venv without vLLM: same layout, read directly
            use_hub = False
    if not use_hub:
        return _stdlib_lookup(cache, repo_id, rev)
    try:
        found = try_to_load_from_cache(repo_id, CONFIG, cache_dir=cache, revision=rev)
    except ValueError:  # huggingface_hub's HFValidationError: not a valid repo id
        return None
    return Path(found) if isinstance(found, str) else None
