#!/usr/bin/env bash
# One node's Ray for a specab Slurm job (cluster/specab.sbatch runs it in each node's step):
#
#   cluster/ray-node.sh RAY start --block [OPTIONS...]
#
# Runs the command, and runs it again when it dies while starting. Ray gives a new raylet
# 30 s, fixed in its code, to register with the GCS ("The current node timed out during
# startup"); a loaded node (an image still importing, a boot compiling, a head whose GCS is
# still coming up) can miss that window, and the node would then never join. A start that
# exits non-zero within SPECAB_RAY_START_S seconds (default 120) is tried again, at most
# SPECAB_RAY_START_TRIES times in all (default 3); nothing of it is left over, since
# `ray start --block` ties its processes' lives to its own. Once Ray has been up longer than
# that, its end ends the step, as before. A TERM or INT (Slurm ending the step) is passed on
# and never followed by another try.
set -u

START_S=${SPECAB_RAY_START_S:-120}
TRIES=${SPECAB_RAY_START_TRIES:-3}
stopping=0
pid=""
on_signal() {
    stopping=1
    [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null
}
trap on_signal TERM INT

rc=0
for ((try = 1; try <= TRIES; try++)); do
    started=$SECONDS
    "$@" &
    pid=$!
    wait "$pid"
    while kill -0 "$pid" 2>/dev/null; do  # a trapped signal ends `wait` early: wait again
        wait "$pid"
    done
    # Its own exit status: a `wait` that a trapped signal ended says 128+N, not the child's
    # (the child may be gone by the check above), and bash keeps a finished child's status.
    wait "$pid"
    rc=$?
    ran=$((SECONDS - started))
    if ((rc == 0 || stopping || ran >= START_S || try == TRIES)); then
        break
    fi
    echo "specab: Ray on $(hostname -s) failed while starting (exit $rc after ${ran} s," \
        "try $try of $TRIES): starting it again" >&2
    sleep 2
done
exit "$rc"
