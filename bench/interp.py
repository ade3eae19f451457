"""The CPU interpreter's cost per instruction (issue 5's CPU goal).

Every CPU formula runs on the register machine of ``ops.interpret``; this
benchmark times that machine alone on recorded programs at N lanes:

* ``Fq.mul`` / ``Fq.add``: a chain of K instructions ``x <- x op y`` (one
  instruction kind, so the per-instruction cost of that kind);
* ``G1.madd`` / ``G2.madd``: RCB mixed addition (``ops.curve.CurveArith.madd``)
  recorded over Fq (G1: 39 instructions, G2: 154).

For each case and N: compile seconds (lower + compile of the jitted
``interpret.run``), then median/min/max seconds per program over >= 5 timed
repetitions after a warm-up (``bench.common.time_fn``), and derived per
instruction and per instruction-lane costs.  Each result is checked on its
first lanes against Python integers (``checked``).

    python -m bench.interp --log-n 10,13,16 --out bench/results/interp_cpu.jsonl
"""
from __future__ import annotations

import argparse
import os
import random
import time

import jax
import jax.numpy as jnp
import numpy as np

from bench.common import argv_command, emit, environment, time_fn
from ops import curve, field
from ops.elementwise import x64
from ops.interpret import Recorder, compile_program, run
from ops.limbs import to_limbs

FQ = field.Fq.base_arith
P = FQ.p
R = FQ.R
CHAIN = 32


def _chain(op):
    def record(rec, x, y):
        for _ in range(CHAIN):
            x = getattr(rec, op)(x, y)
        return [x]
    return record, 2


def _madd(c):
    def record(rec, *v):
        if c is curve.G1:
            P_, A = tuple(v[:3]), tuple(v[3:])
        else:
            P_ = tuple(tuple(v[i:i + 2]) for i in (0, 2, 4))
            A = tuple(tuple(v[i:i + 2]) for i in (6, 8))
        out = c.lift(rec).madd(P_, A)
        return [r for part in out for r in (part if isinstance(part, tuple) else (part,))]
    return record, 5 if c is curve.G1 else 10


CASES = {"Fq.mul": lambda: _chain("mul"), "Fq.add": lambda: _chain("add"),
         "G1.madd": lambda: _madd(curve.G1), "G2.madd": lambda: _madd(curve.G2)}


def _reference(case, x, y):
    """Python-int result of a chain case on one lane's inputs (x, y)."""
    for _ in range(CHAIN):
        x = x * y % P if case == "Fq.mul" else (x + y) % P
    return x


def program(case):
    """(Program, number of inputs) of a case."""
    record, n_in = CASES[case]()
    rec = Recorder(FQ)
    ins = [rec.input() for _ in range(n_in)]
    outs = record(rec, *ins)
    return compile_program(rec, ins, outs), n_in


def bench_case(case, log_n, reps, seed=0):
    prog, n_in = program(case)
    n = 1 << log_n
    rng = random.Random(seed)
    vals = [[rng.randrange(P) for _ in range(n)] for _ in range(n_in)]
    mont = lambda col: np.array([to_limbs(v * R % P, FQ.L) for v in col], np.uint32).T
    regs = [jnp.asarray(mont(col)) for col in vals]

    def f(*xs):
        with x64():
            return run(FQ, prog, list(xs))

    fj = jax.jit(f)
    t = time.perf_counter()
    compiled = fj.lower(*regs).compile()
    compile_s = time.perf_counter() - t
    timing = time_fn(compiled, regs, reps=reps)
    out = compiled(*regs)
    checked = None
    if case in ("Fq.mul", "Fq.add"):
        got = np.asarray(out[0][:, :8]).astype(object)
        ints = [sum(int(got[j, k]) << (32 * j) for j in range(FQ.L)) for k in range(8)]
        rinv = pow(R, -1, P)
        checked = [v * rinv % P for v in ints] == [_reference(case, vals[0][k], vals[1][k])
                                                   for k in range(8)]
    T = len(prog.code)
    return {"case": f"interp.{case}", "log_n": log_n, "instructions": T, "n_regs": prog.n_regs,
            "compile_s": compile_s, **timing, "per_instruction_us": timing["median_s"] / T * 1e6,
            "per_instruction_lane_ns": timing["median_s"] / T / n * 1e9, "checked": checked,
            "load_avg_1m": os.getloadavg()[0]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(CASES), help="comma list of " + ", ".join(CASES))
    ap.add_argument("--log-n", default="10,13,16", help="comma list of log2 lane counts")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=None, help="append the JSON records to this file")
    a = ap.parse_args(argv)
    env = environment()
    cases = [c for c in a.cases.split(",") if c]
    for c in cases:
        if c not in CASES:
            raise SystemExit(f"unknown case {c!r}; known: {', '.join(CASES)}")
    if a.reps < 1:
        raise SystemExit("--reps must be >= 1")
    for c in cases:
        for k in (int(s) for s in a.log_n.split(",") if s):
            emit({**env, **bench_case(c, k, a.reps), "command": argv_command()}, a.out)


if __name__ == "__main__":
    main()
