#!/bin/bash
# Hypothesis 65 (bench/NOTES.md), squares and sums of products as PTX (JAXPROVE_PTX
# with sqr,dot) against the shipped products alone, on one machine in one short call, every
# result checked (the MSMs against the XLA reference, the kernels against the CPU); then,
# 20-bit windows at 2^27 (hypothesis 36 again), the kernels' rates, and, if time is left,
# hypothesis 64's register cap of 200 in one-warp blocks with them:
#
#   JAXPROVE_COMMIT=<sha> bash bench/device/products.sh          # records and logs in $OUT
#
# (or as fc32.sh's BESIDE_SH with OUT=$R/products).  The whole under ${LIMIT:-400} s.
set -u
: "${OUT:?products.sh writes to \$OUT}"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
S=$SECONDS
L=${LIMIT:-400}
source "$(dirname "$0")/steps.sh"
OLD=mul,add,sub NEW=mul,add,sub,sqr,dot
JAXPROVE_PTX=$OLD step msm $((L * 25 / 100)) python3 -m bench.ntt_msm --g1 24 --g2 20 --out "$OUT/msm.jsonl"
JAXPROVE_PTX=$NEW step msm $((L * 45 / 100)) python3 -m bench.ntt_msm --g1 24 --g2 20 --out "$OUT/msm.jsonl"
# hypothesis 36 at 2^27 (msm_h's size): 20-bit windows cut the additions by 19%; at 2^24
# the reduction and the chunks' bucket scatter ate the gain, here they are 8× rarer
JAXPROVE_PTX=$NEW step msm27 $((L * 65 / 100)) python3 -m bench.ntt_msm --g1 27 --windows 16,20 \
    --out "$OUT/msm27.jsonl"
JAXPROVE_PTX=$OLD step arith $((L * 75 / 100)) python3 -m bench.arith \
    --plan "Fq.mul,Fq.square,Fq.pow16,G1.madd:default:24" --out "$OUT/arith.jsonl"
JAXPROVE_PTX=$NEW step arith $((L * 85 / 100)) python3 -m bench.arith \
    --plan "Fq.mul,Fq.square,Fq.pow16,G1.madd:default:24" --out "$OUT/arith.jsonl"
JAXPROVE_PTX=$NEW JAXPROVE_MAX_REGISTERS=200 step msm "$L" python3 -m bench.ntt_msm --g1 24 \
    --g1-block 32:1 --g1-configs no_prefetch --out "$OUT/msm.jsonl"
summary
