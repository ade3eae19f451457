# Sourced by the short device calls (kernels.sh, caps.sh): timed steps under one limit, and
# a summary of the records.  The caller sets S=$SECONDS at its start and $OUT.
step() {    # name seconds-from-start-by-which-it-must-end command...: its log $OUT/name.log
    local name=$1 until=$2; shift 2
    local left=$((until - SECONDS + S))
    if [ $left -le 10 ]; then echo "$name: skipped (no time left)"; return; fi
    timeout $left "$@" >> "$OUT/$name.log" 2>&1
    echo "$name rc $? at $((SECONDS - S)) s"
}
summary() { # one line per record of every $OUT/*.jsonl
    for f in "$OUT"/*.jsonl; do
        [ -e "$f" ] || continue
        python3 - "$f" <<'P'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r = json.loads(line)
        print(r.get("case"), r.get("log_n", r.get("log2n", r.get("n"))), "cap",
              r.get("max_registers"), "checked",
              r.get("checked", r.get("correct_vs_cpu", r.get("verified"))),
              "median", r.get("median_s"), "min", r.get("min_s"), "max", r.get("max_s"),
              "ops/s", r.get("ops_per_s"), "compile", r.get("compile_s"),
              r.get("stages_median_s", ""), r.get("error", ""))
P
    done
}
