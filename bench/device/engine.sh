#!/bin/bash
# Issue 7's engine benchmarks on the H200 as a detached pipeline (like fc32.sh: a device
# call may run 10 minutes, this takes longer):
#
#   setsid bash bench/device/engine.sh </dev/null >/dev/null 2>&1 &   # call 1 (carry .jc)
#   bash bench/device/poll.sh 540                                     # later calls
#
# 1. the carried compilation cache unpacked (bench/device/cache.sh);
# 2. porep_shaped: $ROWS rows (default 4,000,000) x $PARTS partitions (10), 5 proofs:
#    latency and steady-state throughput, keys resident;
# 3. the same within a 16 GiB budget (streaming mode: the 16 GB-card path); `ooc`: within
#    16 GiB in the 16 GB mode (matrices in host memory, a, b, c, h out of core within
#    ${OOC_GIB:-9} GiB), the step that fits at the full ROWS=130278541;
# 4. mixed: PoRep-shaped jobs in flight while the real 32GiB WinningPoSt arrives every 5 s
#    (its latency under load);
# 4b. `kind`: the real $KIND (default porep) at $SIZE (32GiB) through the engine, 5 jobs of one
#    synthetic sector, its circuit from $CIRCUIT_DIR (fc32.sh's record step stores it there);
#    $KIND_ARGS adds bench.engine flags, e.g. the 16 GB mode on an H100:
#    KIND_ARGS="--budget-gb 16 --out-of-core-gb 13 --pinned-key" (then without autotuning);
# 5. `two` (on a machine of two GPUs, kind nvidia-h200-x2): step 2 with one worker per GPU,
#    6 proofs; its throughput over step 2's is the scaling ratio (goal >= 1.8).  Checked on
#    the CPU with two virtual devices (tests/test_bench_engine.py, slow).
# Every step runs under JAX_LOG_COMPILES=1 (hypotheses 26, 30: bench.compile_log sums a log);
# EXPLAIN=1 adds JAX_EXPLAIN_CACHE_MISSES=1, off by default (on jax 0.11.2 it breaks the
# lowering of a kernel traced under jax.default_device: fc32.sh, session 38).
# $STEPS picks and orders them (default "shaped budget mixed"; on two GPUs "shaped two"); every record goes to
# $R/engine.jsonl, each step's log to $R/<step>.log; `done` marks the end.
set -u
R=${RUN_DIR:-/tmp/run}
mkdir -p "$R"
# ops.aot's store: a program traced and compiled by one step is loaded by the next
# process of this session without tracing (hypothesis 30, bench/NOTES.md); its keys
# hash the sources, so it is not carried to the next session (the XLA cache is)
export JAXPROVE_AOT=${JAXPROVE_AOT:-/tmp/aot}
export JAXPROVE_CACHE=${JAXPROVE_CACHE:-/tmp/jc} PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
say() { echo "[$(date +%T)] $*" >> "$R/pipe.log"; }
say "start at ${JAXPROVE_COMMIT:-unknown commit}"
say "$(bash "$(dirname "$0")/cache.sh" unpack 2>&1)"
ROWS=${ROWS:-4000000} PARTS=${PARTS:-10}
NO_AUTOTUNE="env XLA_FLAGS=--xla_gpu_autotune_level=0"   # the 16 GB mode's steps, as fc32.sh
E="env JAX_LOG_COMPILES=1 ${EXPLAIN:+JAX_EXPLAIN_CACHE_MISSES=1} python3 -m bench.engine --rows $ROWS --partitions $PARTS --cache --out $R/engine.jsonl"
for step in ${STEPS:-shaped budget mixed}; do
    case $step in
    shaped) cmd="$E --case porep_shaped --proofs 5" ;;
    two)    cmd="$E --case porep_shaped --proofs 6 --devices 2" ;;
    kind)   cmd="$E --case kind --kind ${KIND:-porep} --size ${SIZE:-32GiB} --proofs 5 \
--circuit-dir ${CIRCUIT_DIR:-/tmp/fc32} ${KIND_ARGS:-}"   # the real circuit, recorded by fc32.sh's record step
            case "${KIND_ARGS:-}" in *--out-of-core-gb*)   # the 16 GB mode: no autotuning, as ooc
                cmd="$NO_AUTOTUNE $cmd" ;; esac ;;
    budget) cmd="$E --case porep_shaped --proofs 5 --budget-gb 16" ;;
    ooc)    cmd="$NO_AUTOTUNE $E --case porep_shaped --proofs 5 \
--budget-gb 16 --out-of-core-gb ${OOC_GIB:-9}" ;;   # no autotuning transients: as fc32.sh
    mixed)  cmd="$E --case mixed --post real --post-size 32GiB \
--window-every 0 --winning 6 --winning-every 5 --inflight 2" ;;
    *) say "unknown step $step"; continue ;;
    esac
    say "$step: $cmd"
    timeout ${STEP_TIMEOUT:-900} $cmd > "$R/$step.log" 2>&1
    say "$step rc $?"
done
touch "$R/done"
