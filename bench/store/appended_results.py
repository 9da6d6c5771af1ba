"""The results a writer holds in memory: the directory as read once when the writer opened it
(a resumed run's boots), extended by every attempt it writes, with the very tables it wrote.

A run's driver reads its results at each sequential look, at each sweep elimination and for
live tracking. Reading the directory back each time costs the Parquet decode of every file
written so far, after every boot: a campaign's reads grow with the square of its boots. Here
the files are decoded once, and `results()` builds the same checked frames `load_results`
builds (`results_from_parts`), cached until the next attempt lands.
"""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path

import pyarrow as pa

from bench.records import Results
from bench.store.load import Parts, prepared, results_from_parts
from bench.store.parquet_rows import load_manifest, read_dir


def _path(part: tuple[Path, pa.Table]) -> Path:
    return part[0]


class AppendedResults:
    """One results directory's manifest, boot tables and probe tables, append-only."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._boots: Parts = [(p, prepared(t, False)) for p, t in read_dir(self.root / "boots")]
        self._probes: Parts = read_dir(
            self.root / "probes", each=partial(prepared, arrow_lists=True)
        )
        self._cached: Results | None = None
        self._version = 0  # attempts appended: a build from an older snapshot is not kept
        # the driver appends while live tracking reads from its own thread; a build runs
        # outside the lock, so the driver never waits for a reader
        self._lock = threading.Lock()

    def append(self, stem: str, boot: pa.Table, probes: pa.Table | None) -> None:
        """One attempt as written: its boot row and (an ok boot) its probe rows."""
        with self._lock:
            if probes is not None:
                where = self.root / "probes" / f"{stem}.parquet"
                self._probes.append((where, prepared(probes, True)))
            self._boots.append((self.root / "boots" / f"{stem}.parquet", prepared(boot, False)))
            self._cached = None
            self._version += 1

    def results(self) -> Results:
        """Everything written so far, as `load_results(root)` would load it."""
        with self._lock:
            if self._cached is not None:
                return self._cached
            # in file-name order, as read_dir reads a directory: the same frames, row for row
            boots, probes = sorted(self._boots, key=_path), sorted(self._probes, key=_path)
            version = self._version
        manifest = load_manifest(self.root)  # a resume may have rewritten it
        built = results_from_parts(self.root, manifest, boots, probes)
        with self._lock:
            if self._version == version:
                self._cached = built
        return built
