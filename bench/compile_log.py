"""Where a first proof's seconds go before anything runs: JAX's compile log, summed.

With ``JAX_LOG_COMPILES=1`` JAX logs, for every program it compiles, the
seconds spent tracing the Python function (``Finished tracing NAME for
jit``), lowering the jaxpr to an MLIR module (``Finished jaxpr to MLIR module
conversion jit(NAME)``: the Pallas kernels' Triton IR is built here) and in
XLA (``Finished XLA compilation of jit(NAME)``: a compile, or, after
``Persistent compilation cache hit``, loading the cached executable; misses
are logged with ``JAX_EXPLAIN_CACHE_MISSES=1``, which on jax 0.11.2 breaks
kernels traced under ``jax.default_device``: README, "Proving").  This
reads such a log and prints one JSON record: per stage the total seconds,
the cache hits and misses, and the programs that cost most.  It is how
bench/NOTES.md hypothesis 23 (a restart with a warm cache still costs ~85 s
per circuit) is tested:

    export JAX_LOG_COMPILES=1 JAX_EXPLAIN_CACHE_MISSES=1
    python3 -m bench.groth16 --sizes 16 --cache 2> log1
    python3 -m bench.groth16 --sizes 16 --cache 2> log2
    python3 -m bench.compile_log log1 log2

A jitted function called inside another one's trace is traced as part of
the outer program and gets no line of its own.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict

_PATTERNS = {
    "trace": re.compile(r"Finished tracing (.+?) for jit in ([0-9.eE+-]+) sec"),
    "lower": re.compile(r"Finished jaxpr to MLIR module conversion jit\((.+?)\) in ([0-9.eE+-]+) sec"),
    "compile": re.compile(r"Finished XLA compilation of jit\((.+?)\) in ([0-9.eE+-]+) sec"),
}
_HIT = re.compile(r"Persistent compilation cache hit for '(?:jit_)?(.+?)'")
_MISS = re.compile(r"Persistent compilation cache miss for '(?:jit_)?(.+?)'", re.IGNORECASE)


def parse(lines) -> dict:
    """Per program name: {"trace": [s...], "lower": [...], "compile": [...],
    "hits": n, "misses": n} from JAX compile-log lines."""
    progs = defaultdict(lambda: {"trace": [], "lower": [], "compile": [], "hits": 0, "misses": 0})
    for line in lines:
        for stage, pat in _PATTERNS.items():
            m = pat.search(line)
            if m:
                progs[m.group(1)][stage].append(float(m.group(2)))
                break
        else:
            m = _HIT.search(line)
            if m:
                progs[m.group(1)]["hits"] += 1
                continue
            m = _MISS.search(line)
            if m:
                progs[m.group(1)]["misses"] += 1
    return dict(progs)


def summary(progs: dict, top: int = 10) -> dict:
    """Totals over the parsed programs (module docstring) and the ``top``
    programs by trace + lower + compile seconds."""
    compiled = {k: v for k, v in progs.items() if v["compile"]}
    cost = {k: sum(v["trace"]) + sum(v["lower"]) + sum(v["compile"]) for k, v in compiled.items()}
    worst = sorted(cost, key=cost.get, reverse=True)[:top]
    return {
        "programs": len(compiled),
        "trace_s": round(sum(sum(v["trace"]) for v in progs.values()), 3),
        "lower_s": round(sum(sum(v["lower"]) for v in progs.values()), 3),
        "compile_s": round(sum(sum(v["compile"]) for v in progs.values()), 3),
        "cache_hits": sum(v["hits"] for v in progs.values()),
        "cache_misses": sum(v["misses"] for v in progs.values()),
        "top": [{"name": k, "s": round(cost[k], 3), "trace_s": round(sum(compiled[k]["trace"]), 3),
                 "lower_s": round(sum(compiled[k]["lower"]), 3),
                 "compile_s": round(sum(compiled[k]["compile"]), 3),
                 "hits": compiled[k]["hits"], "misses": compiled[k]["misses"]} for k in worst],
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("logs", nargs="*", help="log files (default: standard input)")
    ap.add_argument("--top", type=int, default=10)
    a = ap.parse_args(argv)
    if not a.logs:
        print(json.dumps({"log": "-", **summary(parse(sys.stdin), a.top)}))
    for path in a.logs:
        with open(path, errors="replace") as f:
            print(json.dumps({"log": path, **summary(parse(f), a.top)}))


if __name__ == "__main__":
    main()
