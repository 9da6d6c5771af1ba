"""The results directory contract: round trip, atomicity, commit marker, version checks."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench import store
from bench.errors import SpecabError


def _boot_row(arm: str, boot: int, attempt: int = 0, status: str = "ok") -> dict[str, object]:
    now = datetime.now(UTC)
    return {
        "experiment": "exp",
        "arm": arm,
        "boot": boot,
        "attempt": attempt,
        "boot_id": f"{arm}.b{boot}.a{attempt}",
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


def _probe_rows(arm: str, boot: int, attempt: int = 0) -> list[dict[str, object]]:
    return [
        {
            "experiment": "exp",
            "arm": arm,
            "boot": boot,
            "boot_id": f"{arm}.b{boot}.a{attempt}",
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
        for i in range(2)
    ]


MANIFEST = {"experiment": "exp", "spec_sha256": "s1", "arms": [{"name": "a"}, {"name": "b"}]}


def test_round_trip_keeps_contract_types(tmp_path: Path) -> None:
    w = store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    w.write_boot(_boot_row("a", 0), _probe_rows("a", 0))
    w.write_boot(_boot_row("b", 0), _probe_rows("b", 0))
    res = store.load_results(tmp_path / "exp")
    assert res.manifest["schema_version"] == store.SCHEMA_VERSION
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


def test_failed_attempt_has_no_probe_file_and_is_excluded(tmp_path: Path) -> None:
    w = store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    w.write_boot(_boot_row("a", 0, attempt=0, status="failed"))
    w.write_boot(_boot_row("a", 0, attempt=1), _probe_rows("a", 0, attempt=1))
    res = store.load_results(tmp_path / "exp")
    assert len(res.boots) == 2
    assert len(res.ok_boots()) == 1
    assert set(res.probes["boot_id"]) == {"a.b0.a1"}
    assert len(list((tmp_path / "exp" / "probes").iterdir())) == 1


def test_orphan_probe_file_without_boot_row_is_ignored(tmp_path: Path) -> None:
    w = store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    w.write_boot(_boot_row("a", 0), _probe_rows("a", 0))
    # simulate a crash after the probe file but before the boot row (the commit marker)
    (tmp_path / "exp" / "boots" / "a__b000__a0.parquet").unlink()
    res = store.load_results(tmp_path / "exp")
    assert len(res.probes) == 0


def test_existing_directory_needs_resume_and_same_spec(tmp_path: Path) -> None:
    store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    with pytest.raises(SpecabError, match="--resume"):
        store.ResultsWriter.create(tmp_path / "exp", MANIFEST)
    store.ResultsWriter.create(tmp_path / "exp", MANIFEST, resume=True)
    with pytest.raises(SpecabError, match="spec_sha256"):
        store.ResultsWriter.create(tmp_path / "exp", {**MANIFEST, "spec_sha256": "s2"}, resume=True)


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
