"""Old results stay readable: every results directory an older release wrote
(tests/fixtures/old-results) is analyzed by this release and matches its golden; the upgrade
chain carries a document through each schema version in turn."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_goldens import _json_close, _normalize

from bench.cli import run
from bench.errors import SpecabError
from bench.store import upgraded

OLD = Path(__file__).resolve().parents[1] / "fixtures" / "old-results"
DIRS = sorted(p for p in OLD.iterdir() if p.is_dir())
WRITE = os.environ.get("SPECAB_WRITE_GOLDENS") == "1"


def test_there_is_an_old_directory_per_schema_version_read() -> None:
    from bench.store import RESULTS_READERS

    have = {json.loads((d / "manifest.json").read_text())["schema_version"] for d in DIRS}
    assert have == set(RESULTS_READERS), "commit a results directory of every schema read"


@pytest.mark.parametrize("old", DIRS, ids=[d.name for d in DIRS])
def test_an_old_results_directory_is_analyzed_as_its_golden_says(
    old: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / old.name
    shutil.copytree(old, d)
    assert run(["analyze", str(d), "--json", "--resamples", "0"]) == 0, capsys.readouterr().err
    actual = json.loads(_normalize(capsys.readouterr().out, d))
    golden = OLD / f"{old.name}.analyze.json.golden"
    if WRITE:
        golden.write_text(json.dumps(actual, indent=2) + "\n")
    diff = _json_close(json.loads(golden.read_text()), actual)
    assert diff is None, f"{old.name}: {diff}"
    assert actual["schema_version"] == 1 and actual["comparisons"]


def test_the_upgrade_chain_applies_each_step_in_order(tmp_path: Path) -> None:
    def to_2(doc: dict[str, Any]) -> dict[str, Any]:
        body = {k: v for k, v in doc.items() if k != "old_name"}
        return {**body, "renamed": doc["old_name"], "steps": [2]}

    def to_3(doc: dict[str, Any]) -> dict[str, Any]:
        return {**doc, "steps": [*doc["steps"], 3]}

    readers = {1: to_2, 2: to_3, 3: lambda d: d}
    where = tmp_path / "manifest.json"
    doc = upgraded({"schema_version": 1, "old_name": "x"}, readers, 3, where, "schema_version")
    assert doc == {"schema_version": 3, "renamed": "x", "steps": [2, 3]}
    assert upgraded({"schema_version": 3, "a": 1}, readers, 3, where, "schema_version")["a"] == 1
    with pytest.raises(SpecabError) as exc:
        upgraded({"schema_version": 4}, readers, 3, where, "schema_version")
    assert "upgrade specab" in exc.value.one_line() and str(where) in exc.value.one_line()


def test_old_results_asked_for_acceptance_along_the_output_say_they_predate_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / DIRS[0].name
    shutil.copytree(DIRS[0], d)
    assert run(["analyze", str(d), "--by", "output_position", "--resamples", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "predate step recording" in err and "rerun the arms" in err
    assert "rerun with" not in err and len(err.splitlines()) == 1
