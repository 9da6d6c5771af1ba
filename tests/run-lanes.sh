#!/usr/bin/env bash
# `make test`'s lint and pytest, all at once, in three lanes. Tests that boot real vLLM
# servers (marker vllm) pin their boots to this machine's cores, so they run one at a time
# in one pytest; the namespace test-bed tests that boot no vLLM (marker testbed, fake
# servers) run one at a time in a second, since they wait on Ray and Slurm timers far more
# than they compute (alone: 190 s and 110 CPU-s); a third runs everything else (fake
# servers, unit tests). The first two lanes' logs are printed at the end. Measured on a
# 2-core VM: 18 min for two halves at once vs 21 min one after the other (one real boot
# keeps ~1 core busy; the rest waits on sockets, timers and Ray start-up much of the time);
# then three lanes: 15:38-17:08 from fresh clones (3 runs), against 16:05-18:21 for two.
set -u
PYTHON=${1:?usage: tests/run-lanes.sh PYTHON LOG [LINT-COMMAND]}
LOG=${2:?usage: tests/run-lanes.sh PYTHON LOG [LINT-COMMAND]}
LINT=${3:-true}
# pytest through tests/run_pytest.py: its status, without the interpreter's teardown (where
# Ray's native threads once crashed the process after every test had passed).
RUN=("$PYTHON" "$(dirname "$0")/run_pytest.py")
# Each lane's per-test wall and machine CPU (run_pytest.py), ranked by wall at the end.
rm -f "$LOG.cost" "$LOG.bed.cost" "$LOG.other.cost"
REAL="vllm"
# Beside the real lane rather than in it: the real lane was the longest (CI: 16:39 against
# 13:14), and these mostly sleep. Two beds up at once take different subnets
# (cluster/testbed.py), each with its own munged, slurmctld port and per-host /tmp.
BED="testbed and not vllm"
# Lint (ruff, mypy: about 30 s of one core on a fresh clone) beside the tests rather than
# before them: the lanes leave part of a core idle while they wait on sockets and timers.
bash -c "$LINT" >"$LOG.lint" 2>&1 &
lint=$!
# OpenMP threads that wait by sleeping, not spinning: a vLLM server's pools spin between
# ops on cores the other lanes need (bench_boot_phases.py: one boot alone 62 -> 47 CPU-s;
# numerics unchanged: the demo at concurrency 1 counted the very same acceptance with it).
SPECAB_TEST_COST="$LOG.cost" OMP_WAIT_POLICY=PASSIVE "${RUN[@]}" -p no:cacheprovider \
    -m "$REAL" >"$LOG" 2>&1 &
real=$!
SPECAB_TEST_COST="$LOG.bed.cost" OMP_WAIT_POLICY=PASSIVE "${RUN[@]}" -p no:cacheprovider \
    -m "$BED" >"$LOG.bed" 2>&1 &
bed=$!
# A background job of a script ignores Ctrl-C: pass an interrupt on to it.
trap 'kill -TERM "$real" "$bed" "$lint" 2>/dev/null; wait "$real" "$bed" "$lint"; exit 130' INT TERM
# One OpenMP/BLAS thread there: the other lanes keep both cores busy, and two threads per
# torch op on busy cores ran a training test 9x slower than alone (CI: 73 s against 8 s).
SPECAB_TEST_COST="$LOG.other.cost" OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
    "${RUN[@]}" -m "not ($REAL or $BED)"
rest=$?
wait "$real"
real_rc=$?
wait "$bed"
bed_rc=$?
wait "$lint"
lint_rc=$?
echo "==================== lint (log: $LOG.lint) ===================="
cat "$LOG.lint"
echo "==================== test-bed tests without vLLM (log: $LOG.bed) ===================="
cat "$LOG.bed"
echo "==================== real vLLM tests (log: $LOG) ===================="
cat "$LOG"
echo "==================== where the time went (each lane's costliest tests) ===================="
"$PYTHON" "$(dirname "$0")/../benchmarks/bench_lanes.py" --costs "$LOG.cost" "$LOG.bed.cost" \
    "$LOG.other.cost" || echo "(the cost tables could not be printed)"
echo "exit status: lint $lint_rc, other tests $rest, test-bed tests $bed_rc, real vLLM tests $real_rc"
[ "$lint_rc" -eq 0 ] && [ "$rest" -eq 0 ] && [ "$bed_rc" -eq 0 ] && [ "$real_rc" -eq 0 ]
