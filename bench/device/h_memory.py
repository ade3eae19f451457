"""XLA's own memory analysis of the out-of-core h's device programs
(``groth16.h_coefficients_resident``: sweep C's ``_quotient_resident``, the
sweeps' ``four_step.resident_step``, sweep D's ``resident_rows_to_cols``) at
2^LOG_M within BUDGET GiB, compiled only (no vectors allocated): argument,
output, aliased and temporary GiB per program, and the chunks
``resident_chunks`` picks.  Session 27: where did run 22's h at 9 GiB run out?

    PYTHONPATH=. python3 bench/device/h_memory.py 27 9
"""
from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

from jaxprove import groth16 as G
from ops import four_step as FS
from ops import ntt as N


def analyse(log_m: int, budget: int) -> tuple[dict, dict]:
    """(chunks, {program: (argument, output, alias, temp) bytes})."""
    log_n1 = FS.default_log_n1(log_m)
    n1, n2 = 1 << log_n1, 1 << (log_m - log_n1)
    x = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint32), (8, 1, 1 << log_m), (0, 0, 0))
    ch = G.resident_chunks(x, log_m, budget, log_n1)
    tabs = FS.tables(log_m)
    dom = {"col": N.domain(log_n1, cosets=False), "row": N.domain(log_m - log_n1, cosets=False)}
    t = (jax.ShapeDtypeStruct((1, n1, n2), jnp.uint32),) * 8     # limb planes
    q0 = jnp.uint32(0)
    blk = jax.ShapeDtypeStruct((8, 1, n1, ch["quotient"]), jnp.uint32)
    step = jax.jit(FS.resident_step, static_argnames=("stages", "axis", "log_n", "chunk"),
                   donate_argnums=(0,))
    programs = {
        "quotient": G._quotient_resident.lower(t, blk, blk, q0, tabs, dom["col"], log_m=log_m,
                                               chunk=ch["quotient"]),
        "step col": step.lower(t, q0, tabs, dom["col"], stages=G.SWEEP_A, axis="col",
                               log_n=log_m, chunk=ch["col"]),
        "step row": step.lower(t, q0, tabs, dom["row"], stages=G.SWEEP_B, axis="row",
                               log_n=log_m, chunk=ch["row"]),
        "rows_to_cols": FS.resident_rows_to_cols.lower(       # out: b's spent buffer, x's shape
            t, t, q0, tabs, dom["row"], stages=G.SWEEP_D, log_n=log_m, chunk=ch["row"]),
    }
    out = {}
    for name, lowered in programs.items():
        m = lowered.compile().memory_analysis()
        out[name] = (m.argument_size_in_bytes, m.output_size_in_bytes, m.alias_size_in_bytes,
                     m.temp_size_in_bytes)
    return ch, out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    log_m, budget_gib = int(argv[0]), float(argv[1])
    ch, out = analyse(log_m, int(budget_gib * 2**30))
    print("log_m", log_m, "budget GiB", budget_gib, "chunks", ch, "vector GiB",
          32 * (1 << log_m) / 2**30)
    for name, (arg, o, alias, temp) in out.items():
        print(f"{name}: arg {arg / 2**30:.3f} out {o / 2**30:.3f} alias {alias / 2**30:.3f} "
              f"temp {temp / 2**30:.3f} GiB")


if __name__ == "__main__":
    main()
