"""The driver's results in memory (`ResultsWriter.results`): the files are read once, every
attempt written since is appended, and what it returns is what `load_results` loads from
disk, frame for frame and analysis for analysis."""

from __future__ import annotations

import threading
from pathlib import Path

import pandas as pd

from bench import stats
from bench.simulate import simulate_run, simulated_manifest, write_run
from bench.store import ResultsWriter, load_results


def _write(writer: ResultsWriter, records: list, probes: pd.DataFrame) -> None:  # type: ignore[type-arg]
    by_boot = dict(tuple(probes.groupby("boot_id", sort=False)))
    for rec in records:
        rows = by_boot.get(rec.boot_id) if rec.status == "ok" else None
        writer.write_boot(rec, rows.reset_index(drop=True) if rows is not None else ())


def test_in_memory_results_equal_the_directory_loaded_again(tmp_path: Path) -> None:
    """A new directory is never read back; a resumed one is read once, then appended to:
    either way the results are what `load_results` loads, frame for frame."""
    arms = {"a": 0.0, "b": 0.2}
    run = simulate_run(arms, boots=6, prompts=20, seed=3, failed_boots=1)
    manifest = simulated_manifest(arms, boots=6, prompts=20)
    half = len(run.boots) // 2
    first = ResultsWriter.create(tmp_path / "r", manifest)
    _write(first, run.boots[:half], run.probes)
    assert len(first.results().boots) == half  # from memory: the writer made the directory
    first.close()
    writer = ResultsWriter.create(tmp_path / "r", manifest, resume=True)
    assert len(writer.results().boots) == half  # the one read of a resumed directory
    _write(writer, run.boots[half:], run.probes)  # appended from memory
    mine, disk = writer.results(), load_results(tmp_path / "r")
    assert writer.results() is mine  # cached until the next attempt lands
    pd.testing.assert_frame_equal(mine.boots, disk.boots)
    pd.testing.assert_frame_equal(mine.probes, disk.probes)
    options = stats.AnalysisOptions(n_resamples=200)
    assert stats.analyze(mine, options) == stats.analyze(disk, options)
    assert any(r.status == "failed" for r in run.boots)  # a failed attempt went through too


def test_a_reader_thread_never_misses_an_attempt(tmp_path: Path) -> None:
    """Live tracking reads from its own thread while the driver writes: every attempt is in
    the results once the writes are done, whenever the first read happened."""
    arms = {"a": 0.0, "b": 0.0}
    run = simulate_run(arms, boots=10, prompts=5, seed=4)
    writer = ResultsWriter.create(tmp_path / "r", simulated_manifest(arms, boots=10, prompts=5))
    reads: list[int] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            reads.append(len(writer.results().boots))

    reader = threading.Thread(target=read)
    reader.start()
    write_run(run, writer)
    stop.set()
    reader.join()
    assert len(writer.results().boots) == len(run.boots) == len(load_results(writer.root).boots)
    assert reads and reads == sorted(reads)  # never a result older than one already read
