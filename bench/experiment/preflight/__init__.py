"""Every user mistake an experiment file can hold, found before anything is written (before
the results directory, Ray or any boot): `experiment_checks` (probe sets, patches compile,
K, interpreters, per-request support), `model_paths` (paths and offline hub ids) and
`build_refusals` (settings the arm's vLLM source refuses)."""

from bench.experiment.preflight.experiment_checks import Preflight, preflight

__all__ = ["Preflight", "preflight"]
