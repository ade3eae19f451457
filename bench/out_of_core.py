"""The out-of-core ("16 GB mode") h: ``groth16.h_coefficients_host`` timed.

Hypothesis 37 (bench/NOTES.md, session 18): on the H200 the 16 GB mode's
h took 3.49 s at 2^23 (session 18, PoRep 512MiB), against ~0.06 s in core:
its four sweeps move 18 vectors across PCIe and through numpy's strided
copies one block at a time on one thread, the device idle meanwhile.
``ops.four_step.sweep`` is now pipelined (block q's inputs and program
while block q − 1's results come back) with the host copies per limb
plane on a thread pool.  Cases, each on random a, b, c (8, m):

* ``h_host.serial``: the sweep as it was (kept here as the baseline:
  gather, put, run, fetch, write, block after block);
* ``h_host.plain_fetch``: the pipelined sweep with JAX's plain fetch of
  each result (hypothesis 37 as measured in session 19: 1.98 s at 2^23);
* ``h_host.pipelined``: the library's sweep (its results fetched through
  pinned memory on a GPU, ``ops.transfer``: hypothesis 38);
* ``h_resident``: ``groth16.h_coefficients_resident`` (hypothesis 39: whole
  vectors on the device, the four-step passes in place there; the result
  fetched to the host through pinned memory, as the prover does);
* ``h_resident.overwrite``: the same over a's and b's host buffers, h
  fetched into a's a limb plane per task (the prover's form: three host
  vectors, not five);
* ``h_in_core``: ``groth16._h_coefficients`` on the device (the floor:
  no host traffic at all), with a, b, c already there.

Each: one warm-up (compiles), then ``--reps`` timed calls (median / min /
max); the host cases' results are checked equal to the in-core one.  The
records also give the host traffic's rate (18 vectors of 32·m bytes over
the median).

    python -m bench.out_of_core --log-m 23 --budget-gib 2 --out bench/results/ooc_h200.jsonl
"""
from __future__ import annotations

import argparse
import functools
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from bench.common import argv_command, emit, environment
from jaxprove import groth16 as G
from ops import four_step as FS
from ops import ntt as N
from ops import transfer
from ops.field import Fr

TRANSFERS = 18               # vector transfers of h_coefficients_host (10 in, 8 out)


def serial_sweep(program, ins, outs, count: int, chunk: int):
    """The sweep before hypothesis 37 (the baseline): per block, gather
    each input on one thread, put it, run, fetch and write, in turn."""
    for q0 in range(0, count, chunk):
        blocks = [jax.device_put(np.ascontiguousarray(FS._block(v, ax, q0, chunk)))
                  for v, ax in ins]
        results = program(jnp.uint32(q0), *blocks)
        for (v, ax), r in zip(outs, results):
            FS._block(v, ax, q0, chunk)[...] = np.asarray(r)


def random_vectors(log_m: int, seed: int) -> list[np.ndarray]:
    """a, b, c: (8, 2^log_m) uint32, canonical Fr (top limb below r's)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(3):
        x = rng.integers(0, 2**32, (Fr.L, 1 << log_m), dtype=np.uint32)
        x[-1] &= 0x0FFFFFFF                       # < 2^252 < r
        out.append(x)
    return out


def timed(fn, reps: int, prepare=None) -> tuple[float, list[float], object]:
    """fn(*prepare()) once (compiles), then ``reps`` timed calls; ``prepare``
    (untimed, default no arguments) gives each call fresh inputs."""
    prepare = prepare or tuple
    ts, out = [], None
    for _ in range(reps + 1):
        args = prepare()
        t = time.perf_counter()
        out = fn(*args)
        ts.append(time.perf_counter() - t)
    return ts[0], ts[1:], out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log-m", type=int, default=16)
    ap.add_argument("--budget-gib", type=float, default=2.0)
    ap.add_argument("--cases",
                    default="h_in_core,h_host.serial,h_host.plain_fetch,h_host.pipelined,"
                            "h_resident")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    budget = int(args.budget_gib * (1 << 30))
    a, b, c = random_vectors(args.log_m, args.seed)
    dom = N.domain(args.log_m)
    base = {**environment(), "command": argv_command(), "size": args.log_m,
            "log_m": args.log_m, "budget_bytes": budget, "vector_bytes": a.nbytes}

    def in_core():
        return np.asarray(G._h_coefficients(*(jnp.asarray(x) for x in (a, b, c)), dom))

    def host():
        return G.h_coefficients_host(a, b, c, args.log_m, budget)

    want = None
    for case in args.cases.split(","):
        if case == "h_in_core":
            xs = [jnp.asarray(x) for x in (a, b, c)]

            def run():                 # a, b, c are donated: fresh device copies each call
                return jax.block_until_ready(G._h_coefficients(*(jnp.array(x) for x in xs), dom))
            first, ts, out = timed(run, args.reps)
            got = np.asarray(out)
            del xs, out
        elif case in ("h_host.serial", "h_host.plain_fetch", "h_host.pipelined"):
            real, real_fetch = FS.sweep, transfer.start_fetch
            if case == "h_host.serial":
                FS.sweep = serial_sweep
            if case == "h_host.plain_fetch":
                transfer.start_fetch = functools.partial(real_fetch, pinned=False)
            try:
                first, ts, got = timed(host, args.reps)
            finally:
                FS.sweep, transfer.start_fetch = real, real_fetch
        elif case == "h_resident":
            # h fetched as the prover does (groth16._h_out_of_core: through pinned memory;
            # session 20's record fetched it plainly, ~0.15 s of its 0.331 s at 2^23)
            first, ts, got = timed(lambda: transfer.fetch(G.h_coefficients_resident(
                a, b, c, args.log_m, budget)), args.reps)
        elif case == "h_resident.overwrite":
            # the prover's form since session 25 (groth16._h_out_of_core): a's and b's
            # transforms back into their host buffers, h into a's, a limb plane per task
            # (three vectors in host memory, not five); fresh copies of a, b each call
            def over(x, y):
                return G.h_coefficients_resident(x, y, c, args.log_m, budget, overwrite=True)
            first, ts, got = timed(over, args.reps, lambda: (a.copy(), b.copy()))
        else:
            raise SystemExit(f"unknown case {case!r}")
        if want is None:
            want = in_core() if case != "h_in_core" else got
        checked = bool(np.array_equal(got, want))
        med = statistics.median(ts)
        rec = {**base, "case": f"out_of_core.{case}", "compile_s": first - med,
               "first_s": first, "median_s": med, "min_s": min(ts), "max_s": max(ts),
               "reps": args.reps, "checked": checked}
        if case.startswith("h_host"):
            rec["host_traffic_gb_s"] = TRANSFERS * a.nbytes / med / 1e9
        emit(rec, args.out)
        if not checked:
            raise SystemExit(f"{case}: h differs from the in-core h")


if __name__ == "__main__":
    main()
