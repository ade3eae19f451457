#!/bin/bash
# Proof kinds at small sector sizes on the H200, one bench.filecoin process each (its own
# device peak), in turn:
#
#   bash bench/device/kinds.sh porep:8MiB winning-post:512MiB ...
#
# Each proves with its key resident (--save: the snarkjs JSON to check here), records
# to $R/small.jsonl, logs to $R/small_<kind>_<size>.log and says "<kind:size> timed rc N" in
# $R/pipe.log.  A case costs 3-8 minutes of compiles on a machine whose cache lacks it
# (session 16: the WinningPoSt 8MiB first proof 163 s, its witness 57 s), and a session's
# new checkout carries no cache (bench/NOTES.md, session 16).  So with WARM_P=N > 1 the
# cases first run N at a time with one timed proof each (--reps 1, records in
# $R/warm.jsonl, logs small_warm_*.log: their compiles fill the persistent cache and
# ops.aot's store, their recorded circuits $R/circuits), and then one at a time as above,
# timed alone on the GPU, loading instead of compiling.  The warm phase's records are
# not benchmark records (other processes compiled beside them).
# Standalone as a detached pipeline (like fc32.sh; poll.sh reads it):
#
#   setsid bash -c 'WARM_P=3 bash bench/device/kinds.sh porep:8MiB snap:8MiB; touch /tmp/run/done' </dev/null >/dev/null 2>&1 &
#
# fc32.sh runs it beside and after its 32GiB partition ($BESIDE, $AFTER).
set -u
R=${RUN_DIR:-/tmp/run}
mkdir -p "$R"
export JAXPROVE_AOT=${JAXPROVE_AOT:-/tmp/aot}
export JAXPROVE_CACHE=${JAXPROVE_CACHE:-/tmp/jc} PYTHONUNBUFFERED=1 R
say() { echo "[$(date +%T)] $*" >> "$R/pipe.log"; }
[ -e "$JAXPROVE_CACHE" ] || say "$(bash "$(dirname "$0")/cache.sh" unpack 2>&1)"   # standalone: the carried cache
cases=()
for ks in "$@"; do
    case $ks in *:*) cases+=("$ks") ;; *) say "not kind:size: $ks" ;; esac
done
[ ${#cases[@]} -gt 0 ] || exit 0

# one case: $1 kind:size, $2 phase (warm|timed)
one() {
    local kind=${1%%:*} size=${1##*:}
    # timed: alone on the GPU, JAX's pool at 95% of it (the default 75% made SnapDeals 512MiB
    # plan without ~28 GB it could use); warm: N processes at once, each at the default
    local reps=5 out=$R/small.jsonl log=$R/small_${kind}_${size}.log frac=0.95
    if [ "$2" = warm ]; then reps=1 out=$R/warm.jsonl log=$R/small_warm_${kind}_${size}.log frac=0.75; fi
    XLA_PYTHON_CLIENT_MEM_FRACTION=$frac XLA_PYTHON_CLIENT_PREALLOCATE=false \
        timeout ${CASE_TIMEOUT:-600} python3 -m bench.filecoin \
        --kinds "$kind" --sizes "$size" --cache --no-verify --reps $reps --save "$R/fc" \
        --circuit-dir "$R/circuits" --out "$out" > "$log" 2>&1
    echo "[$(date +%T)] $1 $2 rc $?" >> "$R/pipe.log"
}
export -f one

if [ "${WARM_P:-1}" -gt 1 ]; then
    say "warm phase: ${cases[*]}, ${WARM_P} at a time"
    printf '%s\n' "${cases[@]}" | xargs -P "$WARM_P" -I{} bash -c 'one {} warm'
fi
for ks in "${cases[@]}"; do
    one "$ks" timed
done
