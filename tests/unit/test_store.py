"""The results directory contract: round trip, atomicity, commit marker, version checks."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench import store
from bench.errors import SpecabError
from bench.records import SCHEMA_VERSION, BootRecord, Manifest, ProbeRecord, boot_file_stem


def _boot_row(arm: str, boot: int, attempt: int = 1, status: str = "ok") -> BootRecord:
    now = datetime.now(UTC)
    return BootRecord.model_validate(
        {
            "experiment": "exp",
            "arm": arm,
            "boot": boot,
            "attempt": attempt,
            "boot_id": boot_file_stem(arm, boot, attempt),
            "status": status,
            "error": None if status == "ok" else "crashed at start",
            "order": boot * 2 + (arm == "b"),
            "block": boot,
            "host": "node0",
            "gpu": "",
            "started_at": now,
            "ready_at": now,
            "finished_at": now,
            "boot_seconds": 30.0,
            "probe_seconds": 5.0,
            "num_speculative_tokens": 2,
            "vllm_version": "0.32.0",
            "log_path": f"logs/{arm}.b{boot}.a{attempt}.log",
            "num_drafts": 10,
            "num_draft_tokens": 20,
            "num_accepted_tokens": 12,
            "accepted_per_pos": [8, 4],
            "engine_seed": boot,
        }
    )


def _probe_rows(arm: str, boot: int, attempt: int = 1) -> list[ProbeRecord]:
    return [
        ProbeRecord.model_validate(
            {
                "experiment": "exp",
                "arm": arm,
                "boot": boot,
                "boot_id": boot_file_stem(arm, boot, attempt),
                "probe_set": "code",
                "probe_id": f"p{i}",
                "num_drafts": 5,
                "num_draft_tokens": 10,
                "num_accepted_tokens": 6,
                "accepted_per_pos": [4, 2],
                "prompt_tokens": 7,
                "completion_tokens": 16,
                "output_sha256": "ab" * 32,
                "source": "per_request",
                "latency_s": 0.25,
            }
        )
        for i in range(2)
    ]


def _manifest(**changes: object) -> Manifest:
    body = {
        "schema_version": SCHEMA_VERSION,
        "experiment": "exp",
        "created_at": "2026-01-01T00:00:00+00:00",
        "specab_version": "test",
        "spec_sha256": "s1",
        "arms": [
            {"name": a, "definition": {"args": {"k": a}}, "definition_sha256": f"d-{a}"}
            for a in ("a", "b")
        ],
        "probe_sets": [{"name": "code", "sha256": "p", "count": 2}],
    }
    return Manifest.model_validate({**body, **changes})


MANIFEST = _manifest()


def test_round_trip_keeps_contract_types(tmp_path: Path) -> None:
    w = store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    w.write_boot(_boot_row("a", 0), _probe_rows("a", 0))
    w.write_boot(_boot_row("b", 0), _probe_rows("b", 0))
    res = store.load_results(tmp_path / "exp")
    assert res.manifest.schema_version == SCHEMA_VERSION
    assert res.arms() == ["a", "b"]
    assert len(res.boots) == 2 and len(res.probes) == 4
    table = pq.read_table(next((tmp_path / "exp" / "probes").glob("*.parquet")))
    assert table.schema.field("accepted_per_pos").type == pa.list_(pa.int64())
    assert table.schema.field("boot").type == pa.int64()
    boots = pq.read_table(next((tmp_path / "exp" / "boots").glob("*.parquet")))
    assert boots.schema.field("started_at").type == pa.timestamp("us", tz="UTC")
    assert list(res.probes["accepted_per_pos"].iloc[0]) == [4, 2]
    # no temp files left behind by the atomic writes
    assert not list((tmp_path / "exp").rglob("*.tmp"))


def test_counts_load_as_narrow_lists_and_a_count_beyond_int32_keeps_its_width(
    tmp_path: Path,
) -> None:
    """The per-position counts are held as int32 lists in memory (half of the stored int64 at
    campaign scale), the same numbers; a file with a count int32 cannot hold keeps int64."""
    w = store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    w.write_boot(_boot_row("a", 0), _probe_rows("a", 0))
    huge = 3 * 2**31
    rows = [
        p.model_copy(update={"num_drafts": huge, "num_accepted_tokens": huge + 1,
                             "accepted_per_pos": (huge, 1)})
        for p in _probe_rows("b", 0)
    ]  # fmt: skip
    w.write_boot(_boot_row("b", 0), rows)
    res = store.load_results(tmp_path / "exp")
    lists = res.probes["accepted_per_pos"]
    assert [list(x) for x in lists] == [[4, 2], [4, 2], [huge, 1], [huge, 1]]
    narrow = store.load_results(tmp_path / "exp", ["accepted_per_pos"]).probes
    w2 = store.ResultsWriter.create(tmp_path / "small", MANIFEST)
    w2.write_boot(_boot_row("a", 0), _probe_rows("a", 0))
    small = store.load_results(tmp_path / "small").probes["accepted_per_pos"]
    assert small.dtype.pyarrow_dtype == pa.list_(pa.int32())
    assert narrow["accepted_per_pos"].dtype.pyarrow_dtype == pa.list_(pa.int64())


def test_failed_attempt_has_no_probe_file_and_is_excluded(tmp_path: Path) -> None:
    w = store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    w.write_boot(_boot_row("a", 0, attempt=1, status="failed"))
    w.write_boot(_boot_row("a", 0, attempt=2), _probe_rows("a", 0, attempt=2))
    res = store.load_results(tmp_path / "exp")
    assert len(res.boots) == 2
    assert len(res.ok_boots()) == 1
    assert set(res.probes["boot_id"]) == {"a__b000__a2"}
    assert len(list((tmp_path / "exp" / "probes").iterdir())) == 1


def test_orphan_probe_file_without_boot_row_is_ignored(tmp_path: Path) -> None:
    w = store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    w.write_boot(_boot_row("a", 0), _probe_rows("a", 0))
    # simulate a crash after the probe file but before the boot row (the commit marker)
    (tmp_path / "exp" / "boots" / "a__b000__a1.parquet").unlink()
    res = store.load_results(tmp_path / "exp")
    assert len(res.probes) == 0


def test_existing_directory_needs_resume_and_same_spec(tmp_path: Path) -> None:
    store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    with pytest.raises(SpecabError, match="--resume"):
        store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    store.ResultsWriter.create(tmp_path / "exp", MANIFEST, resume=True)
    with pytest.raises(SpecabError, match="spec_sha256"):
        store.ResultsWriter.create(tmp_path / "exp", _manifest(spec_sha256="s2"), resume=True)


def test_unknown_schema_version_is_refused_with_fix(tmp_path: Path) -> None:
    w = store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    w.write_boot(_boot_row("a", 0), _probe_rows("a", 0))
    manifest = tmp_path / "exp" / "manifest.json"
    body = json.loads(manifest.read_text())
    body["schema_version"] = 99
    manifest.write_text(json.dumps(body))
    with pytest.raises(SpecabError) as exc:
        store.load_results(tmp_path / "exp")
    msg = str(exc.value)
    assert "manifest.json" in msg and "schema_version" in msg and "Fix:" in msg
    assert "\n" not in msg


@pytest.mark.parametrize(
    ("edit", "field", "says"),
    [
        (lambda m: [a.pop("definition") for a in m["arms"]], "arms[0].definition", "required"),
        (lambda m: m.update(arms={"a": {}, "b": {}}), "arms", "valid list"),
        (lambda m: m.pop("experiment"), "experiment", "required"),
        (lambda m: m["probe_sets"][0].update(count="many"), "probe_sets[0].count", "integer"),
        (lambda m: m.update(spec={"experiment": {"alpha": "high"}}), "spec.experiment.alpha", ""),
    ],
    ids=["no arm definition", "arms as a map", "no experiment", "bad count", "bad alpha"],
)
def test_a_damaged_manifest_is_refused_in_one_line_naming_the_field(
    tmp_path: Path, edit: Callable[[dict[str, Any]], object], field: str, says: str
) -> None:
    """A hand-edited manifest.json: every reader gets one line naming the file and the
    field, never a traceback from deep inside the statistics."""
    w = store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    w.write_boot(_boot_row("a", 0), _probe_rows("a", 0))
    path = tmp_path / "exp" / "manifest.json"
    body = json.loads(path.read_text())
    edit(body)
    path.write_text(json.dumps(body))
    with pytest.raises(SpecabError) as exc:
        store.load_results(tmp_path / "exp")
    msg = exc.value.one_line()
    assert f"manifest.json: {field}: " in msg and says in msg and "Fix:" in msg, msg


def test_keys_the_manifest_does_not_know_are_kept_through_a_resume(tmp_path: Path) -> None:
    """The contract is additive: another tool's (or a newer specab's) keys survive a load and
    the rewrite a resume makes."""
    root = tmp_path / "exp"
    store.ResultsWriter.create(root, _manifest(written_by={"tool": "other"}))
    assert store.load_manifest(root).model_extra == {"written_by": {"tool": "other"}}
    store.ResultsWriter.create(root, MANIFEST, resume=True, compare=lambda old: {"x": (1, 2)})
    body = json.loads((root / "manifest.json").read_text())
    assert body["written_by"] == {"tool": "other"} and body["resumes"][0]["changed"]["x"] == [1, 2]


def test_parquet_schema_version_is_checked(tmp_path: Path) -> None:
    w = store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    w.write_boot(_boot_row("a", 0), _probe_rows("a", 0))
    path = next((tmp_path / "exp" / "boots").glob("*.parquet"))
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({b"specab.schema_version": b"7"}), path)
    with pytest.raises(SpecabError, match="schema_version 7"):
        store.load_results(tmp_path / "exp")


def test_missing_directory_and_manifest_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecabError, match="not found"):
        store.load_results(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecabError, match=r"no manifest\.json"):
        store.load_results(tmp_path / "empty")


def test_ok_boot_without_probes_is_a_programming_error(tmp_path: Path) -> None:
    w = store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    with pytest.raises(ValueError):
        w.write_boot(_boot_row("a", 0), [])
    assert not list((tmp_path / "exp" / "boots").iterdir())


def test_records_refuse_rows_that_cannot_be_written() -> None:
    """An ok boot without counts, a failed one without its error, a negative count, or a
    probe file under another boot's id are programming errors found before any write."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="needs its whole"):
        BootRecord.model_validate({**_boot_row("a", 0).model_dump(), "num_drafts": None})
    with pytest.raises(ValidationError, match="needs its error"):
        BootRecord.model_validate({**_boot_row("a", 0).model_dump(), "status": "failed"})
    with pytest.raises(ValidationError):
        ProbeRecord.model_validate({**_probe_rows("a", 0)[0].model_dump(), "num_drafts": -1})
    with pytest.raises(ValidationError):
        BootRecord.model_validate({**_boot_row("a", 0).model_dump(), "attempt": 0})


def test_writer_refuses_mismatched_ids_and_columns(tmp_path: Path) -> None:
    import pandas as pd

    w = store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    with pytest.raises(ValueError, match="under"):
        w.write_boot(_boot_row("a", 0), _probe_rows("a", 1))
    with pytest.raises(ValueError, match="stem"):
        w.write_boot(_boot_row("a", 0).model_copy(update={"boot_id": "x"}), _probe_rows("a", 0))
    frame = pd.DataFrame([p.model_dump() for p in _probe_rows("a", 0)]).drop(columns="source")
    with pytest.raises(ValueError, match="missing"):
        w.write_boot(_boot_row("a", 0), frame)
    with pytest.raises(ValueError, match="no probe rows"):
        w.write_boot(_boot_row("a", 0, status="failed"), _probe_rows("a", 0))
    assert not list((tmp_path / "exp" / "boots").iterdir())


def test_written_files_follow_the_umask(tmp_path: Path) -> None:
    import os
    import stat

    w = store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    w.write_boot(_boot_row("a", 0), _probe_rows("a", 0))
    old = os.umask(0o027)
    try:
        store.atomic_write_bytes(tmp_path / "x.bin", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "x.bin").stat().st_mode) == 0o640
    boot = next((tmp_path / "exp" / "boots").glob("*.parquet"))
    assert stat.S_IMODE(boot.stat().st_mode) == 0o666 & ~old


def _write_probe_edit(tmp_path: Path, **edits: object) -> Path:
    """A results dir whose probe row p1 of boot a/0 carries `edits` (rewritten with pyarrow,
    as another tool would write it)."""
    w = store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    w.write_boot(_boot_row("a", 0), _probe_rows("a", 0))
    path = tmp_path / "exp" / "probes" / "a__b000__a1.parquet"
    rows = pq.read_table(path).to_pylist()
    rows[1].update(edits)
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)
    return path


@pytest.mark.parametrize(
    "edits,field,what",
    [
        ({"num_drafts": None}, "probes.num_drafts", "null is not a count"),
        ({"num_drafts": -3}, "probes.num_drafts", "-3 is not a count"),
        ({"accepted_per_pos": None}, "probes.accepted_per_pos", "missing, expected 2"),
        ({"accepted_per_pos": [4, 2, 1]}, "probes.accepted_per_pos", "of length 3, expected 2"),
        ({"accepted_per_pos": [4, None]}, "probes.accepted_per_pos", "null or negative"),
        (
            {"accepted_per_pos": [6, 0], "num_accepted_tokens": 6},
            "probes.accepted_per_pos",
            "A_0 exceeds num_drafts",
        ),
        ({"accepted_per_pos": [2, 4]}, "probes.accepted_per_pos", "A_k exceeds A_(k-1)"),
        ({"num_accepted_tokens": 7}, "probes.accepted_per_pos", "differs from num_accepted"),
    ],
)
def test_bad_counts_are_refused_at_load_naming_file_boot_probe_and_field(
    tmp_path: Path, edits: dict[str, object], field: str, what: str
) -> None:
    """A null count once relabelled an arm unreplicated, a NaN in accepted_per_pos gave a
    traceback and a null list counted as zero accepted: now one line, exit 2."""
    path = _write_probe_edit(tmp_path, **edits)
    with pytest.raises(SpecabError) as exc:
        store.load_results(tmp_path / "exp")
    msg = exc.value.one_line()
    assert exc.value.file == str(path) and exc.value.field == field
    assert "boot a__b000__a1 probe code/p1" in msg and what in msg and "\n" not in msg


def test_ok_boot_row_with_null_counts_is_refused(tmp_path: Path) -> None:
    w = store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    w.write_boot(_boot_row("a", 0), _probe_rows("a", 0))
    path = tmp_path / "exp" / "boots" / "a__b000__a1.parquet"
    rows = pq.read_table(path).to_pylist()
    rows[0]["num_drafts"] = None
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)
    with pytest.raises(
        SpecabError, match=r"boots\.num_drafts: boot a__b000__a1: null is not a count"
    ):
        store.load_results(tmp_path / "exp")


def test_files_written_by_another_tool_without_specab_metadata_load(tmp_path: Path) -> None:
    """The contract's columns only, no specab key in the Parquet metadata: the
    manifest's schema_version governs; additive columns come back as nulls."""
    w = store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    w.write_boot(_boot_row("a", 0), _probe_rows("a", 0))
    for sub in ("boots", "probes"):
        path = next((tmp_path / "exp" / sub).glob("*.parquet"))
        table = pq.read_table(path).replace_schema_metadata(None)
        if sub == "boots":
            table = table.drop_columns(["engine_seed", "compile_cache"])
        assert table.schema.metadata is None
        pq.write_table(table, path)
    res = store.load_results(tmp_path / "exp")
    assert len(res.boots) == 1 and len(res.probes) == 2
    assert res.boots["engine_seed"].isna().all() and res.boots["compile_cache"].isna().all()


def test_files_without_additive_columns_load_with_record_defaults(tmp_path: Path) -> None:
    """A results directory written before an additive column existed (or by another tool)
    loads with the record's defaults: boots were speculative, one member, one at a time."""
    w = store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    w.write_boot(_boot_row("a", 0), _probe_rows("a", 0))
    w.write_boot(_boot_row("a", 1), _probe_rows("a", 1))
    old = next((tmp_path / "exp" / "boots").glob("a__b000*.parquet"))
    table = pq.read_table(old)
    keep = [n for n in table.schema.names if n not in ("speculative", "members", "member_hosts")]
    pq.write_table(table.select(keep), old)
    res = store.load_results(tmp_path / "exp")
    assert res.boots["speculative"].tolist() == [True, True]
    assert res.boots["members"].tolist() == [1, 1]
    assert [list(x) for x in res.boots["member_hosts"]] == [[], []]
    assert res.probes["ttft_s"].isna().all()


def test_every_stored_version_is_read_through_the_version_map(tmp_path: Path) -> None:
    """Old results and references stay readable: each version this specab ever wrote has a
    reader (an upgrade chain to today's), the committed schema-1 results and reference load
    through it, and only a version newer than this specab is refused, saying to upgrade."""
    import json
    import shutil

    from bench.errors import SpecabError
    from bench.records import REFERENCE_VERSION, SCHEMA_VERSION
    from bench.store import load_reference, load_results

    goldens = Path(__file__).resolve().parents[1] / "fixtures" / "goldens"
    root = tmp_path / "sim-ab"
    shutil.copytree(goldens / "results" / "sim-ab", root)
    assert json.loads((root / "manifest.json").read_text())["schema_version"] == 1
    assert len(load_results(root).boots) > 0  # schema 1, through the map
    store = tmp_path / "refs"
    store.mkdir()
    shutil.copy(goldens / "gate.reference.json.golden", store / "old.json")
    assert json.loads((store / "old.json").read_text())["reference_version"] == 1
    assert load_reference(store, "old").arms  # reference version 1, through the map
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["schema_version"] = SCHEMA_VERSION + 1
    (root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SpecabError, match="upgrade specab"):
        load_results(root)
    ref = json.loads((store / "old.json").read_text())
    ref["reference_version"] = REFERENCE_VERSION + 1
    (store / "new.json").write_text(json.dumps(ref))
    with pytest.raises(SpecabError, match="upgrade specab"):
        load_reference(store, "new")
