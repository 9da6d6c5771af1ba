"""One commit's build for `[bisect] git.build`: the user's command with {commit} and {out}
filled in, run in the repository, once per commit. The first boot that needs a point makes
it, under a lock on the cache (nodes sharing that storage build each commit once); later
boots find it. Its log stays beside it (`<out>.log`). A failed build leaves `<out>.failed`
holding its one line, so every later boot of the point fails at once the same way and the
search skips the point, as `git bisect skip` does; delete the file to build it again.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

from bench.errors import SpecabError
from bench.experiment import Experiment, ResolvedArm, resolve_arm, resolve_path

DONE = ".specab-built"  # written in <out> once the command succeeded and bin/python exists


def commit_build(spec: Experiment, arm: ResolvedArm) -> str | None:
    """Make sure the arm's interpreter, its commit's build, exists: None when it does (or
    the arm is not built from a commit), else the build's failure in one line."""
    git = spec.bisect.git if spec.bisect is not None else None
    if arm.built_from is None or git is None or git.build is None:
        return None
    repo = resolve_path(arm.spec_file, git.repo)
    return ensure_built(git.build, arm.built_from, _out(arm), repo)


def _out(arm: ResolvedArm) -> Path:
    return Path(arm.python).parent.parent  # <build_cache>/<commit>/bin/python


def ensure_built(command: str, commit: str, out: Path, repo: Path) -> str | None:
    """Build `commit` into `out` unless it is built or known to fail; None once built."""
    out.parent.mkdir(parents=True, exist_ok=True)
    log, failed = out.with_name(f"{out.name}.log"), out.with_name(f"{out.name}.failed")
    with out.with_name(f"{out.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        if (out / DONE).is_file():
            return None
        if failed.is_file():
            return failed.read_text(encoding="utf-8").strip()
        if out.exists():  # a build cut short: start it over
            shutil.rmtree(out, ignore_errors=True)
        code = _run(command, commit, out, repo, log)
        python = out / "bin" / "python"
        if code == 0 and os.access(python, os.X_OK):
            (out / DONE).write_text(f"{commit}\n", encoding="utf-8")
            return None
        why = f"exit {code}" if code else f"it made no {python}"
        message = f"build of commit {commit[:12]} failed ({why}): {_last_line(log)} (log: {log})"
        failed.write_text(message + "\n", encoding="utf-8")
        return message


def _run(command: str, commit: str, out: Path, repo: Path, log: Path) -> int:
    """The command in its own process group, killed with it if this boot is stopped."""
    # replace, not str.format: a shell command has braces of its own (${VAR})
    line = command.replace("{commit}", shlex.quote(commit)).replace("{out}", shlex.quote(str(out)))
    with log.open("w", encoding="utf-8") as sink:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", line], cwd=repo, stdin=subprocess.DEVNULL, stdout=sink,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            return proc.wait()
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise


def _last_line(log: Path) -> str:
    lines = [x.strip() for x in log.read_text(errors="replace").splitlines() if x.strip()]
    return lines[-1][:300] if lines else "(no output)"


def built_for_preflight(spec: Experiment, spec_file: Path) -> list[str] | None:
    """With builds, build the two ends now (before anything is written: a search needs
    both) and name the points preflight can check: those already built. None: no builds,
    every arm is checked."""
    if spec.bisect is None or not spec.bisect.builds:
        return None
    arms = [resolve_arm(spec, spec_file, a.name) for a in spec.arms]
    failures = [(a.name, why) for a in (arms[0], arms[-1]) if (why := commit_build(spec, a))]
    if failures:
        which = "both ends" if len(failures) == 2 else f"the {failures[0][0]} end"
        raise SpecabError(
            f"the build fails for {which}: {failures[0][1]}",
            file=spec_file,
            field="bisect.git.build",
            fix="make the command build these commits (its log is named), delete the "
            ".failed file beside it, and run again",
        )
    return [a.name for a in arms if (_out(a) / DONE).is_file()]
