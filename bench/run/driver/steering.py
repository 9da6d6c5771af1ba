"""What decides, as boots land, which planned boots still run: sequential looks
(`SequentialRun`), a sweep's eliminations (`SelectionRun`) or a culprit search
(`BisectRun`); `steer` applies whichever the run has to the queue."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping

from bench.run.driver.bisection_run import BisectRun
from bench.run.driver.elimination import SelectionRun
from bench.run.driver.looks import SequentialRun
from bench.run.driver.order import PlannedBoot

Controller = SequentialRun | SelectionRun | BisectRun | None


def steer(
    seq: Controller,
    todo: deque[PlannedBoot],
    busy: bool,
    ok: Mapping[str, int],
    note: Callable[[str], None],
) -> None:
    """After boots land: the search asks for its next boots, a sequential stop launches
    nothing new (running boots finish), a sweep drops eliminated arms and settled groups."""
    if isinstance(seq, BisectRun):
        seq.advance(todo, busy, note)
    elif seq is not None and seq.check(ok, note):
        todo.clear()
    if isinstance(seq, SelectionRun):
        seq.prune(todo)
