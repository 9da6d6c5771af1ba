"""A `git diff` as an arm: its files read and classified (`files`), applied to the arm's own
build and refused where it cannot be or changes nothing (`apply`), the build it is applied
to, an interpreter or an image (`builds`), and whether two versions of a module run the same
code, with the model modules a served model imports (`identity`)."""

from bench.experiment.launch.code_diffs.apply import AppliedDiff
from bench.experiment.launch.code_diffs.builds import applied_diff, files_reader
from bench.experiment.launch.code_diffs.files import DIFF_SUFFIXES, commit_refused, is_diff
from bench.experiment.launch.code_diffs.identity import (
    MODELS_PACKAGE,
    loaded_model_modules,
    model_modules,
    same_code,
)

__all__ = [
    "DIFF_SUFFIXES", "MODELS_PACKAGE", "AppliedDiff", "applied_diff", "commit_refused",
    "files_reader", "is_diff", "loaded_model_modules", "model_modules", "same_code",
]  # fmt: skip
