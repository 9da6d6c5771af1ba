#!/usr/bin/env bash
# Submit a specab experiment as a Ray job to a running Ray cluster (started with the
# dashboard, which serves the job API on port 8265), shipping bench/ and arms/ (experiment
# files, patches, probe sets) with `runtime_env`:
#
#   RAY_DASHBOARD=http://HEAD:8265 cluster/ray-job-submit.sh arms/my-experiment.toml \
#       --results-dir /shared/results/my-experiment [run-ab options]
#
# The job's driver runs on the head node inside the uploaded working dir; `--address auto`
# makes run-ab join that cluster. Give --results-dir on a filesystem you can read after the
# job (the working dir is a temporary copy). Every node needs Python with specab's
# dependencies and the vLLM build under test (the arm's `python`, or the node's default);
# model paths in the experiment file must exist on every node (or be hub names cached there).
# SPECAB_JOB_PYTHON: the interpreter the job's driver runs on the head node (default: the
# `python3` on the head's PATH; point it at the venv that has specab's dependencies).
# SPECAB_JOB_ID: a submission id for `ray job logs/status/stop` (default: Ray's own).
set -euo pipefail

EXPERIMENT=${1:?usage: RAY_DASHBOARD=http://HEAD:8265 $0 EXPERIMENT.toml [run-ab options]}
shift
DASHBOARD=${RAY_DASHBOARD:?set RAY_DASHBOARD=http://HEAD:8265}
cd "$(dirname "$0")/.."

RUNTIME_ENV='{
  "excludes": [".git", ".venv", "results", "notebooks", "tests", "docs", "site", "*.parquet",
               "arms/demo/models", ".mypy_cache", ".ruff_cache", ".pytest_cache", "*.egg-info",
               "__pycache__"],
  "env_vars": {"HF_HUB_OFFLINE": "1"}
}'

ID=()
[ -n "${SPECAB_JOB_ID:-}" ] && ID=(--submission-id "$SPECAB_JOB_ID")
exec ray job submit \
    --address "$DASHBOARD" \
    "${ID[@]}" \
    --working-dir . \
    --runtime-env-json "$RUNTIME_ENV" \
    -- "${SPECAB_JOB_PYTHON:-python3}" -m bench.cli run-ab "$EXPERIMENT" --address auto --quiet "$@"
