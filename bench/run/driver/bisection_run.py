"""A `[bisect]` run: the driver boots what the culprit search asks (`bench.stats.bisect`),
waits for those boots, asks again, and stops once the search has its answer.

Every point's boots come from the ordinary plan (an arm per point, its boots in order, each
with its own engine seed), held back until the search asks for them, so a boot row is an
ordinary boot row and `--resume` re-derives the same plan: the search reads the boots on
disk and asks only for what it still needs. A point none of whose planned boots is left is
passed over, as one that cannot be built; so is an inner point whose attempts fail the same
way twice (`skip`, as `git bisect skip` does): the search goes on around it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bench.records import BootRecord, Results
from bench.run.driver.order import PlannedBoot
from bench.stats.bisect import history_step


@dataclass
class BisectRun:
    """The search's progress over one results directory."""

    arms: list[str]  # the history, in order
    alpha: float
    slots: int
    current: Callable[[], Results]  # the results so far (the driver's, in memory)
    held: dict[str, deque[PlannedBoot]] = field(default_factory=dict)  # boots not yet asked
    answer: str | None = None  # the search's answer, once it has one

    @classmethod
    def start(
        cls,
        arms: Sequence[str],
        plan: Sequence[PlannedBoot],
        alpha: float,
        slots: int,
        current: Callable[[], Results],
    ) -> BisectRun:
        """Hold back every planned boot; the search releases them."""
        held: dict[str, deque[PlannedBoot]] = {a: deque() for a in arms}
        for p in sorted(plan, key=lambda p: (p.arm, p.boot)):
            held[p.arm].append(p)
        return cls(list(arms), alpha, slots, current, held)

    def skip(
        self, record: BootRecord, todo: deque[PlannedBoot], note: Callable[[str], None]
    ) -> bool:
        """Pass over an inner point whose failure repeats (its boots are dropped); False for an
        end, without which there is no search."""
        arm, error = record.arm, ((record.error or "").strip().splitlines() or ["?"])[0]
        if arm not in self.arms[1:-1]:
            return False
        self.held[arm].clear()
        keep = [p for p in todo if p.arm != arm]
        todo.clear()
        todo.extend(keep)
        note(f"bisect: skipping {arm}, which fails the same way twice: {error}")
        return True

    def advance(self, todo: deque[PlannedBoot], busy: bool, note: Callable[[str], None]) -> bool:
        """When no asked boot is queued or running: ask the search again, and queue what it
        asks; True once it has its answer (nothing more to boot)."""
        if self.answer is not None:
            return True
        if todo or busy:
            return False
        empty = frozenset(i for i, a in enumerate(self.arms) if not self.held[a])
        arms, _, step = history_step(self.current(), self.alpha, self.slots, empty)
        if step.outcome != "boot":
            first = arms[step.first] if step.first is not None else None
            last = arms[step.last] if step.last is not None else None
            self.answer = {
                "culprit": f"bisect: the first changed point is {first}",
                "range": f"bisect: the change lies in {first} .. {last}",
                "not_reproduced": "bisect: the change did not reproduce (the ends do not differ)",
            }[step.outcome]
            note(self.answer)
            return True
        for point, boots in step.boots.items():
            queue = self.held[self.arms[point]]
            todo.extend(queue.popleft() for _ in range(min(boots, len(queue))))
        asked = ", ".join(f"{self.arms[p]} ×{k}" for p, k in step.boots.items())
        note(f"bisect: booting {asked}")
        return False
