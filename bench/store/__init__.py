"""The results directory (schema_version 1): writing it atomically and loading it back.

Layout (see results/README.md and docs/results.md):
    results/<experiment>/manifest.json
    results/<experiment>/boots/<arm>__b<boot>__a<attempt>.parquet   one row per boot attempt
    results/<experiment>/probes/<arm>__b<boot>__a<attempt>.parquet  one row per measured probe
    results/<experiment>/logs/<boot_id>.log
A boot's probe file is written before its boot row; the boot row is the commit marker, so a
crash between the two leaves an orphan probe file that loading ignores.

`atomic_files` (files never seen half-written), `write` (the writer, which keeps what it
wrote in memory: `appended_results`), `parquet_rows` (the
manifest and the files as they lie, without pandas), `load` (the typed frames, refusing damage
in one line), `validity` (count invariants checked
at load), `versions` (every stored version this specab reads, and its upgrade to today's),
`references` (the gate's stored references), `writer_claim` (one writer per
directory: `claim.json`), `campaign` (where a run stands, for `specab status`).
"""

# The face loads its modules on first use (PEP 562): `specab status` reads through `campaign`
# alone, which imports neither pandas nor the load's checks.
from typing import TYPE_CHECKING, Any

from bench import lazy_attribute

if TYPE_CHECKING:
    from bench.store.atomic_files import atomic_write_bytes, atomic_write_json
    from bench.store.campaign import CampaignStatus, campaign_status
    from bench.store.load import load_results, load_traces
    from bench.store.parquet_rows import load_manifest
    from bench.store.references import load_reference, save_reference
    from bench.store.versions import RESULTS_READERS, upgraded
    from bench.store.write import ResultsWriter
    from bench.store.writer_claim import acquire_claim, read_claim

_WHERE = {
    "RESULTS_READERS": "bench.store.versions",
    "upgraded": "bench.store.versions",
    "CampaignStatus": "bench.store.campaign",
    "ResultsWriter": "bench.store.write",
    "acquire_claim": "bench.store.writer_claim",
    "atomic_write_bytes": "bench.store.atomic_files",
    "atomic_write_json": "bench.store.atomic_files",
    "campaign_status": "bench.store.campaign",
    "load_manifest": "bench.store.parquet_rows",
    "load_reference": "bench.store.references",
    "load_results": "bench.store.load",
    "load_traces": "bench.store.load",
    "read_claim": "bench.store.writer_claim",
    "save_reference": "bench.store.references",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _WHERE, name)


__all__ = [
    "RESULTS_READERS", "CampaignStatus", "ResultsWriter", "acquire_claim", "atomic_write_bytes",
    "atomic_write_json", "campaign_status", "load_manifest", "load_reference", "load_results",
    "load_traces",
    "read_claim", "save_reference", "upgraded",
]  # fmt: skip
