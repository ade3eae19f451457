#!/bin/bash
# One full 32GiB PoRep partition (130,278,541 constraints, domain 2^27) on the H200,
# as a detached pipeline: a device call may run 10 minutes, this takes longer, so
# the device call starts it with `setsid` and later calls read its progress.
#
#   setsid bash bench/device/porep32.sh </dev/null >/dev/null 2>&1 &     # call 1
#   cat /tmp/run/pipe.log; ls /tmp/run/done                             # later calls
#
# 1. record + extract on the host CPU, stored under /tmp/fc32 (bench.filecoin
#    --circuit-dir), and beside it on the GPU: the 32GiB witness program into the
#    compilation cache, then WindowPoSt 8MiB (GPU work never overlaps a timed run:
#    the prove step waits for both);
# 2. the proof in streaming mode (keys built split in host memory, MSMs within a
#    16 GiB budget): the resident-key plan (~146 GiB) exceeds the H200.
# Everything lands in $RUN_DIR (default /tmp/run); `done` marks the end.
set -u
R=${RUN_DIR:-/tmp/run}
mkdir -p "$R"
export JAXPROVE_CACHE=${JAXPROVE_CACHE:-/tmp/jc} PYTHONUNBUFFERED=1
say() { echo "[$(date +%T)] $*" >> "$R/pipe.log"; }
say "start at ${JAXPROVE_COMMIT:-unknown commit}"
(JAX_PLATFORMS=cpu timeout 1200 python3 -m bench.filecoin --kinds porep --sizes 32GiB \
    --record-only --circuit-dir /tmp/fc32 --out "$R/porep32.jsonl" > "$R/record.log" 2>&1
 say "record rc $?") &
REC=$!
(XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 600 python3 -c "
import random, time, jax
from jaxprove.cache import enable_compilation_cache as e; e()
from bench import filecoin as F
s = F.spec_for('porep', '32GiB'); t = time.perf_counter()
p = s.split(s.synthetic(random.Random(0))); print('synthetic', time.perf_counter() - t, flush=True)
t = time.perf_counter(); jax.block_until_ready(s.witness(p[:1])); print('witness first', time.perf_counter() - t)
t = time.perf_counter(); jax.block_until_ready(s.witness(p[:1])); print('witness warm', time.perf_counter() - t)
" > "$R/warm.log" 2>&1
 say "witness warm-up rc $?"
 XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 600 python3 -m bench.filecoin --kinds window-post \
    --sizes 8MiB --cache --no-verify --save "$R/fc" --out "$R/fc8.jsonl" > "$R/fc8.log" 2>&1
 say "window-post 8MiB rc $?") &
GPU=$!
wait $REC $GPU
say "proving"
XLA_PYTHON_CLIENT_MEM_FRACTION=0.92 timeout 1500 python3 -m bench.filecoin --kinds porep \
    --sizes 32GiB --circuit-dir /tmp/fc32 --cache --keys-in-host-memory --msm-budget-gib 16 \
    --no-verify --reps ${REPS:-3} --save "$R/fc" --out "$R/porep32.jsonl" > "$R/prove.log" 2>&1
say "prove rc $?"
touch "$R/done"
