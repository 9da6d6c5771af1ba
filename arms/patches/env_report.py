"""Example patch: report selected environment variables from the engine-core process.

Proves an arm's `env` reached the process that runs the model. Set SPECAB_ENV_REPORT to a
comma-separated list of variable names (in the arm's env, next to the variables).
"""

import os

from specab_patch import report_applied, when_imported


def apply(_module):
    names = [n for n in os.environ.get("SPECAB_ENV_REPORT", "").split(",") if n]
    report_applied("env_report", ";".join(f"{n}={os.environ.get(n, '<unset>')}" for n in names))


when_imported("vllm.v1.engine.core", apply)
