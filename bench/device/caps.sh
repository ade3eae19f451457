#!/bin/bash
# Hypothesis 64 (bench/NOTES.md), register caps, in one short device call: the same
# measurements without a cap and under caps of 168, 200 (in one-warp blocks) and 128
# registers, every process alike, so the records compare on one machine; records and logs
# into $OUT, the whole under ${LIMIT:-540} s:
#
#   JAXPROVE_COMMIT=<sha> bash bench/device/caps.sh
#
# 1. bench.arith, uncapped: the products' rate with little memory traffic (Fq.pow16,
#    Fr.pow16: probe 63) beside Fq.mul and G1.madd;
# 2. bench.ntt_msm: NTT 2^24 and the G1 MSM 2^24 (uncapped also the MSM's stage profile;
#    capped also without the prefetching walk, whose point costs 15 registers).
# Every result is checked (the NTT by its inverse, the MSMs against the XLA reference,
# the kernels against the CPU).  A step that runs out of time is cut; later steps skipped.
# Since session 33 the NTT passes (168) and the MSM's walk (200, one-warp blocks) carry
# measured caps of their own (bench/NOTES.md hypothesis 64): the uncapped steps below measure
# those defaults, and $JAXPROVE_MAX_REGISTERS caps every other kernel.
set -u
: "${OUT:?caps.sh writes to \$OUT}"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
S=$SECONDS
L=${LIMIT:-540}
source "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
# does jaxlib's Triton carry the cap to the PTX?  One small capped kernel, XLA's dump searched
JAXPROVE_MAX_REGISTERS=100 XLA_FLAGS="--xla_dump_to=/tmp/capdump" timeout 120 python3 -c "
import jax
from ops.field import Fq
x = Fq.random(jax.random.key(0), (1024,))
jax.block_until_ready(Fq.mul(x, x))" > "$OUT/capdump.log" 2>&1
echo "cap in the dumped PTX: $(grep -rl 'maxnreg 100' /tmp/capdump 2>/dev/null | head -3 | tr '\n' ' ')" \
    "(files dumped: $(ls /tmp/capdump 2>/dev/null | wc -l))"
step arith $((L * 18 / 100)) python3 -m bench.arith --threads 4 \
    --plan "Fq.pow16,Fr.pow16,Fq.mul,G1.madd:default:24" --out "$OUT/arith.jsonl"
step msm $((L * 42 / 100)) python3 -m bench.ntt_msm --ntt 24 --g1 24 --profile 24 \
    --out "$OUT/msm.jsonl"
# 168: 12 warps per SM in blocks of 4 (the walk spills 408 B; 256 B without prefetch)
JAXPROVE_MAX_REGISTERS=168 step msm $((L * 62 / 100)) python3 -m bench.ntt_msm --ntt 24 \
    --g1 24 --g1-configs no_prefetch --out "$OUT/msm.jsonl"
# 200 in one-warp blocks: 10 warps per SM, the walk without prefetch spills nothing
JAXPROVE_MAX_REGISTERS=200 step msm $((L * 80 / 100)) python3 -m bench.ntt_msm --g1 24 \
    --g1-block 32:1 --g1-configs no_prefetch --out "$OUT/msm.jsonl"
# 128: 16 warps per SM, the walk spills 1,304 B
JAXPROVE_MAX_REGISTERS=128 step msm "$L" python3 -m bench.ntt_msm --ntt 24 --g1 24 \
    --out "$OUT/msm.jsonl"
summary
