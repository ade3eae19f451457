"""Constraint evaluation (SpMV) throughput: a, b, c = A·w, B·w, C·w.

A synthetic R1CS with the shape of a 32 GiB PoRep partition (cuzk's PCE
statistics: 130,278,869 constraints + 328 inputs, 130,169,893 aux variables,
A/B/C 2.4/1.0/2.2 nonzeros per row, 722 M in all) or a smaller one
(``--rows``): row lengths Poisson-distributed around those means, columns
uniform over all variables (``--cols random``, the worst case for the gather)
or within a window around the row's position (``--cols local``),
coefficients +1 / −1 (4:1) except a fraction ``--general`` of arbitrary Fr
constants; bellperson's input rows appended; or (``--porep SIZE``) the
recorded PoRep circuit of that sector size.  The same R1CS is planned in
each layout of ``--layouts`` (``ell``: fixed-width rows plus the long rows'
pieces, widths from ``--ell-width`` or the histogram rule with
``--overflow-cost``, its rows by XLA gathers and the row kernel; ``ell-fused``:
the same, its rows by one kernel that gathers by index, ``ops.spmv`` form
"fused"; ``csr``: every entry in lazily summed chunks, the earlier path) and
timed.
JSON records per run (bench/common.py), per layout:

* "pce.evaluate" (per layout; ``form``: the ``ops.spmv`` form that ran,
  "fused" needing a GPU): extraction seconds (host planning +
  transfer), compile seconds of ``pce.evaluate``, median/min/max seconds
  per evaluation over >= 5 runs after a warm-up, nonzeros/s (× batch), and GB/s of a
  minimum-traffic model (the layout's index arrays once, one 32-byte
  witness element per nonzero and instance, the witness transposed once,
  each output row written once); the ELL and piece widths, the long rows,
  pieces, entries outside the ELL part and entries of the chunks; a sample
  of rows of every matrix is checked against Python ints;
* "gather_floor" (ell and csr only: the other forms share theirs): the same witness transpose and a gather of every column
  slot of the layout alone, the memory-traffic floor the evaluation is
  measured against;
* "ell_terms" (ell layout): the ELL gathers in the kernel's limb-major
  layout (gather + transpose, the row chunks of ``ops.spmv``), without the
  kernel.

    python -m bench.pce --rows 20000                      # CPU smoke run
    python -m bench.pce --out bench/results/pce_h200.jsonl  # full PoRep shape

Anchor: cuzk evaluates this SpMV on the CPU in 3.2 s per partition alone
(4 s, or 10 s under contention, in its pipeline), research/cuzk.md §3.
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from bench.common import argv_command, emit, environment, peak_memory_bytes, time_fn
from circuits.cs import CSR, R1CS
from jaxprove import pce
from ops import spmv
from ops.field import Fr

POREP_ROWS = 130_278_869 + 328
POREP_INPUTS = 328
POREP_AUX = 130_169_893
LAYOUTS = ("ell", "ell-fused", "csr")


def layout_form(layout: str) -> tuple[str, str]:
    """(planning, ``ops.spmv`` form) of a layout name: "ell" or "csr", then
    optionally "-fused" (the fixed-width rows by the kernel that gathers by
    index)."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r} (one of {', '.join(LAYOUTS)})")
    planning = layout.split("-")[0]
    form = "fused" if "-fused" in layout else "gather"
    return planning, form
ANCHOR = "cuzk CPU SpMV 3.2 s/partition alone, 4-10 s in the pipeline (PoRep 32G, 722M nnz)"


def synthetic(rows: int, inputs: int, aux: int, density, general: float, cols: str,
              seed: int) -> R1CS:
    """A random R1CS of the given shape (module docstring); numpy, vectorised."""
    rng = np.random.default_rng(seed)
    m, n = rows - inputs, inputs + aux
    coeffs = (1, Fr.p - 1) + tuple(int.from_bytes(rng.bytes(32), "little") % Fr.p
                                   for _ in range(62))
    mats = []
    for i, d in enumerate(density):
        lens = rng.poisson(d, m)
        nnz = int(lens.sum())
        if cols == "random":
            c = rng.integers(0, n, nnz)
        else:
            row = np.repeat(np.arange(m, dtype=np.int64), lens)
            c = (row * n // max(m, 1) + rng.integers(-64, 64, nnz)) % n
        u = rng.random(nnz)
        ids = np.where(u < general, rng.integers(2, len(coeffs), nnz),
                       np.where(u < general + 0.2 * (1 - general), 1, 0)).astype(np.int32)
        del u
        tail = np.ones(inputs, np.int64) if i == 0 else np.zeros(inputs, np.int64)
        indptr = np.concatenate([[0], np.cumsum(np.concatenate([lens, tail]))])
        if i == 0:
            c = np.concatenate([c, np.arange(inputs)])
            ids = np.concatenate([ids, np.zeros(inputs, np.int32)])
        mats.append(CSR(indptr, c.astype(np.int64), ids))
    return R1CS(f"synthetic-{rows}-{cols}-{seed}", inputs, aux, m, *mats, coeffs,
                np.zeros(n, bool))


def _column_arrays(x: spmv.BlockedCSR):
    """The arrays of witness columns (the chunks' columns index the piece
    sums when there is an ELL part)."""
    chunks = (x.cols, x.gen_cols) if x.ell_width == (0, 0) else ()
    return (x.ell_cols, x.ell_gen_cols, x.piece_cols, x.piece_gen_cols) + chunks


def _index_arrays(x: spmv.BlockedCSR):
    return tuple(getattr(x, f) for f in spmv.DATA_FIELDS)


def slot_count(m: pce.Matrices) -> int:
    """Column slots of A, B and C (entries plus padding), ELL and overflow."""
    return sum(int(c.size) for x in (m.a, m.b, m.c) for c in _column_arrays(x))


def spilled_nnz(x: spmv.BlockedCSR) -> int:
    """Entries outside the ELL part (in pieces, or in the chunks without one)."""
    arrays = (x.cols, x.gen_cols) if x.ell_width == (0, 0) else (x.piece_cols, x.piece_gen_cols)
    return int(sum(np.sum(np.asarray(c) < x.num_cols) for c in arrays))


def chunk_entries(x: spmv.BlockedCSR) -> int:
    """Entries of the chunks (the csr layout's; the ell layout has none)."""
    return int(sum(np.sum(np.asarray(c) < x.num_cols) for c in (x.cols, x.gen_cols)))


def traffic_bytes(m: pce.Matrices, batch: int) -> int:
    """Minimum-traffic model of one evaluation (module docstring)."""
    total = 2 * 32 * batch * m.num_vars                          # witness transpose
    for x in (m.a, m.b, m.c):
        total += sum(int(a.nbytes) for a in _index_arrays(x))
        total += 32 * batch * x.nnz + 32 * batch * x.rows
    return total


@jax.jit
def gather_floor(m: pce.Matrices, w):
    """The main memory traffic of an evaluation and nothing else: the
    element-major witness copy and a gather of every column slot of A, B
    and C, summed (mod 2^32) so that nothing is optimised away."""
    wt = spmv.element_major(w.reshape(Fr.L, -1, m.num_vars))
    total = jnp.uint32(0)
    for x in (m.a, m.b, m.c):
        for c in _column_arrays(x):
            if c.size:
                g = jnp.take(wt, c.reshape(-1), axis=0, mode="fill", fill_value=0)
                total = total + jnp.sum(g, dtype=jnp.uint32)
    return total


@jax.jit
def ell_terms(m: pce.Matrices, w):
    """The ELL gathers of an evaluation (main rows, not the pieces) in the
    kernel's layout (gather and limb-major transpose per row chunk, as
    ``ops.spmv``), summed (mod 2^32)."""
    wt = spmv.element_major(w.reshape(Fr.L, -1, m.num_vars))
    B = wt.shape[1]
    total = jnp.uint32(0)
    for x in (m.a, m.b, m.c):
        kp, kg = x.ell_width
        if kp + kg == 0 or x.rows == 0:
            continue
        C, starts = spmv.ell_row_chunks(x.rows, (kp + kg) * B)

        def step(acc, s, x=x, C=C):
            for c in (x.ell_cols, x.ell_gen_cols):
                if c.shape[1]:
                    t = spmv._gather_terms(wt, jax.lax.dynamic_slice_in_dim(c, s, C))
                    acc = acc + jnp.sum(t, dtype=jnp.uint32)
            return acc, None

        total, _ = jax.lax.scan(step, total, jnp.asarray(starts))
    return total


def check_rows(r1cs: R1CS, w, outs, samples: int, seed: int) -> bool:
    """Recompute ``samples`` random rows and the samples/4 longest rows of
    each matrix (every instance) with Python ints from the R1CS's CSR lists
    and the witness."""
    rng = np.random.default_rng(seed)
    rows = r1cs.num_constraints + r1cs.num_inputs
    for mat, out in zip((r1cs.a, r1cs.b, r1cs.c), outs):
        longest = np.argsort(np.diff(mat.indptr), kind="stable")[-max(1, samples // 4):]
        sel = np.unique(np.concatenate([rng.integers(0, rows, samples), longest]))
        got = np.asarray(Fr.to_int(np.asarray(out[:, :, sel])))       # (B, k)
        for j, r in enumerate(sel):
            lo, hi = mat.indptr[r], mat.indptr[r + 1]
            cols = mat.cols[lo:hi]
            vals = np.asarray(Fr.to_int(np.asarray(w[:, :, cols]))).reshape(w.shape[1], -1)
            for b in range(w.shape[1]):
                want = sum(r1cs.coeffs[k] * int(v) for k, v in zip(mat.coeff_ids[lo:hi], vals[b]))
                if int(got[b, j]) != want % Fr.p:
                    return False
    return True


def _widths(text: str):
    if text == "auto":
        return None
    kp, kg = (int(v) for v in text.split(","))
    return kp, kg


def run_layout(layout: str, r1cs: R1CS, a, env: dict, key, extracted: dict):
    """Plan, check and time one layout; emits its records.  ``extracted``:
    matrices by planning (the ell layouts share one extraction, the csr ones
    another)."""
    block_args = dict(target=a.target)
    planning, form = layout_form(layout)
    ran = form if jax.default_backend() == "gpu" else \
        form.replace("fused", "gather")                          # the kernel needs CUDA
    if planning == "csr":
        block_args["ell_width"] = (0, 0)
    else:
        block_args.update(ell_width=_widths(a.ell_width), overflow_cost=a.overflow_cost)
    if planning not in extracted:
        t = time.time()
        m = pce.extract(r1cs, **block_args)
        jax.block_until_ready(m)
        extracted.clear()                       # one layout's matrices on the device at a time
        extracted[planning] = m, time.time() - t
    m, extract_s = extracted[planning]

    w = Fr.random(key, (a.batch, m.num_vars))
    w = w.at[:, :, 0].set(Fr.ones((a.batch,)))
    jax.block_until_ready(w)
    t = time.time()
    comp = pce.evaluate.jitted.lower(m, w, form).compile()
    compile_s = time.time() - t
    outs = comp(m, w)
    checked = check_rows(r1cs, w, outs, a.samples, a.seed) if a.samples else None
    del outs
    r = time_fn(comp, (m, w), reps=a.reps)
    nnz = sum(m.nnz)
    mats = (m.a, m.b, m.c)
    rec = {"case": "pce.evaluate", "layout": layout, "form": ran, "circuit": r1cs.name, "rows": m.rows, "num_vars": m.num_vars,
           "nnz": list(m.nnz), "batch": a.batch, "general": a.general, "cols": a.cols,
           "density": list(a.density_t),
           "ell_width": [list(x.ell_width) for x in mats],
           "piece_width": [list(x.piece_width) for x in mats],
           "long_rows": [x.overflow_rows for x in mats], "pieces": [x.pieces for x in mats],
           "spilled_nnz": [spilled_nnz(x) for x in mats],
           "chunk_entries": [chunk_entries(x) for x in mats], "chunks": [x.chunks for x in mats],
           "slots": [[x.slots, x.gen_slots, x.block_rows] for x in mats],
           "matrices_bytes": m.nbytes,
           "synthesis_s": round(a.gen_s, 2), "extract_s": round(extract_s, 2),
           "compile_s": round(compile_s, 2), **r,
           "nnz_per_s": nnz * a.batch / r["median_s"],
           "model_gb_per_s": traffic_bytes(m, a.batch) / r["median_s"] / 1e9,
           "peak_bytes": peak_memory_bytes(), "correct_vs_python": checked,
           "command": argv_command(), **env, "anchor": ANCHOR}
    emit(rec, a.out)
    del comp

    if layout not in ("ell", "csr"):
        return                                  # its floors are its planning's
    slots = slot_count(m)
    moved = 2 * 32 * a.batch * m.num_vars + slots * (4 + 32 * a.batch)
    r = time_fn(gather_floor.lower(m, w).compile(), (m, w), reps=a.reps)
    emit({"case": "gather_floor", "layout": layout, "rows": m.rows, "batch": a.batch,
          "cols": a.cols, "slots": slots, **r, "gb_per_s": moved / r["median_s"] / 1e9,
          "command": argv_command(), **env,
          "anchor": "the transpose and gathers of pce.evaluate alone (a floor for its time)"},
         a.out)
    if layout == "ell" and any(sum(x.ell_width) for x in mats):
        r = time_fn(ell_terms.lower(m, w).compile(), (m, w), reps=a.reps)
        emit({"case": "ell_terms", "layout": layout, "rows": m.rows, "batch": a.batch,
              "cols": a.cols, "ell_width": [list(x.ell_width) for x in mats], **r,
              "command": argv_command(), **env,
              "anchor": "the ELL gathers in the kernel's limb-major layout, without the kernel"},
             a.out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--porep", metavar="SIZE", default=None,
                    help="instead of a synthetic R1CS: the recorded PoRep circuit of this "
                         "sector size (circuits.filecoin.porep.CONFIGS, e.g. 2KiB: 2.7M rows)")
    ap.add_argument("--rows", type=int, default=POREP_ROWS, help="rows (constraints + inputs)")
    ap.add_argument("--inputs", type=int, default=POREP_INPUTS)
    ap.add_argument("--aux", type=int, default=None, help="default: PoRep's aux:rows ratio")
    ap.add_argument("--density", default="2.4,1.0,2.2", help="nonzeros per row of A,B,C")
    ap.add_argument("--general", type=float, default=0.1,
                    help="fraction of entries with a coefficient other than ±1")
    ap.add_argument("--cols", choices=("random", "local"), default="random")
    ap.add_argument("--batch", type=int, default=1, help="witnesses evaluated at once")
    ap.add_argument("--layouts", default="ell,csr",
                    help="comma-separated layouts to time: ell (fixed-width rows + overflow, "
                         "rows by XLA gathers and the row kernel), ell-fused (the same layout, "
                         "rows by the kernel that gathers by index itself; on the CPU the "
                         "same program as ell), csr (all entries in lazy chunks, the earlier "
                         "path)")
    ap.add_argument("--ell-width", default="auto",
                    help="'Kp,Kg' ELL slots per row for every matrix, or auto (histogram rule)")
    ap.add_argument("--overflow-cost", type=float, default=spmv.OVERFLOW_COST,
                    help="auto widths: an overflow entry's cost in ±1 ELL slots")
    ap.add_argument("--target", type=int, default=spmv.TARGET_ENTRIES,
                    help="entries per overflow chunk")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--samples", type=int, default=32, help="rows per matrix checked (0: none)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out")
    a = ap.parse_args()
    layouts = a.layouts.split(",")
    if not layouts or set(layouts) - set(LAYOUTS):
        ap.error(f"--layouts: expected a comma-separated subset of {','.join(LAYOUTS)}, "
                 f"got {a.layouts!r}")
    inputs = max(1, min(a.inputs, a.rows // 4))
    aux = a.aux if a.aux is not None else max(1, round(a.rows * POREP_AUX / POREP_ROWS))
    a.density_t = tuple(float(x) for x in a.density.split(","))
    env = environment()

    t = time.time()
    if a.porep:
        from circuits import cs
        from circuits.filecoin import porep
        if a.porep not in porep.CONFIGS:
            ap.error(f"--porep: unknown size {a.porep!r}; one of {sorted(porep.CONFIGS)}")
        r1cs = cs.record(porep.stacked_circuit, porep.CONFIGS[a.porep])
        a.cols, a.general, a.density_t = None, None, ()
    else:
        r1cs = synthetic(a.rows, inputs, aux, a.density_t, a.general, a.cols, a.seed)
    a.gen_s = time.time() - t
    extracted = {}
    for layout in layouts:
        run_layout(layout, r1cs, a, env, jax.random.key(a.seed), extracted)


if __name__ == "__main__":
    main()
