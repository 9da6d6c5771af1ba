"""A results directory's manifest from the experiment side: the one place a
`bench.records.Manifest` is built (`build_manifest`), and what a resume may change without
mixing two versions of an arm (`resume_diff`), and which points of a git history run the
same code as the point before them (`history_identity`)."""

from bench.experiment.manifest.build_manifest import build_manifest
from bench.experiment.manifest.history_identity import same_as
from bench.experiment.manifest.resume_diff import (
    describe,
    diff,
    flatten,
    probe_sets_sha256,
    resume_changes,
)

__all__ = [
    "build_manifest",
    "describe",
    "diff",
    "flatten",
    "probe_sets_sha256",
    "resume_changes",
    "same_as",
]
