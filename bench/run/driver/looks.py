"""Sequential stopping for `specab run-ab` (experiment.looks, see docs/statistics.md).

The driver calls `SequentialRun.check` after every finished attempt; it does something only
when every arm has reached the next planned look in ok boots. Each look is tested exactly
once, in order, on the first n_look ok boots of every arm (launch order) — never after every
boot, which would spend alpha the O'Brien-Fleming boundaries do not allow for. Decisions go
to `sequential.json` (atomically) so `--resume` skips looks already taken and runs nothing
after a stop.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import SpecabError
from bench.records import Results
from bench.stats import AnalysisOptions, Decision, decide
from bench.store import atomic_write_json, load_results

FILE = "sequential.json"


def first_boots(res: Results, n: int) -> Results:
    """`res` restricted to the first n ok boots of every arm (launch order); failed
    attempts are kept, they do not count as boots."""
    ok = res.ok_boots().sort_values("order", kind="stable")
    keep = set(ok.groupby("arm", sort=False).head(n)["boot_id"])
    boots = res.boots[(res.boots["status"] != "ok") | res.boots["boot_id"].isin(keep)]
    probes = res.probes[res.probes["boot_id"].isin(keep)]
    return res.with_frames(boots.reset_index(drop=True), probes.reset_index(drop=True))


def describe(d: Decision) -> str:
    """One line: look, boundary, action and why."""
    where = f"look {d.look}/{len(d.looks)} at {d.looks[(d.look or 1) - 1]} boots/arm"
    bound = f"nominal alpha {d.nominal_alpha:.3g}" if d.nominal_alpha is not None else "-"
    return f"sequential {where} ({bound}): {d.action.upper()}: {d.reason}"


@dataclass
class SequentialRun:
    """Progress through the planned looks of one results directory."""

    root: Path
    looks: tuple[int, ...]
    arms: list[str]
    decisions: list[dict[str, Any]] = field(default_factory=list)
    # the results so far (the driver's, in memory); None reads the directory
    current: Callable[[], Results] | None = None

    @property
    def path(self) -> Path:
        return self.root / FILE

    @property
    def stopped(self) -> bool:
        return bool(self.decisions) and self.decisions[-1]["action"] == "stop"

    @property
    def next_look(self) -> int | None:
        """Boots per arm at the next look to take, None when stopped or all taken."""
        k = len(self.decisions)
        return None if self.stopped or k >= len(self.looks) else self.looks[k]

    @classmethod
    def open(
        cls,
        root: Path,
        looks: list[int],
        arms: list[str],
        current: Callable[[], Results] | None = None,
    ) -> SequentialRun:
        """Load `sequential.json` if a previous run wrote one (resume), else start fresh."""
        run = cls(Path(root), tuple(looks), list(arms), current=current)
        if not run.path.is_file():
            return run
        try:
            body = json.loads(run.path.read_text())
            found, decisions = tuple(body["looks"]), list(body["decisions"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SpecabError(
                f"unreadable sequential state ({exc})",
                file=run.path,
                fix="delete it to retake the looks from the boots on disk, then --resume",
            ) from None
        if found != run.looks:
            raise SpecabError(
                f"written with looks {list(found)}, the experiment now plans {list(looks)}",
                file=run.path,
                field="experiment.looks",
                fix="restore the looks the run started with (changing them spends alpha twice)",
            )
        run.decisions = decisions
        return run

    def check(self, ok: Mapping[str, int], note: Callable[[str], None]) -> bool:
        """Take every look the ok counts have reached; True once the design says stop."""
        while (n := self.next_look) is not None and all(ok.get(a, 0) >= n for a in self.arms):
            d = self._decide(n)
            self.decisions.append(d.to_dict())
            atomic_write_json(
                self.path,
                {"looks": list(self.looks), "stopped": self.stopped, "decisions": self.decisions},
            )
            note(describe(d))
            if self.stopped and n < self.looks[-1]:
                note(f"sequential stop: launching no further boots (planned {self.looks[-1]})")
        return self.stopped

    def _decide(self, n: int) -> Decision:
        res = first_boots(self.current() if self.current else load_results(self.root), n)
        options = AnalysisOptions(looks=self.looks)
        d: Decision = decide(res, options)
        if d.look is None or self.looks[d.look - 1] != n:  # fewer usable boots than counted
            raise SpecabError(
                f"look at {n} boots/arm found only {d.boots_per_arm} usable boots per arm",
                file=self.root,
                fix="check the boot files on disk, then rerun with --resume",
            )
        return d
