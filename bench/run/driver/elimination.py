"""Elimination across looks for a sweep (`[sweep]` with experiment.looks, see
docs/statistics.md "Selection") or a screening (`[screen]`, "Screening candidates"): after
every finished boot the looks are replayed on the boots on disk (`bench.stats.
selection_dropped` or `screen_dropped`, the code `analyze` reports with) and the planned
boots of arms that need no more are taken out of the queue. The replay reads each look's
first n boots by boot index, so its outcome never changes as later boots arrive, and
`--resume` recomputes it from the directory: there is no state file to drift.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bench.records import Results
from bench.run.driver.order import PlannedBoot
from bench.stats import selection_dropped
from bench.store import load_results


@dataclass
class SelectionRun:
    """The arms a sweep still boots."""

    root: Path
    looks: tuple[int, ...]
    arms: list[str]
    dropped: dict[str, str] = field(default_factory=dict)
    _seen: dict[str, int] = field(default_factory=dict)
    # the results so far (the driver's, in memory); None reads the directory
    current: Callable[[], Results] | None = None
    # the arms the looks so far need no more boots of, and why
    drop: Callable[[Results], Mapping[str, str]] = selection_dropped
    label: str = "selection"

    def check(self, ok: Mapping[str, int], note: Callable[[str], None]) -> bool:
        """Replay the looks when the ok counts changed; True once no arm needs more boots."""
        if dict(ok) == self._seen:
            return self.finished
        self._seen = dict(ok)
        if max(ok.values(), default=0) < self.looks[0]:
            return False
        res = self.current() if self.current else load_results(self.root)
        now = dict(self.drop(res))
        for arm in sorted(set(now) - set(self.dropped)):
            note(f"{self.label}: no more boots for {arm}: {now[arm]}")
        self.dropped = now
        return self.finished

    @property
    def finished(self) -> bool:
        return set(self.arms) <= set(self.dropped)

    def prune(self, todo: deque[PlannedBoot]) -> None:
        """Take the dropped arms' planned boots out of the queue (running ones finish)."""
        keep = [p for p in todo if p.arm not in self.dropped]
        if len(keep) != len(todo):
            todo.clear()
            todo.extend(keep)
