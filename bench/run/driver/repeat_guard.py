"""Failures certain to repeat: an arm that has never booted ok and fails twice in a row, the
same way, before anything was measured (or measured, but drafted nothing: an ok boot kept
out of acceptance, which proves nothing of the drafter), and a failure certain from its
first occurrence (an API key the server requires and the probes lack). See the run loop's
docstring for why the run stops.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from bench.experiment import IMAGE_DIFFERS
from bench.records import BootRecord
from bench.run.boot import API_KEY_REFUSED, IMAGE_UNREAD, NO_DRAFTS
from bench.run.process import CAUSE_LINES, NOT_HEALTHY, cause_context, log_tail

TAIL_LINES = 8  # server log lines shown when a repeating failure stops the run

_NUMBERS = re.compile(r"\d+")


_BEFORE_MEASURING = ("start", "patch_check", "first_request")


def failure_signature(record: BootRecord) -> str | None:
    """The first error line, every number blanked, of a failure before anything was measured.
    None for an ok boot, a failure after the boot's first request answered (a crash mid-run
    may be transient), or one of the infrastructure (a Ray worker or node died, a node
    without the arm's image: nothing about the arm)."""
    text = (record.error or record.no_drafts or "").strip()
    line = text.splitlines()[0] if text else ""
    if line.startswith(NO_DRAFTS):  # speculation off in this arm's setup: not transient
        early = True
    elif record.failed_phase is not None:
        early = record.failed_phase in _BEFORE_MEASURING
    else:  # a record written before failed_phase existed
        early = record.ready_at is None or line.startswith("patch ")
    if (record.status == "ok" and not record.no_drafts) or not early or not line:
        return None
    if line.startswith("ray:"):
        return None
    if IMAGE_UNREAD in line or IMAGE_DIFFERS in line:
        return None  # the node's, not the arm's: that node is barred for the arm
    return _NUMBERS.sub("#", line)


def certain_to_repeat(record: BootRecord) -> bool:
    """A failure no retry can mend, known from its first occurrence: the server requires an
    API key the probes do not have."""
    return record.status == "failed" and (record.error or "").startswith(API_KEY_REFUSED)


class RepeatGuard:
    """Tells when an arm's failure is certain to repeat: the arm never booted ok and its last
    two failures (in the order they finished) are startup failures with one signature."""

    def __init__(self, proven: Iterable[str] = ()) -> None:
        self.proven = set(proven)  # arms with an ok boot: their failures may be transient
        self.last: dict[str, str | None] = {}

    def ok(self, arm: str) -> None:
        self.proven.add(arm)

    def suspect(self, arm: str) -> bool:
        """The arm never booted ok and its last failure came before anything was measured:
        its next attempt should wait for the one in flight (it may fail the same way)."""
        return arm not in self.proven and self.last.get(arm) is not None

    def repeats(self, record: BootRecord) -> bool:
        if certain_to_repeat(record):
            return True
        if record.arm in self.proven:
            return False
        sig = failure_signature(record)
        before, self.last[record.arm] = self.last.get(record.arm), sig
        return sig is not None and sig == before


def stop_message(record: BootRecord, root: Path) -> str:
    """Why the run stops: the repeated error and the tail of the server's log (under the
    results directory `root`)."""
    error = (record.error or record.no_drafts or "").strip().splitlines()[0][:500]
    lines = [
        f"arm {record.arm!r} failed in a way no retry mends: {error}"
        if certain_to_repeat(record)
        else f"arm {record.arm!r} drafted nothing in two boots in a row and never drafted, so "
        f"every boot would measure no drafter: {error}"
        if record.no_drafts
        else f"arm {record.arm!r} failed twice in a row with the same error and has not "
        f"booted ok once, so every retry would fail the same way: {error}"
    ]
    log = log_tail(root / record.log_path, CAUSE_LINES) if record.log_path else []
    tail = cause_context(log, TAIL_LINES)
    if tail:
        lines += [f"from {record.log_path}:", *(f"  {x}" for x in tail)]
    if error.startswith(NOT_HEALTHY):
        lines.append(
            "Both boots ran out of server.ready_timeout_s before /health answered: a cold "
            "start that loads a large model and compiles on many GPUs can take longer. If the "
            "log shows it still loading, raise [server] ready_timeout_s (unset, it grows with "
            "the weights and GPU ranks: specab validate prints it per arm)"
        )
    lines.append(
        f"Fix the cause (try one boot: specab boot FILE --arm {record.arm}), then rerun "
        "with --resume"
    )
    return "\n".join(lines)
