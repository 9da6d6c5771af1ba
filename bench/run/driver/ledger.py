"""Boot attempts as the results directory numbers them (one rule for `specab boot` and run-ab),
and the options and summary of one run-ab.

An attempt's number counts from 1 per (arm, boot), past the highest already on disk; its
launch order continues past the highest order on disk. `Ledger.claim` applies both and fixes
the driver's columns of the attempt (`Attempt`) before it launches, so the boot builds its
record once and nobody rewrites it afterwards."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bench.records import BootRecord, Results, boot_file_stem
from bench.run.attempt import Attempt
from bench.run.compile_caches import DEFAULT_CACHE_GB
from bench.store import ResultsWriter, load_results


@dataclass
class Ledger:
    """What a results directory holds: ok boots, attempt numbers and launch order."""

    ok: dict[str, set[int]] = field(default_factory=dict)  # ok boot indices per arm
    last: dict[tuple[str, int], int] = field(default_factory=dict)  # highest attempt number
    next_order: int = 0

    @classmethod
    def read(cls, root: Path) -> Ledger:
        """The attempts on disk under `root` (none when it holds no results yet)."""
        if not (Path(root) / "manifest.json").is_file():
            return cls()
        b = load_results(root).boots
        ledger = cls()
        for arm, boot, number, status, order in zip(
            b["arm"], b["boot"], b["attempt"], b["status"], b["order"], strict=True
        ):
            key = (str(arm), int(boot))
            ledger.last[key] = max(ledger.last.get(key, 0), int(number))
            ledger.next_order = max(ledger.next_order, int(order) + 1)
            if status == "ok":
                ledger.ok.setdefault(key[0], set()).add(key[1])
        return ledger

    def proven_arms(self) -> set[str]:
        """Arms with at least one ok boot on disk (their versions are fixed)."""
        return {arm for arm, boots in self.ok.items() if boots}

    def claim(
        self,
        writer: ResultsWriter,
        arm: str,
        boot: int,
        *,
        block: int,
        host: str,
        member_hosts: tuple[str, ...] = (),
        slot: int | None = None,
    ) -> Attempt:
        """Number the next attempt of (arm, boot) and give it the next launch order."""
        number = self.last.get((arm, boot), 0) + 1
        self.last[(arm, boot)] = number
        order, self.next_order = self.next_order, self.next_order + 1
        log = writer.log_path(boot_file_stem(arm, boot, number))
        rel = str(log.relative_to(writer.root))
        return Attempt(arm, boot, number, order, block, host, rel, member_hosts, slot)


@dataclass(frozen=True)
class RunOptions:
    results_dir: Path
    resume: bool = False
    address: str | None = None
    slots: int | None = None  # cap on concurrent boots (default: what the cluster fits)
    quiet: bool = False
    common_random_numbers: bool = False
    compile_cache: bool = True
    compile_cache_gb: float = DEFAULT_CACHE_GB  # every kept compile cache of a node, at most
    num_cpus: int | None = None  # local Ray only
    strict: bool = False  # stop before anything is written when lint finds a mismatch
    duets: bool = True  # co-run groups where a node has two slots or more (duet_schedule.py)
    # Called in the driver after each boot's files are written (a live tracker): must return
    # at once and never raise.
    # after each attempt is written: its record, and the results so far (from memory)
    on_boot: Callable[[BootRecord, Callable[[], Results]], None] | None = None


@dataclass
class RunSummary:
    """What one run-ab invocation did (this run only; earlier runs are on disk)."""

    root: Path
    ok: dict[str, int]
    failed: dict[str, int]
    lost: list[tuple[str, int]] = field(default_factory=list)
    stopped: str | None = None
    interrupted: bool = False
    per_node: dict[str, dict[str, int]] = field(default_factory=dict)
    wall_s: float = 0.0
    busy_s: float = 0.0  # sum of boot + probe seconds of this run's attempts
    loop_s: float = 0.0  # first dispatch to last result (wall_s minus Ray start-up etc.)
    slots: int = 0

    @property
    def complete(self) -> bool:
        return not (self.lost or self.stopped or self.interrupted)


@dataclass(frozen=True)
class RunBooks:
    """Where the loop records what happened: the results directory (its one writer), the
    boots done per arm, and what the end of the run reports."""

    writer: ResultsWriter
    ledger: Ledger
    summary: RunSummary
    definitions: Mapping[str, str] = field(default_factory=dict)  # arm -> definition sha256
    images: Mapping[str, str] = field(default_factory=dict)  # arm -> image id at the driver
