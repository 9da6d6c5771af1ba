"""The run-ab driver, the one writer of a results directory: preflight, the directory and
its resume check, Ray (`orchestrator`); the dispatch loop that launches, writes, retries and
stops (`loop`, `dispatch`); the interleaved order and per-boot seeds (`order`); attempt
numbers on disk and the run's options and summary (`ledger`); co-run groups on nodes with two
slots or more (`duet_schedule`); stopping a failure certain to
repeat (`repeat_guard`); sequential looks (`looks`) and a sweep's elimination
(`elimination`); progress (`progress`)."""

from bench.run.driver.dispatch import Dispatcher
from bench.run.driver.duet_schedule import Pairing
from bench.run.driver.ledger import Ledger, RunOptions, RunSummary
from bench.run.driver.looks import SequentialRun, first_boots
from bench.run.driver.orchestrator import Driver, run_ab
from bench.run.driver.order import (
    InFlight,
    boot_seed,
    engine_seed,
    missing_boots,
    pick_next,
    plan_order,
)
from bench.run.driver.progress import ProgressState, Running, make_progress
from bench.run.driver.repeat_guard import RepeatGuard, failure_signature, stop_message

__all__ = [
    "Dispatcher",
    "Driver",
    "InFlight",
    "Ledger",
    "Pairing",
    "ProgressState",
    "RepeatGuard",
    "RunOptions",
    "RunSummary",
    "Running",
    "SequentialRun",
    "boot_seed",
    "engine_seed",
    "failure_signature",
    "first_boots",
    "make_progress",
    "missing_boots",
    "pick_next",
    "plan_order",
    "run_ab",
    "stop_message",
]  # fmt: skip
