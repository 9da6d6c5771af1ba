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
import functools
import hashlib
import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.errors import SpecabError
from bench.experiment.history import load_experiment
from bench.experiment.launch import (
    ResolvedArm,
    interpreter_env,
    launch_plan,
    resolve_arm,
    vllm_package_dir,
)
from bench.experiment.preflight.engine_config import EngineLine, engine_line, engine_refusal
from bench.experiment.preflight.gpu_accounting import check_gpus
from bench.experiment.spec import Experiment

SCRIPT = Path(__file__).with_name("parse_with_vllm.py")
CACHE_ENV = "SPECAB_CACHE_DIR"
TIMEOUT_S = 300
Answer = dict[str, Any]  # message (None: accepted), version, parallel (the sizes vLLM parsed)


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


@functools.cache
def _script_stamp() -> str:
    """The checking script's own hash: a specab that checks differently asks again."""
    return hashlib.sha256(SCRIPT.read_bytes()).hexdigest()[:16]


def _key(python: str, build: str, argv: Sequence[str]) -> str:
    body = [python, build, list(argv), _script_stamp()]
    return hashlib.sha256(json.dumps(body).encode()).hexdigest()


def _cached(key: str) -> Answer | None:
    try:
        body = json.loads((cache_dir() / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return body if isinstance(body, dict) and "message" in body else None


def _store(key: str, answer: Answer) -> None:
    try:
        d = cache_dir()
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(answer), encoding="utf-8")
        os.replace(tmp, d / f"{key}.json")
    except OSError:
        pass  # a read-only home: the check still ran, only its answer is not kept


def _parse(
    python: str,
    pythonpath: str,
    argvs: list[list[str]],
    warm: list[list[str]],
    engine: Sequence[EngineLine] = (),
) -> tuple[list[Answer], list[Answer | None]]:
    """vLLM's answers for `argvs` ([] when this build has no parser specab can read) and for
    the `engine` checks (None: not checked); the same import then fills vLLM's model-info
    cache for the `warm` lines (real paths)."""
    request = {"argvs": argvs, "warm": warm, "engine": [e.request() for e in engine]}
    try:
        out = subprocess.run(
            [python, str(SCRIPT)],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env=interpreter_env(pythonpath),
            cwd="/",
        )
        lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return [], [None] * len(engine)
    body = next((x for x in lines if isinstance(x, dict) and "parser" in x), {})
    if not body.get("parser"):
        return [], [None] * len(engine)
    version = str(body.get("version"))
    found: list[str | None] = next(
        (x["engine"] for x in lines if isinstance(x, dict) and "engine" in x), []
    )
    checked: list[str | None] = (list(found) + [""] * len(engine))[: len(engine)]
    # "" (not checkable here: another kind of error, out of time) is kept as no refusal, so
    # the next validate does not import vLLM again for it; the boot tells
    engine_answers: list[Answer | None] = [
        {"message": m or None, "version": version} for m in checked
    ]
    parallel = list(body.get("parallel") or []) + [None] * len(body["results"])
    answers: list[Answer] = [
        {"message": m, "version": version, **({"parallel": p} if p else {})}
        for m, p in zip(body["results"], parallel, strict=False)
    ]
    return answers, engine_answers


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
    python: str,
    pythonpath: str,
    build: str,
    lines: list[tuple[list[str], list[str]]],
    engine: Sequence[EngineLine] = (),
) -> tuple[list[Answer | None], list[Answer | None]]:
    """One parser answer per (shape, real argv) and one engine answer per engine line
    (None: not checkable here), from the cache or one vLLM import, which also warms vLLM's
    model-info cache for the lines it parses."""
    keys = [_key(python, build, shape) for shape, _ in lines]
    ekeys = [_key(python, build, ["engine", e.key]) for e in engine]
    known = {k: _cached(k) for k in [*keys, *ekeys]}
    if all(known.values()):
        return [known[k] for k in keys], [known[k] for k in ekeys]
    with _one_import_at_a_time(python, build):
        known = {k: v or _cached(k) for k, v in known.items()}  # another process may have
        todo = {k: shape for k, (shape, _) in zip(keys, lines, strict=True) if known[k] is None}
        etodo = [(k, e) for k, e in zip(ekeys, engine, strict=True) if known[k] is None]
        if todo or etodo:
            warm = [argv for k, (_, argv) in zip(keys, lines, strict=True) if k in todo]
            answers, checked = _parse(
                python, pythonpath, list(todo.values()), warm, [e for _, e in etodo]
            )
            for k, answer in [
                *zip(todo, answers, strict=False),
                *zip((k for k, _ in etodo), checked, strict=True),
            ]:
                known[k] = answer
                if answer is not None:
                    _store(k, answer)
    return [known[k] for k in keys], [known[k] for k in ekeys]


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


# per interpreter: each arm with its command line's shape, the line itself and its engine
# check (None: not run here)
Groups = dict[tuple[str, str], list[tuple[ResolvedArm, list[str], list[str], EngineLine | None]]]


def _group(
    arms: Sequence[ResolvedArm], environ: Mapping[str, str], groups: Groups, *, engine: bool
) -> list[str]:
    """Add each host arm's command-line shape (and, with `engine`, its engine check) to its
    interpreter's group; the container arms' lines (checked when they boot)."""
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
        line = engine_line(arm, plan, scratch) if engine else None
        groups.setdefault((arm.python, arm.env.get("PYTHONPATH", "")), []).append(
            (arm, _shape(plan.server_args), plan.server_args, line)
        )
    return later


def prime_server_args(files: Sequence[Path], environ: Mapping[str, str]) -> int:
    """Parse and engine-check the host arms' command lines of several experiment files in one
    vLLM import per interpreter, into the cache `check_server_args` reads (the test suite
    primes it with the shipped experiments). A file that does not load or resolve is skipped:
    its own check names the mistake. Returns how many arms' command lines were answered."""
    groups: Groups = {}
    for f in files:
        try:
            spec = load_experiment(f)
            arms = [resolve_arm(spec, f, a.name) for a in spec.arms]
            _group(arms, environ, groups, engine=True)
        except SpecabError:
            continue
    return sum(1 for _ in _answered(groups))


def _answered(
    groups: Groups,
) -> Iterator[tuple[ResolvedArm, Answer | None, Answer | None]]:
    """Each grouped arm with its parser and engine answers, one vLLM import per interpreter
    for what the cache lacks (an interpreter without vLLM: none; the interpreter check names
    it)."""
    for (python, pythonpath), items in groups.items():
        pkg = vllm_package_dir(python, pythonpath)
        if pkg is None:
            continue
        lines = [(shape, argv) for _, shape, argv, _ in items]
        engine = [e for *_, e in items if e is not None]
        answers, checked = _answers(python, pythonpath, build_id(pkg), lines, engine)
        by_arm = {e.arm: a for e, a in zip(engine, checked, strict=True)}
        for (arm, *_), answer in zip(items, answers, strict=True):
            yield arm, answer, by_arm.get(arm.name)


def check_server_args(
    spec: Experiment,
    spec_file: Path,
    arms: Sequence[ResolvedArm],
    environ: Mapping[str, str],
    *,
    cluster: bool = False,
) -> tuple[str, ...]:
    """Refuse the first arm whose command line its vLLM refuses, then the first whose engine
    configuration it refuses (`engine_config`: not with `cluster`, whose nodes decide); the
    arms it could not check here, one line each (containers, engine refusals a patch may
    lift)."""
    groups: Groups = {}
    later = _group(arms, environ, groups, engine=not cluster)
    answered = list(_answered(groups))
    for arm, answer, _ in answered:
        if answer and answer.get("message"):
            raise SpecabError(
                f"vLLM {answer.get('version')} ({arm.python}) refuses the server's command "
                f"line: {answer['message']}",
                file=spec_file,
                field=_field(spec, arm.name, str(answer["message"])),
                fix="use a flag and value this vLLM accepts (its `--help` lists them), or "
                "an interpreter whose vLLM has it (`python =`)",
            )
    for arm, answer, _ in answered:
        if answer and isinstance(answer.get("parallel"), dict):
            check_gpus(spec, spec_file, arm, answer["parallel"])
    for arm, _, checked in answered:
        if checked and checked.get("message"):
            msg, version = str(checked["message"]), str(checked.get("version"))
            warning = engine_refusal(spec, spec_file, arm, msg, version)
            later += [warning] if warning else []
    return tuple(later)
