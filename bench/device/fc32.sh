#!/bin/bash
# One full 32GiB partition of $KIND (default porep: 130,278,541 constraints; window-post:
# 125,305,057; both domain 2^27) on the H200, as a detached pipeline: a device call may run 10 minutes, this takes longer, so
# the device call starts it with `setsid` and later calls read its progress.
#
#   setsid bash bench/device/fc32.sh </dev/null >/dev/null 2>&1 &     # call 1
#   bash bench/device/poll.sh 560                                      # later calls, back to back
#
# 1. record + extract on the host CPU, stored under /tmp/fc32 (bench.filecoin
#    --circuit-dir), and beside it on the GPU: the kind's 32GiB witness program into the
#    compilation cache, then the small cases $BESIDE (kind:size ..., default none;
#    each costs 5-8 min of compiles; GPU work never overlaps a timed run: the prove
#    step waits for it);
# 2. the proof in streaming mode (keys built split in host memory, MSMs within a
#    16 GiB budget: the 16 GB-card path).
#    With RESIDENT=1 the same process then places the key on the device and proves
#    again (bench.filecoin --then-resident: one setup for both modes; the <= 1.5 s goal);
#    STREAM_REPS=0 with it skips the streaming proofs and their compiles.
#    With SIXTEEN=1 instead: the 16 GB mode (issue 7) — after the setup a ballast leaves
#    ${BUDGET_GIB:-14} GiB of the pool free (bench.filecoin --device-budget-gib), a, b, c
#    and h out of core within ${OOC_GIB:-9} GiB, each MSM within ${MSM_GIB:-5} GiB (HOST_W=1:
#    the witness in host memory, h on the device, OOC_GIB default 13; PINNED=1: the key's
#    host vectors in pinned memory, --pinned-key, not with RESIDENT=1); with
#    RESIDENT=1 as well, the ballast then goes and the same key is proved resident.
#    PROVE=0 skips step 2 (the recorded circuit for $AFTER_SH alone, e.g. bench.profile's
#    spmv_host case over $CIRCUIT_DIR).
# 3. the small cases $AFTER (default none).
# $BESIDE_SH and $AFTER_SH: shell commands run after the beside list and after the after
# list (bash -c, in the repository, $R exported; output in beside.log / after.log).
# Recorded in bench/results/README.md with each run's values.
# Everything lands in $RUN_DIR (default /tmp/run); `done` marks the end.
# bench/device/poll.sh reads it (and fails at once on a fresh machine); once it is done,
# poll.sh packs the compilation cache into $OUT for the next session (bench/device/cache.sh:
# call 1 names `.jc` in `carry`, and the pipeline starts by unpacking it).
set -u
R=${RUN_DIR:-/tmp/run}
K=${KIND:-porep} Z=${SIZE:-32GiB} D=${CIRCUIT_DIR:-/tmp/fc32}   # SIZE: smaller, to try the script
mkdir -p "$R"
# ops.aot's store: a program traced and compiled by one step is loaded by the next
# process of this session without tracing (hypothesis 30, bench/NOTES.md); its keys
# hash the sources, so it is not carried to the next session (the XLA cache is)
export JAXPROVE_AOT=${JAXPROVE_AOT:-/tmp/aot}
export JAXPROVE_CACHE=${JAXPROVE_CACHE:-/tmp/jc} PYTHONUNBUFFERED=1 R
# The 16 GB mode compiles without XLA's autotuning (${AUTOTUNE:-0}, every process alike, so
# the warm-up's compiles are the prove step's cache hits): the autotuner profiles candidate
# fusions on scratch buffers as large as their operands, a transient no memory plan
# counts (a 3.89 GiB one at 2^27 ended session 23's run: bench/NOTES.md hypothesis 43).
[ -n "${SIXTEEN:-}" ] && export XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_autotune_level=${AUTOTUNE:-0}"
say() { echo "[$(date +%T)] $*" >> "$R/pipe.log"; }
say "start at ${JAXPROVE_COMMIT:-unknown commit} XLA_FLAGS=${XLA_FLAGS:-}"
say "$(bash "$(dirname "$0")/cache.sh" unpack 2>&1)"   # a carried cache (`carry: [".jc"]`), if any
small() {   # kind:size ... one bench.filecoin process each (own peak), in turn
    [ $# -gt 0 ] && bash "$(dirname "$0")/kinds.sh" "$@"
}
hook() {    # name command: a BESIDE_SH / AFTER_SH command, if any
    [ -z "$2" ] && return
    say "$1: $2"
    XLA_PYTHON_CLIENT_PREALLOCATE=false bash -c "$2" > "$R/$1.log" 2>&1
    say "$1 rc $?"
}
(JAX_PLATFORMS=cpu timeout 1200 python3 -m bench.filecoin --kinds "$K" --sizes "$Z" \
    --record-only --circuit-dir "$D" --out "$R/${K}32.jsonl" > "$R/record.log" 2>&1
 say "record rc $?") &
REC=$!
(XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 600 python3 -c "
import time, jax
from jaxprove.cache import enable_compilation_cache as e; e()
from bench import filecoin as F
s = F.spec_for('$K', '$Z'); t = time.perf_counter()
p = F.synthetic_parts('$K', '$Z', directory='$D'); print('synthetic', time.perf_counter() - t, flush=True)
t = time.perf_counter(); jax.block_until_ready(s.witness(p[:1])); print('witness first', time.perf_counter() - t)
st = jax.devices()[0].memory_stats() or {}   # nothing else on the device yet: the witness program's own peak
print('witness device peak GiB', st.get('peak_bytes_in_use', 0) / 2**30, 'in use after', st.get('bytes_in_use', 0) / 2**30)
t = time.perf_counter(); jax.block_until_ready(s.witness(p[:1])); print('witness warm', time.perf_counter() - t)
" > "$R/warm.log" 2>&1
 say "witness warm-up rc $?"
 small ${BESIDE-}
 hook beside "${BESIDE_SH-}") &
GPU=$!
wait $REC $GPU
say "proving"
# JAX_LOG_COMPILES: session 14's first streaming WindowPoSt proof was still compiling after
# 12 minutes with nothing to say where (bench.compile_log reads the lines)
# EXPLAIN=1 adds JAX_EXPLAIN_CACHE_MISSES=1, off by default: on jax 0.11.2 a tracing cache
# miss under it (here: the 16 GB mode's jax.default_device context) breaks Pallas-Triton's
# lowering of a reduction ("not enough values to unpack" in _reduction_lowering; session 38,
# bench/device/probe_bits.py), which ended that run in msm_a
if [ -n "${SIXTEEN:-}" ]; then
    # HOST_W=1: the witness in host memory (--host-witness, hypothesis 83): the budget then
    # counts every device byte before the MSMs (three vectors for h), so it defaults to 13
    OOC=${OOC_GIB:-9}; [ -n "${HOST_W:-}" ] && OOC=${OOC_GIB:-13}
    MODE="--msm-budget-gib ${MSM_GIB:-5} --out-of-core-gib $OOC --device-budget-gib ${BUDGET_GIB:-14} ${RESIDENT:+--then-resident} ${HOST_W:+--host-witness} ${PINNED:+--pinned-key}"
else
    MODE="--msm-budget-gib 16 ${RESIDENT:+--then-resident} ${STREAM_REPS:+--streaming-reps $STREAM_REPS}"
fi
if [ "${PROVE:-1}" = 0 ]; then
    say "prove step skipped (PROVE=0)"
else
env JAX_LOG_COMPILES=1 ${EXPLAIN:+JAX_EXPLAIN_CACHE_MISSES=1} XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 timeout 1500 python3 -m bench.filecoin --kinds "$K" \
    --sizes "$Z" --circuit-dir "$D" --cache --keys-in-host-memory $MODE \
    --no-verify --reps ${REPS:-5} --save "$R/fc" \
    --out "$R/${K}32.jsonl" > "$R/prove.log" 2>&1
say "prove rc $?"
fi
small ${AFTER-}
hook after "${AFTER_SH-}"
touch "$R/done"
