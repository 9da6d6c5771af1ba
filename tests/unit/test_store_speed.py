"""The columns a boot fills for speed and load (category, server timings, sequence, the
per-request histogram; speculative and concurrency per boot) survive the store, and a
no-speculation boot (K = 0) loads with empty per-position counts and no drafts."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from bench import store
from bench.errors import SpecabError
from bench.records import BootRecord, Manifest, ProbeRecord, boot_file_stem

MANIFEST = Manifest.model_validate(
    {
        "schema_version": 1,
        "experiment": "e",
        "created_at": "2026-01-01T00:00:00+00:00",
        "specab_version": "test",
        "spec_sha256": "s",
        "arms": [{"name": a, "definition": {}, "definition_sha256": a} for a in ("spec", "off")],
        "probe_sets": [{"name": "code", "sha256": "p", "count": 2}],
    }
)


def boot(arm: str, k: int, counts: tuple[int, int, int, list[int]], **extra: Any) -> BootRecord:
    now = datetime.now(UTC)
    d, t, a, pos = counts
    return BootRecord(
        experiment="e",
        arm=arm,
        boot=0,
        attempt=1,
        boot_id=boot_file_stem(arm, 0, 1),
        status="ok",
        order=0 if arm == "spec" else 1,
        block=0,
        started_at=now,
        ready_at=now,
        finished_at=now,
        num_speculative_tokens=k,
        num_drafts=d,
        num_draft_tokens=t,
        num_accepted_tokens=a,
        accepted_per_pos=tuple(pos),
        **extra,
    )


def probe(arm: str, i: int, counts: tuple[int, int, int, list[int]], **extra: Any) -> ProbeRecord:
    d, t, a, pos = counts
    return ProbeRecord(
        experiment="e",
        arm=arm,
        boot=0,
        boot_id=boot_file_stem(arm, 0, 1),
        probe_set="set",
        probe_id=f"p{i}",
        num_drafts=d,
        num_draft_tokens=t,
        num_accepted_tokens=a,
        accepted_per_pos=tuple(pos),
        prompt_tokens=5,
        completion_tokens=32,
        output_sha256="ab" * 32,
        source="per_request" if pos else "metrics_delta",
        latency_s=0.2,
        category="humaneval" if i % 2 else "stdlib",
        ttft_s=0.015,
        tpot_s=0.003,
        queue_s=0.0,
        sequence=i,
        **extra,
    )


SPEC = (5, 10, 6, [4, 2])
ZERO = (0, 0, 0, [])


def write(root: Path, off_probe: tuple[int, int, int, list[int]] = ZERO) -> Path:
    w = store.ResultsWriter.create(root, MANIFEST)
    hist = {"acceptance_histogram": (1, 2, 2)}
    w.write_boot(
        boot("spec", 2, (10, 20, 12, [8, 4]), concurrency=4),
        [probe("spec", i, SPEC, **hist) for i in range(2)],
    )
    w.write_boot(
        boot("off", 0, ZERO, speculative=False, concurrency=4),
        [probe("off", i, off_probe if i else ZERO) for i in range(2)],
    )
    return root


def test_speed_columns_and_a_no_speculation_boot_round_trip(tmp_path: Path) -> None:
    res = store.load_results(write(tmp_path / "e"))
    b = res.boots.set_index("arm")
    assert not b.loc["off", "speculative"] and b.loc["spec", "speculative"]
    assert list(b["concurrency"]) == [4, 4]
    p = res.probes.set_index(["arm", "probe_id"])
    assert list(p.loc[("off", "p1"), "accepted_per_pos"]) == []
    assert pd.isna(p.loc[("off", "p1"), "acceptance_histogram"])  # a null cell: NA
    assert list(p.loc[("spec", "p1"), "acceptance_histogram"]) == [1, 2, 2]
    row = p.loc[("spec", "p0")]
    assert (row["category"], row["sequence"]) == ("stdlib", 0)
    assert (row["ttft_s"], row["tpot_s"], row["queue_s"]) == (0.015, 0.003, 0.0)


@pytest.mark.parametrize(
    ("counts", "field"),
    [((3, 0, 0, []), "probes.num_drafts"), ((0, 0, 0, [1]), "probes.accepted_per_pos")],
)
def test_drafts_in_a_no_speculation_boot_are_refused_at_load(
    tmp_path: Path, counts: tuple[int, int, int, list[int]], field: str
) -> None:
    root = write(tmp_path / "e", off_probe=counts)
    with pytest.raises(SpecabError) as e:
        store.load_results(root)
    assert e.value.field == field and "off__b000__a1 probe set/p1" in e.value.problem
