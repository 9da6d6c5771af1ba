"""Every arm's server command line, parsed by the arm's own vLLM before anything is written.

The arm's interpreter (with the arm's PYTHONPATH, no patches) runs `parse_with_vllm.py`:
vLLM's own `serve` parser and its pre-load checks, once per interpreter for all the command
lines not seen before. Answers are cached by the interpreter, the vLLM build (its package
path, distribution and `__init__.py` stamp) and the arguments (model paths aside), so a repeated
`validate` or `run-ab` costs nothing and a new shape costs one vLLM import (≈ 5-10 s on a
2-core machine), which also fills vLLM's model-info cache for those lines so that the first
boots need not inspect their architectures (parse_with_vllm.py). A refusal is one line
naming the experiment file, the arm or sweep cell, its `args` field and vLLM's own message.
A container arm's vLLM is inside its image: its command line is parsed when it boots
(validate says so).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from bench.errors import SpecabError
from bench.experiment.launch import (
    ResolvedArm,
    interpreter_env,
    launch_plan,
    resolve_arm,
    vllm_package_dir,
)
from bench.experiment.spec import Experiment, load_spec

SCRIPT = Path(__file__).with_name("parse_with_vllm.py")
CACHE_ENV = "SPECAB_CACHE_DIR"
TIMEOUT_S = 300


def cache_dir() -> Path:
    """`SPECAB_CACHE_DIR`, else `$XDG_CACHE_HOME/specab`, else `~/.cache/specab`."""
    base = os.environ.get(CACHE_ENV) or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specab"
    )
    return Path(base) / "vllm-args"


def build_id(pkg: Path) -> str:
    """The vLLM build at `pkg`: its path, the distributions beside it and its stamp."""
    dists = sorted(p.name for p in pkg.parent.glob("vllm*.dist-info"))
    try:
        stamp = (pkg / "__init__.py").stat().st_mtime_ns
    except OSError:
        stamp = 0
    return json.dumps([str(pkg), dists, stamp])


def _key(python: str, build: str, argv: Sequence[str]) -> str:
    return hashlib.sha256(json.dumps([python, build, list(argv)]).encode()).hexdigest()


def _cached(key: str) -> dict[str, str | None] | None:
    try:
        body = json.loads((cache_dir() / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return body if isinstance(body, dict) and "message" in body else None


def _store(key: str, answer: dict[str, str | None]) -> None:
    try:
        d = cache_dir()
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(answer), encoding="utf-8")
        os.replace(tmp, d / f"{key}.json")
    except OSError:
        pass  # a read-only home: the check still ran, only its answer is not kept


def _parse(
    python: str, pythonpath: str, argvs: list[list[str]], warm: list[list[str]]
) -> list[dict[str, str | None]]:
    """vLLM's answers for `argvs`, or [] when this build has no parser specab can read; the
    same import then fills vLLM's model-info cache for the `warm` lines (real paths)."""
    try:
        out = subprocess.run(
            [python, str(SCRIPT)],
            input=json.dumps({"argvs": argvs, "warm": warm}),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env=interpreter_env(pythonpath),
            cwd="/",
        )
        body = json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return []
    if not body.get("parser"):
        return []
    version = str(body.get("version"))
    return [{"message": m, "version": version} for m in body["results"]]


def _shape(argv: Sequence[str]) -> list[str]:
    """The command line with its model paths as placeholders: the parser reads no file, so
    arms that differ only in where their models live share one answer."""
    out = list(argv)
    for i in range(len(out) - 1):
        if out[i] == "--model":
            out[i + 1] = "MODEL"
        elif out[i] == "--speculative-config":
            cfg = json.loads(out[i + 1])
            if isinstance(cfg, dict) and "model" in cfg:
                cfg["model"] = "DRAFT"
            out[i + 1] = json.dumps(cfg, sort_keys=True)
    return out


@contextlib.contextmanager
def _one_import_at_a_time(python: str, build: str) -> Iterator[None]:
    """Hold this interpreter and build's lock in the cache while its vLLM parses: two specab
    processes with the same new lines (two runs started together, the suite's lanes) import
    vLLM once, not twice at once, and the second reads the first's answers. Best effort: a
    cache where a lock cannot be taken (read-only, a file system without locks) or one held
    past TIMEOUT_S is used unlocked, as before."""
    lock = cache_dir() / f".{_key(python, build, [])[:16]}.lock"
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            except OSError:
                break
        yield
    finally:
        os.close(fd)  # releases the lock


def _answers(
    python: str, pythonpath: str, build: str, lines: list[tuple[list[str], list[str]]]
) -> list[dict[str, str | None] | None]:
    """One answer per (shape, real argv) (None: not checkable here), from the cache or one
    vLLM import, which also warms vLLM's model-info cache for the lines it parses."""
    keys = [_key(python, build, shape) for shape, _ in lines]
    known = {k: _cached(k) for k in keys}
    if all(known.values()):
        return [known[k] for k in keys]
    with _one_import_at_a_time(python, build):
        known = {k: known[k] or _cached(k) for k in keys}  # another process may have parsed
        todo = {k: shape for k, (shape, _) in zip(keys, lines, strict=True) if known[k] is None}
        if todo:
            warm = [argv for k, (_, argv) in zip(keys, lines, strict=True) if k in todo]
            answers = _parse(python, pythonpath, list(todo.values()), warm)
            for k, answer in zip(todo, answers, strict=False):
                known[k] = answer
                _store(k, answer)
    return [known[k] for k in keys]


def _field(spec: Experiment, arm: str, message: str) -> str:
    """Where the refused flag is set: the sweep's grid, the arm's args or the server's."""
    found = re.search(r"--([A-Za-z0-9][\w-]*)", message)
    flag = found.group(1).replace("_", "-") if found else ""
    if spec.sweep is not None and f"args.{flag}" in spec.sweep.grid:
        return f"sweep.grid.args.{flag} (cell {arm})"
    if flag and flag in spec.arm(arm).args:
        return f"arms({arm}).args.{flag}"
    if flag and flag in spec.server.args:
        return f"server.args.{flag}"
    return f"arms({arm}).args"


# per interpreter: each arm with its command line's shape and the line itself
Groups = dict[tuple[str, str], list[tuple[ResolvedArm, list[str], list[str]]]]


def _group(arms: Sequence[ResolvedArm], environ: Mapping[str, str], groups: Groups) -> list[str]:
    """Add each host arm's command-line shape to its interpreter's group; the container
    arms' lines (checked when they boot)."""
    later: list[str] = []
    scratch = Path(tempfile.gettempdir()) / "specab-preflight"
    for arm in arms:
        if arm.container is not None:
            later.append(
                f"arms({arm.name}).args: vLLM in {arm.container.image} parses the server's "
                "command line when the boot starts (the image is not read from here)"
            )
            continue
        plan = launch_plan(arm, scratch, engine_seed=None, environ=environ, create=False)
        groups.setdefault((arm.python, arm.env.get("PYTHONPATH", "")), []).append(
            (arm, _shape(plan.server_args), plan.server_args)
        )
    return later


def prime_server_args(files: Sequence[Path], environ: Mapping[str, str]) -> int:
    """Parse the host arms' command lines of several experiment files in one vLLM import per
    interpreter, into the cache `check_server_args` reads (the test suite primes it with the
    shipped experiments). A file that does not load or resolve is skipped: its own check
    names the mistake. Returns how many arms' command lines were answered."""
    groups: Groups = {}
    for f in files:
        try:
            spec = load_spec(f)
            _group([resolve_arm(spec, f, a.name) for a in spec.arms], environ, groups)
        except SpecabError:
            continue
    return sum(1 for _ in _answered(groups))


def _answered(groups: Groups) -> Iterator[tuple[ResolvedArm, dict[str, str | None] | None]]:
    """Each grouped arm with its answer, one vLLM import per interpreter for the lines the
    cache lacks (an interpreter without vLLM: none; the interpreter check names it)."""
    for (python, pythonpath), items in groups.items():
        pkg = vllm_package_dir(python, pythonpath)
        if pkg is None:
            continue
        lines = [(shape, argv) for _, shape, argv in items]
        answers = _answers(python, pythonpath, build_id(pkg), lines)
        yield from zip((arm for arm, _, _ in items), answers, strict=True)


def check_server_args(
    spec: Experiment,
    spec_file: Path,
    arms: Sequence[ResolvedArm],
    environ: Mapping[str, str],
) -> tuple[str, ...]:
    """Refuse the first arm whose command line its vLLM refuses; the arms it could not
    check here, one line each (containers)."""
    groups: Groups = {}
    later = _group(arms, environ, groups)
    for arm, answer in _answered(groups):
        if answer and answer.get("message"):
            raise SpecabError(
                f"vLLM {answer.get('version')} ({arm.python}) refuses the server's command "
                f"line: {answer['message']}",
                file=spec_file,
                field=_field(spec, arm.name, str(answer["message"])),
                fix="use a flag and value this vLLM accepts (its `--help` lists them), or "
                "an interpreter whose vLLM has it (`python =`)",
            )
    return tuple(later)
