#!/bin/bash
# Hypothesis 36 at msm_h's size (bench/NOTES.md session 35): the G1 MSM of 2^27 points
# through msm() in chunks within ${CHUNK_GIB:-44} GiB (the proof's path: one bucket array
# for every chunk, reduced once), at each window width in $WINDOWS (default 16 20 22 18),
# every result checked against the dot product ($ARGS: more bench.ntt_msm flags, e.g.
# "--g1-configs fused_running" for each width's variant); records and logs in $OUT:
#
#   JAXPROVE_COMMIT=<sha> bash bench/device/windows.sh
#
# One process per width (a width's compiles and buffers do not touch the next); the whole
# under ${LIMIT:-480} s, a step out of time cut and the rest skipped.
set -u
: "${OUT:?windows.sh writes to \$OUT}"
export JAXPROVE_CACHE=${JAXPROVE_CACHE:-/tmp/jc} PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
S=$SECONDS
L=${LIMIT:-480}
source "$(dirname "$0")/steps.sh"
ws=(${WINDOWS:-16 20 22 18})
i=0
for c in "${ws[@]}"; do
    i=$((i + 1))
    step msm${LOG_N:-27}_c$c $((L * i / ${#ws[@]})) python3 -m bench.ntt_msm --g1 ${LOG_N:-27} --windows $c \
        --chunk-gib ${CHUNK_GIB:-44} ${ARGS:-} --out "$OUT/msm${LOG_N:-27}.jsonl"
done
summary
