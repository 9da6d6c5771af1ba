"""Node-local scratch: a log written away from the results dir holds this run's lines only."""

from __future__ import annotations

from pathlib import Path

from bench.run import MAX_LOG_BYTES, fresh_node_log, read_log_tail


def test_a_node_log_starts_empty_and_is_per_results_dir(tmp_path: Path) -> None:
    work = tmp_path / "specab-work" / "fake"
    first = fresh_node_log(work, "/runs/one/logs", "g__b000__a1.log")
    first.parent.mkdir(parents=True)
    first.write_text("[specab] launching: an earlier run\n")
    again = fresh_node_log(work, "/runs/one/logs", "g__b000__a1.log")
    assert again == first and not again.exists()  # the earlier run's lines are gone
    other = fresh_node_log(work, "/runs/two/logs", "g__b000__a1.log")
    assert other != first and other.name == first.name  # same boot id, another results dir


def test_the_shipped_tail_is_bounded(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    assert read_log_tail(log) is None
    log.write_bytes(b"a" * 10 + b"b" * MAX_LOG_BYTES)
    assert read_log_tail(log) == b"b" * MAX_LOG_BYTES
