#!/bin/bash
# Session 35's unmeasured MSM changes and the window model's re-fit, in one short device call
# (bench/NOTES.md "Device plan", step 1), every result checked; records and logs in $OUT:
#
#   JAXPROVE_COMMIT=<sha> bash bench/device/refit.sh
#
# 1. 2^27 in chunks within 44 GiB (the proof's msm_h path) at 20, 16 and 22 bits, each with
#    and without the one-kernel running sums (MSMConfig.fused_running, hypothesis 67);
# 2. where the chunked 20-bit MSM's time goes now (bench.profile);
# 3. the re-fit's smaller sizes: 2^20 and 2^22 at 12-16 bits, 2^24 at 16, 18, 20 (unchunked).
# Then `python3 -m bench.fit_windows $OUT/msm*.jsonl --exclude _running` re-fits the bucket
# weight (`ops.msm.BUCKET_WEIGHTS`; with `--case-prefix msm_G1_xyzz_bn32w1_cap200_running`: the
# fused running sums' own fit).
# The whole under ${LIMIT:-540} s; a step out of time is cut and the rest skipped.
set -u
: "${OUT:?refit.sh writes to \$OUT}"
export OUT
export JAXPROVE_CACHE=${JAXPROVE_CACHE:-/tmp/jc} PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
S=$SECONDS
L=${LIMIT:-540}
D=$(dirname "$0")
source "$D/steps.sh"
W="bash $D/windows.sh"
left() { echo $(( $1 - SECONDS + S - 5 )); }     # a nested windows.sh's share of the time
T1=$((L * 40 / 100)) T2=$((L * 50 / 100)) T3=$((L * 66 / 100)) T4=$((L * 83 / 100))
step msm27 $T1 env LOG_N=27 WINDOWS="20 16 22" CHUNK_GIB=44 \
    ARGS="--g1-configs fused_running" LIMIT=$(left $T1) $W
step profile $T2 python3 -m bench.profile --case msm --log-n 27 --window 20 \
    --budget-gib 44 --reps 2 --top 30 --out "$OUT/profile.jsonl"
step msm20 $T3 env LOG_N=20 WINDOWS="12 13 14 15 16" CHUNK_GIB=1000 LIMIT=$(left $T3) $W
step msm22 $T4 env LOG_N=22 WINDOWS="12 13 14 15 16" CHUNK_GIB=1000 LIMIT=$(left $T4) $W
step msm24 "$L" env LOG_N=24 WINDOWS="16 18 20" CHUNK_GIB=1000 LIMIT=$(left $L) $W
summary
