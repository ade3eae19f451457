#!/bin/bash
# Wait up to $1 seconds (default 560) for a detached pipeline (bench/device/fc32.sh)
# to finish, then print its progress and pack its logs and records into $OUT/run.tgz.
# PACK=1 packs the compilation cache even if the pipeline is not done (the session's last
# poll: a pipeline cut off by the device budget still hands its compiles to the next one).
# On a machine without the run directory (the last one went back, this one is fresh)
# it fails at once instead of waiting for a pipeline that is not there.
R=${RUN_DIR:-/tmp/run}
if [ ! -d "$R" ]; then
    echo "no run directory $R: this is a fresh machine, the pipeline is gone" >&2
    exit 3
fi
end=$((SECONDS + ${1:-560}))
while [ $SECONDS -lt $end ] && [ ! -e "$R/done" ]; do sleep 5; done
cat "$R/pipe.log"
for f in "$R"/*.log "$R"/*/*.log; do   # and a BESIDE_SH pipeline's own RUN_DIR under $R
    [ -e "$f" ] || continue
    [ "$f" = "$R/pipe.log" ] && continue
    echo "==> $f"; grep -v '^{' "$f" | grep -v 'Warning\|^WARNING:jax\|lattice_result_type\|lax_numpy.astype' | tail -n 8 | cut -c1-400
done
free -g | head -2
nvidia-smi --query-gpu=memory.used --format=csv,noheader 2>/dev/null
[ -n "${OUT:-}" ] && tar czf "$OUT/run.tgz" -C "$R" --exclude='*.npy' --exclude=./circuits .   # recorded circuits: GBs
if [ -e "$R/done" ] || [ -n "${PACK:-}" ]; then
    [ -n "${OUT:-}" ] && bash "$(dirname "$0")/cache.sh" pack    # for the next session's carry
fi
[ -e "$R/done" ] && echo DONE
exit 0
