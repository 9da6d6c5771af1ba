#!/usr/bin/env bash
# `make test`'s lint and pytest, all at once. Tests that boot real vLLM servers (marker vllm)
# pin their boots to this machine's cores, so they run one at a time in one pytest, with the
# namespace test-bed tests (marker testbed), its output kept in a log printed at the end; a
# second pytest runs everything else beside it (fake servers, unit tests). Measured on this
# 2-core VM: 18 min for both halves at once vs 21 min one after the other (one real boot
# keeps ~1 core busy; the rest waits on sockets, timers and Ray start-up much of the time).
set -u
PYTHON=${1:?usage: tests/run-halves.sh PYTHON LOG [LINT-COMMAND]}
LOG=${2:?usage: tests/run-halves.sh PYTHON LOG [LINT-COMMAND]}
LINT=${3:-true}
# pytest through tests/run_pytest.py: its status, without the interpreter's teardown (where
# Ray's native threads once crashed the process after every test had passed).
RUN=("$PYTHON" "$(dirname "$0")/run_pytest.py")
# The real half also takes the namespace test-bed tests: they wait on Ray and Slurm timers
# more than they compute, and the other half was the longer one (CI: 26.7 vs 18.8 min).
REAL="vllm or testbed"
# Lint (ruff, mypy: about 30 s of one core on a fresh clone) beside the tests rather than
# before them: the halves leave part of a core idle while they wait on sockets and timers.
bash -c "$LINT" >"$LOG.lint" 2>&1 &
lint=$!
# OpenMP threads that wait by sleeping, not spinning: a vLLM server's pools spin between
# ops on cores the other half needs (bench_boot_phases.py: one boot alone 62 -> 47 CPU-s;
# numerics unchanged: the demo at concurrency 1 counted the very same acceptance with it).
OMP_WAIT_POLICY=PASSIVE "${RUN[@]}" -p no:cacheprovider -m "$REAL" >"$LOG" 2>&1 &
real=$!
# A background job of a script ignores Ctrl-C: pass an interrupt on to it.
trap 'kill -TERM "$real" "$lint" 2>/dev/null; wait "$real" "$lint"; exit 130' INT TERM
# One OpenMP/BLAS thread there: the real half keeps both cores busy, and two threads per
# torch op on busy cores ran a training test 9x slower than alone (CI: 73 s against 8 s).
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 "${RUN[@]}" -m "not ($REAL)"
rest=$?
wait "$real"
real_rc=$?
wait "$lint"
lint_rc=$?
echo "==================== lint (log: $LOG.lint) ===================="
cat "$LOG.lint"
echo "==================== real vLLM and test-bed tests (log: $LOG) ===================="
cat "$LOG"
echo "exit status: lint $lint_rc, other tests $rest, real vLLM and test-bed tests $real_rc"
[ "$lint_rc" -eq 0 ] && [ "$rest" -eq 0 ] && [ "$real_rc" -eq 0 ]
