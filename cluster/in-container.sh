#!/usr/bin/env bash
# One command of a specab Slurm job inside this node's container, with Docker or podman
# (cluster/specab.sbatch runs every Ray step and the driver through it when
# SPECAB_CONTAINER_RUNTIME is docker or podman; pyxis/enroot needs no helper):
#
#   cluster/in-container.sh ROLE COMMAND [ARGS...]
#
# The container shares the node's network, process table, hostname and IPC (/dev/shm), as an
# enroot container does: Ray and vLLM bind the node's addresses, and a claim's pid and host
# mean the same inside and out. It mounts SPECAB_CONTAINER_VOLUMES (comma-separated, each
# PATH:PATH) and runs in the current directory. Environment variables reach it by name only
# (`-e NAME`: their values, tokens included, never appear on a command line), for the
# prefixes specab, Ray, Slurm, Hugging Face, NCCL/gloo, vLLM, CUDA and the compile caches
# use. Not root: docker gets `--user UID:GID`, rootless podman `--userns=keep-id`, so files on
# shared storage belong to the user. SPECAB_CONTAINER_OPTIONS adds run options (word-split).
#
# Its container is named specab-<job>-<host>-<role>. A TERM or INT (Slurm ending the step,
# scancel) is passed on to the command, which gets SPECAB_CONTAINER_STOP_S seconds (default:
# Slurm's KillWait less 10 s, since Slurm kills this script after KillWait) to end before the
# container is removed. A USR1 (the sbatch script's trap, asking the driver to stop: nothing
# is ending the step) is passed on as TERM, and the command gets SPECAB_GRACEFUL_STOP_S
# seconds (default 100, within the 120 s of Slurm's preemption warning) to stop its boots and
# release its claim. The container is removed on every exit of this script, and one of the
# same name left by an earlier run of this job on this node is removed before it starts.
set -euo pipefail

ROLE=${1:?usage: in-container.sh ROLE COMMAND [ARGS...]}
shift
RUNTIME=${SPECAB_CONTAINER_RUNTIME:?SPECAB_CONTAINER_RUNTIME: docker or podman}
IMAGE=${SPECAB_CONTAINER_IMAGE:?SPECAB_CONTAINER_IMAGE: the image every node runs}
NAME="specab-${SLURM_JOB_ID:-local}-$(hostname -s)-$ROLE"
# Within Slurm's KillWait (after which the step's processes, this one included, are killed
# and a container would be left to its runtime): 10 s less, at least 2 s.
KILL_WAIT=$(scontrol show config 2>/dev/null | awk '$1 == "KillWait" {print $3}')
STOP_S=${SPECAB_CONTAINER_STOP_S:-$(( ${KILL_WAIT:-30} > 12 ? ${KILL_WAIT:-30} - 10 : 2 ))}

ENVS=()
for var in $(compgen -e); do
    case $var in
        SPECAB_* | RAY_* | SLURM_* | HF_* | HUGGING_FACE_* | NCCL_* | GLOO_* | VLLM_* | \
            CUDA_* | NVIDIA_* | TORCH* | TRITON_* | FLASHINFER_* | OMP_* | HOME | USER | TZ)
            ENVS+=(-e "$var") ;;
    esac
done
VOLUMES=()
IFS=, read -ra paths <<<"${SPECAB_CONTAINER_VOLUMES:-}"
for path in "${paths[@]}"; do
    [[ -n "$path" ]] && VOLUMES+=(-v "$path")
done
USERS=()
if [[ $(id -u) != 0 ]]; then
    case $(basename "$RUNTIME") in
        podman*) USERS=(--userns=keep-id) ;;
        *) USERS=(--user "$(id -u):$(id -g)") ;;
    esac
fi
# shellcheck disable=SC2206  # options are words, as on a command line
OPTIONS=(${SPECAB_CONTAINER_OPTIONS:-})

remove() { "$RUNTIME" rm -f "$NAME" >/dev/null 2>&1 || true; }
remove
trap remove EXIT

"$RUNTIME" run --rm --name "$NAME" --label "specab.slurm_job=${SLURM_JOB_ID:-}" \
    --network host --pid host --uts host --ipc host \
    "${USERS[@]}" "${ENVS[@]}" "${VOLUMES[@]}" -w "$PWD" "${OPTIONS[@]}" \
    "$IMAGE" "$@" &
CLIENT=$!

stop() {
    "$RUNTIME" stop -t "$STOP_S" "$NAME" >/dev/null 2>&1 || true
}
DEADLINE=""
graceful() {
    "$RUNTIME" kill --signal TERM "$NAME" >/dev/null 2>&1 || true
    DEADLINE=$((SECONDS + ${SPECAB_GRACEFUL_STOP_S:-100}))  # then stopped as Slurm would
}
trap stop TERM INT
trap graceful USR1

rc=0
wait "$CLIENT" || rc=$?
while kill -0 "$CLIENT" 2>/dev/null; do  # a trapped signal ends `wait` early: wait again
    if [[ -n $DEADLINE ]]; then  # stopping gracefully: look at the deadline each second
        ((SECONDS < DEADLINE)) || stop
        sleep 1
        continue
    fi
    rc=0
    wait "$CLIENT" || rc=$?
done
if [[ -n $DEADLINE ]]; then
    rc=0
    wait "$CLIENT" || rc=$?  # its exit status, kept by bash once it ended
fi
exit "$rc"
