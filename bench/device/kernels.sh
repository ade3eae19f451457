#!/bin/bash
# The kernel measurements of one short device call (bench/NOTES.md "Device plan", step 0),
# each bounded so the whole stays under ${LIMIT:-480} s, records and logs into $OUT:
#
#   JAXPROVE_COMMIT=<sha> bash bench/device/kernels.sh
#
# 1. NTT 2^24 and 2^27 and the G1 MSM at 2^24 (every result checked);
# 2. a 2^20 Groth16 proof, verified, saved (the new arithmetic end to end);
# 3. field and curve throughput (bench.arith);
# 4. the G2 MSM at 2^20.
# A step that runs out of time is cut; the steps after it are skipped.
set -u
: "${OUT:?kernels.sh writes to \$OUT}"
export JAXPROVE_CACHE=${JAXPROVE_CACHE:-/tmp/jc} PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
S=$SECONDS
source "$(dirname "$0")/steps.sh"
L=${LIMIT:-480}
step ntt_g1 $((L * 40 / 100)) python3 -m bench.ntt_msm --ntt 24,27 --g1 24 --out "$OUT/kernels.jsonl"
step groth16 $((L * 70 / 100)) python3 -m bench.groth16 --sizes 20 --cache --save "$OUT/g16" --out "$OUT/groth16.jsonl"
step arith $((L * 88 / 100)) python3 -m bench.arith --plan "Fq.mul,Fr.mul,G1.madd:default:24" --out "$OUT/arith.jsonl"
step g2 "$L" python3 -m bench.ntt_msm --g2 20 --out "$OUT/kernels.jsonl"
summary
