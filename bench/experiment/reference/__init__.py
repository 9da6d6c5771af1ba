"""Reference arms outside their file's table: what defines a reference forward (its module's
source and its interpreter's torch and transformers: `forward_source`), whether its
interpreter can run it (`interpreter_check`, before anything is written), and the job its
runner is given (`runner_job`: the probes, K and the models). The runner itself is
`runtime/specab_reference.py`, run by the arm's own interpreter."""

from bench.experiment.reference.forward_source import forward_paths, reference_definition
from bench.experiment.reference.interpreter_check import check_reference_interpreter
from bench.experiment.reference.runner_job import RUNNER, runner_job

__all__ = [
    "RUNNER",
    "check_reference_interpreter",
    "forward_paths",
    "reference_definition",
    "runner_job",
]
