"""Bytes of the 16 GB mode's SpMV row blocks against the matrices' own.

``pce.host_plan`` pads every row block of a matrix to one shape (one
compiled program per matrix), so the prepared blocks, which are pinned
and put to the device at every proof, hold more bytes than the matrices
(bench/NOTES.md session 50, idea 99).

    python3 -m bench.block_padding [--kind porep --size 2KiB]
        [--budgets-log2 27 28 29 30 31] [--out FILE]

prints one JSON record per SpMV budget 2^k and plan (all results in host
memory, and the device h's: a and b into device planes): the blocks per
matrix, their padded bytes and the ratio to ``Matrices.nbytes``.  Counts
only: nothing runs on a device, no block is pinned.
"""
from __future__ import annotations

import argparse
import sys

import jax

from bench.common import emit, environment


def padded_bytes(plan) -> int:
    """Bytes of every block of ``plan`` (a ``pce.HostPlan``), each cut and
    padded to its matrix's shape."""
    return sum(int(v.nbytes) for k, p in enumerate(plan.plans) for j in range(len(p.blocks))
               for v in jax.tree.leaves(plan.block(k, j)))


def main(argv=None) -> int:
    from bench import filecoin as F
    from jaxprove import groth16 as G
    from jaxprove import pce
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", default="porep", help="a bench.filecoin kind")
    ap.add_argument("--size", default="2KiB", help="its sector size")
    ap.add_argument("--budgets-log2", type=int, nargs="+", default=[27, 28, 29, 30, 31],
                    help="SpMV budgets 2^k bytes")
    ap.add_argument("--out", default=None, help="append the records here too")
    a = ap.parse_args(argv)
    m = pce.to_host(pce.extract(F.spec_for(a.kind, a.size).record()))
    length = 1 << G.domain_log(m.rows)
    for k in a.budgets_log2:
        for on_device in ((), G.DEVICE_H_PLANES):
            try:
                plan = pce.host_plan(m, 1, 1 << k, prepared=False, on_device=on_device,
                                     length=length if on_device else None)
            except ValueError as e:          # the budget holds no block (or not the planes)
                emit({"case": "block_padding", "kind": a.kind, "size": a.size,
                      "budget_log2": k, "on_device": list(on_device), "no_plan": str(e),
                      **environment()}, a.out)
                continue
            padded = padded_bytes(plan)
            emit({"case": "block_padding", "kind": a.kind, "size": a.size, "rows": m.rows,
                  "matrices_bytes": int(m.nbytes), "budget_log2": k,
                  "on_device": list(on_device), "blocks": [len(p.blocks) for p in plan.plans],
                  "padded_blocks_bytes": padded, "ratio": round(padded / m.nbytes, 3),
                  "command": "python3 -m bench.block_padding " + " ".join(
                      sys.argv[1:] if argv is None else argv), **environment()}, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
