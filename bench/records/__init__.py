"""The results contract (docs/results.md, schema_version 1) as typed records: one row per boot
attempt and per measured probe with the Parquet schemas they are stored in (`boots_and_probes`), the
manifest (`manifest`), a gate's stored reference (`reference`), a trace's `trace.json`
(`trace_record`) and a run as loaded
(`loaded_results`: manifest, boots and probes together). Everyone's vocabulary:
every package reads and builds these, none of them computes anything."""

from bench.records.boots_and_probes import (
    BOOT_SCHEMA,
    PARITY_COLUMNS,
    PROBE_OPTIONAL,
    PROBE_SCHEMA,
    SCHEMA_VERSION,
    AcceptanceSource,
    BootRecord,
    FailedPhase,
    ProbeRecord,
    boot_file_stem,
    token_ids_sha256,
)
from bench.records.claim import CLAIM_FILE, InFlightBoot, WriterClaim
from bench.records.count_lists import list_lengths, list_matrix, list_values
from bench.records.loaded_results import Results
from bench.records.manifest import (
    CONFIRM_LOOKS,
    LOOKS,
    PLAN_LOOKS,
    SCREEN_SPENDING,
    SCREEN_SPREAD,
    Manifest,
    ManifestBisect,
    ManifestScreen,
    ManifestSweep,
    SweepCell,
    looks_ending_at,
    planned_boots,
)
from bench.records.metrics import (
    ACCEPTANCE_METRICS,
    ALL_METRICS,
    DEFAULT_MARGINS,
    METRIC,
    PRIMARY_DEFAULT,
    REGISTRY,
    SPEED_METRIC,
    Metric,
    short_name,
)
from bench.records.reference import (
    REFERENCE_VERSION,
    Machine,
    Reference,
    ReferenceArm,
    ReferenceBoot,
)
from bench.records.replication import (
    FEW_BOOTS_LABEL,
    MIN_USEFUL_BOOTS,
    replication_advice,
    too_few_boots,
)
from bench.records.trace_record import ConfigField, TensorDiff, TraceResult

__all__ = [
    "ACCEPTANCE_METRICS",
    "ALL_METRICS",
    "BOOT_SCHEMA",
    "CLAIM_FILE",
    "CONFIRM_LOOKS",
    "DEFAULT_MARGINS",
    "FEW_BOOTS_LABEL",
    "LOOKS",
    "METRIC",
    "MIN_USEFUL_BOOTS",
    "PARITY_COLUMNS",
    "PLAN_LOOKS",
    "PRIMARY_DEFAULT",
    "PROBE_OPTIONAL",
    "PROBE_SCHEMA",
    "REFERENCE_VERSION",
    "REGISTRY",
    "SCHEMA_VERSION",
    "SCREEN_SPENDING",
    "SCREEN_SPREAD",
    "SPEED_METRIC",
    "AcceptanceSource",
    "BootRecord",
    "ConfigField",
    "FailedPhase",
    "InFlightBoot",
    "Machine",
    "Manifest",
    "ManifestBisect",
    "ManifestScreen",
    "ManifestSweep",
    "Metric",
    "ProbeRecord",
    "Reference",
    "ReferenceArm",
    "ReferenceBoot",
    "Results",
    "SweepCell",
    "TensorDiff",
    "TraceResult",
    "WriterClaim",
    "boot_file_stem",
    "list_lengths",
    "list_matrix",
    "list_values",
    "looks_ending_at",
    "planned_boots",
    "replication_advice",
    "short_name",
    "token_ids_sha256",
    "too_few_boots",
]  # fmt: skip
