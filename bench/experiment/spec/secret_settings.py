"""Secrets a server needs: which settings are secret, their redacted form, and how they reach
the server without touching a command line or a file specab writes.

Which names are secret (the one rule; docs/arms.md says it to users):
- an `env` name containing KEY, TOKEN, SECRET or PASSWORD anywhere (`HF_TOKEN`,
  `VLLM_API_KEY`, `AWS_SECRET_ACCESS_KEY`, `PGPASSWORD`; also `TOKENIZERS_PARALLELISM`:
  redacting a harmless value costs only its visibility, and this rule is what every stored
  definition hash was computed with);
- an `args` flag whose last word ends in key, token, secret, password or passwd
  (`api-key`, `hf-token`): flags are matched by their last word because vLLM has many
  harmless ones that contain those letters (`max-num-batched-tokens`, `tokenizer`,
  `ssl-keyfile`, a path).

A stored log and a failed boot's error are scrubbed of the values of the names the flag rule
calls secret (env names too: `HF_TOKEN`, `VLLM_API_KEY`), 8 characters or longer, so that a
harmless value ("false", "2048") under a broadly matched name is not cut out of a message.

A secret flag never reaches a command line (`ps` shows it to every user of a node, and the
boot log records the command): vLLM reads `--api-key` from `VLLM_API_KEY` and the hub reads
`--hf-token` from `HF_TOKEN`, so the plan moves them there; any other secret flag is refused
before anything starts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TypeVar

from bench.errors import SpecabError

_SECRET_ENV_RE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
_SECRET_WORDS = ("key", "token", "secret", "password", "passwd")
REDACTED = "<redacted>"
# secret flag -> the variable its program reads instead (vLLM's middleware; the hub client)
SECRET_FLAG_ENV = {"api-key": "VLLM_API_KEY", "hf-token": "HF_TOKEN"}
API_KEY_ENV = "VLLM_API_KEY"
_MIN_SCRUB = 8  # shorter values ("1", "false") would scrub ordinary words out of a log

V = TypeVar("V")


def is_secret_env(name: str) -> bool:
    """An environment variable whose value specab never stores or prints."""
    return bool(_SECRET_ENV_RE.search(name))


def is_secret_flag(flag: str) -> bool:
    """A server flag (as written in `args`, '-' or '_') whose value is a secret: its last
    word ends in key, token, secret, password or passwd."""
    words = [w for w in re.split(r"[-_.]+", flag.strip().lstrip("-").lower()) if w]
    return bool(words) and words[-1].endswith(_SECRET_WORDS)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Copy of `env` with the values of secret names redacted."""
    return {k: (REDACTED if is_secret_env(k) else v) for k, v in env.items()}


def redact_args(args: Mapping[str, V]) -> dict[str, V | str]:
    """Copy of `args` with the values of secret flags redacted (a bare `true` flag carries
    no secret and stays)."""
    return {
        k: (REDACTED if is_secret_flag(k) and not isinstance(v, bool) and v is not None else v)
        for k, v in args.items()
    }


def secret_flag_env(flag: str) -> str | None:
    """The variable that carries secret `flag` instead of the command line (None: none)."""
    return SECRET_FLAG_ENV.get(flag.strip().lstrip("-").replace("_", "-").lower())


def secret_values(env: Mapping[str, str], args: Mapping[str, object] = {}) -> tuple[str, ...]:
    """The secret values a server is given, longest first (what a stored log and an error
    line are scrubbed of)."""
    found = {v for k, v in env.items() if is_secret_flag(k)}
    found |= {
        str(v)
        for k, v in args.items()
        if is_secret_flag(k) and not isinstance(v, bool) and v is not None
    }
    return tuple(sorted((v for v in found if len(v) >= _MIN_SCRUB), key=len, reverse=True))


def scrub(text: str, values: Iterable[str]) -> str:
    """`text` with every occurrence of each secret value replaced by REDACTED."""
    for value in values:
        if value:
            text = text.replace(value, REDACTED)
    return text


def refuse_secret_flag(flag: str, value: object, *, file: object, field: str) -> None:
    """SpecabError for a secret flag that only a command line could carry (no variable of
    its program reads it instead)."""
    if isinstance(value, bool) or value is None or not is_secret_flag(flag):
        return
    if secret_flag_env(flag) is None:
        raise SpecabError(
            f"flag {flag!r} holds a secret, and specab puts no secret on a command line "
            "(every user of the node sees it in `ps`, and the boot log records the command)",
            file=str(file),
            field=field,
            fix="remove it and set, in env, the variable the server reads that secret from",
        )


def auth_headers(env: Mapping[str, str]) -> dict[str, str]:
    """The header a client sends to a server started with `env`: vLLM requires
    `Authorization: Bearer KEY` on /v1 when VLLM_API_KEY is set (a key in `--api-key` is
    moved there by the launch plan)."""
    key = env.get(API_KEY_ENV, "")
    return {"Authorization": f"Bearer {key}"} if key else {}


__all__ = [
    "API_KEY_ENV",
    "REDACTED",
    "SECRET_FLAG_ENV",
    "auth_headers",
    "is_secret_env",
    "is_secret_flag",
    "redact_args",
    "redact_env",
    "refuse_secret_flag",
    "scrub",
    "secret_flag_env",
    "secret_values",
]  # fmt: skip
