#!/bin/bash
# Proof kinds at small sector sizes on the H200, one bench.filecoin process each (its own
# device peak), in turn:
#
#   bash bench/device/kinds.sh porep:8MiB winning-post:512MiB ...
#
# Each proves with its key resident (--save: the snarkjs JSON to check here), records
# to $R/small.jsonl, logs to $R/small_<kind>_<size>.log and says "<kind:size> rc N" in
# $R/pipe.log.  A case costs 5-8 minutes of compiles on a machine whose cache lacks it.
# Standalone as a detached pipeline (like fc32.sh; poll.sh reads it):
#
#   setsid bash -c 'bash bench/device/kinds.sh porep:8MiB snap:8MiB; touch /tmp/run/done' </dev/null >/dev/null 2>&1 &
#
# fc32.sh runs it beside and after its 32GiB partition ($BESIDE, $AFTER).
set -u
R=${RUN_DIR:-/tmp/run}
mkdir -p "$R"
export JAXPROVE_AOT=${JAXPROVE_AOT:-/tmp/aot}
export JAXPROVE_CACHE=${JAXPROVE_CACHE:-/tmp/jc} PYTHONUNBUFFERED=1
say() { echo "[$(date +%T)] $*" >> "$R/pipe.log"; }
[ -e "$JAXPROVE_CACHE" ] || say "$(bash "$(dirname "$0")/cache.sh" unpack 2>&1)"   # standalone: the carried cache
for ks in "$@"; do
    case $ks in *:*) ;; *) say "not kind:size: $ks"; continue ;; esac
    XLA_PYTHON_CLIENT_PREALLOCATE=false timeout ${CASE_TIMEOUT:-600} python3 -m bench.filecoin \
        --kinds "${ks%%:*}" --sizes "${ks##*:}" --cache --no-verify --save "$R/fc" \
        --out "$R/small.jsonl" > "$R/small_${ks%%:*}_${ks##*:}.log" 2>&1
    say "$ks rc $?"
done
