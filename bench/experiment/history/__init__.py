"""A git range as the points of a bisection: the commits read from git (`git_points`: each
point's subject, date, files, what it serves over the build and what it leaves unserved) and
made into the experiment's arms (`points_as_arms`: one diff arm or build per point, the
served diffs under specab's cache). `load_experiment` is how a command that boots, plans or
checks arms reads an experiment file: the spec layer's parsing runs no git and writes
nothing."""

from bench.experiment.history.git_points import history_points, needs_build
from bench.experiment.history.points_as_arms import (
    expand_history,
    is_served_diff,
    load_experiment,
    served_diffs_in,
)

__all__ = [
    "expand_history",
    "history_points",
    "is_served_diff",
    "load_experiment",
    "needs_build",
    "served_diffs_in",
]
