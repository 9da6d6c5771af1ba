"""Probe sets: the JSONL files an experiment runs (`probe_sets`), standard prompts shipped
inside installed packages (`bundled`: HumanEval), and prompt sets on users' disks imported as
probe sets (`importers`: MT-Bench, Spec-Bench, SPEED-Bench, ShareGPT, vLLM custom JSONL),
and a choice of prompts spread over their lengths (`length_spread`)."""

from bench.experiment.probes.bundled import (
    humaneval_probe_lines,
    humaneval_tasks,
    spread,
    write_probe_lines,
)
from bench.experiment.probes.importers import import_prompts
from bench.experiment.probes.length_spread import spread_by_length, spread_lines
from bench.experiment.probes.probe_sets import Probe, ProbeSet, load_probe_set, load_probe_sets

__all__ = [
    "Probe",
    "ProbeSet",
    "humaneval_probe_lines",
    "humaneval_tasks",
    "import_prompts",
    "load_probe_set",
    "load_probe_sets",
    "spread",
    "spread_by_length",
    "spread_lines",
    "write_probe_lines",
]
