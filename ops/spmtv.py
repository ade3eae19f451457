"""Sparse matrix-transpose times vector over Fr, on the device: y = Mᵀ·x.

For a CSR matrix M (rows × n_cols, entries M[i][j] = coeffs[id]) and Fr
values x ``(8, rows)``:

    y_j = Σ_i M[i][j]·x_i          for j < n_cols          -> (8, n_cols)

Groth16's setup needs it once per matrix: u_j(τ) = Σ_i A[i][j]·ℓ_i(τ).
``ops.spmv`` computes M·x over a layout planned on the host for the
transposed matrix; that planning is single-threaded numpy and costs minutes
at 10^8 rows (bench/NOTES.md, hypothesis 24), while here the host only
expands the row index of each entry.  The device

1. sorts the entries (col, row, coefficient id) by column (one XLA
   key-value sort and two gathers);
2. in chunks of ``chunk`` entries (one compiled program for every chunk):
   forms the terms coeff·x_row, runs a segmented inclusive scan over them
   (Hillis–Steele: log₂ chunk steps of y_e += y_{e−d} where col_{e−d} =
   col_e), so each column's sum in the chunk ends at its last entry, and
   adds those sums into y (a column split over two chunks gets two).

Work: nnz·log₂(chunk) Fr additions; device memory: the sorted entries
(12 bytes each) plus a few chunks of Fr values.
"""
from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
from jax import lax

from ops import aot
from ops.field import Fr

DEFAULT_CHUNK = 1 << 22


def _shift(a, d, fill):
    """a shifted right by a traced d along the last axis (``fill`` enters)."""
    n = a.shape[-1]
    pad = jnp.full(a.shape[:-1] + (n,), fill, a.dtype)
    return lax.dynamic_slice_in_dim(jnp.concatenate([pad, a], axis=-1), n - d, n, axis=-1)


def segmented_scan(keys, vals):
    """Inclusive segmented prefix sums: out_e = Σ vals_f over f ≤ e with
    keys_f = keys_e (keys ``(C,)`` sorted, C a power of two; vals Fr
    ``(8, C)``)."""
    C = keys.shape[0]

    def step(k, y):
        d = jnp.left_shift(jnp.int32(1), k)
        same = _shift(keys, d, -1) == keys
        return Fr.add(y, jnp.where(same, _shift(y, d, 0), jnp.uint32(0)))

    return lax.fori_loop(0, max(C - 1, 0).bit_length(), step, vals)


@functools.partial(aot.program, static_argnums=(7,), donate_argnums=(0,))
def _accumulate(y, x, table, cols, rows, cids, lo, chunk: int):
    """y + the column sums of the sorted entries [lo, lo + chunk)."""
    n = y.shape[-1]
    c, r, k = (lax.dynamic_slice_in_dim(a, lo, chunk) for a in (cols, rows, cids))
    terms = Fr.mul(jnp.take(table, k, axis=-1), jnp.take(x, r, axis=-1))
    sums = segmented_scan(c, terms)
    last = c != jnp.concatenate([c[1:], jnp.full((1,), -1, c.dtype)])
    at = jnp.where(last & (c < n), c, n)                  # n: padding entries, dropped
    old = jnp.take(y, at, axis=-1, mode="fill", fill_value=0)
    return y.at[:, at].set(Fr.add(old, sums), mode="drop", unique_indices=True)


@aot.program
def _sort_by_column(cols, rows, cids):
    """The entries in column order: a key-value sort (the permutation), then
    two gathers (a sort of three operands would not be a radix sort)."""
    cols, order = lax.sort((cols, lax.iota(jnp.int32, cols.shape[0])), num_keys=1)
    return cols, jnp.take(rows, order), jnp.take(cids, order)


def spmtv(indptr, cols, coeff_ids, table, x, n_cols: int, chunk: int | None = None):
    """Mᵀ·x (module docstring).  indptr ``(rows + 1,)``, cols and coeff_ids
    ``(nnz,)``: a CSR matrix on the host (``circuits.cs`` R1CS matrices);
    table Fr ``(8, n_coeffs)``: the coefficient of each id; x Fr ``(8,
    rows)`` on the device.  ``chunk``: entries per step (a power of two;
    default ``DEFAULT_CHUNK``, or the entries rounded up to a power of two
    if fewer).  Returns Fr ``(8, n_cols)``."""
    indptr = np.asarray(indptr, np.int64)
    rows = len(indptr) - 1
    nnz = int(indptr[-1]) if rows >= 0 else 0
    if rows < 0 or indptr[0] != 0 or np.any(np.diff(indptr) < 0) or len(cols) != nnz \
            or len(coeff_ids) != nnz:
        raise ValueError(f"spmtv: not a CSR matrix (indptr of length {len(indptr)} must rise "
                         f"from 0 to the {len(cols)} cols and {len(coeff_ids)} coefficient ids)")
    if x.shape != (Fr.L, rows):
        raise ValueError(f"spmtv: x must be Fr ({Fr.L}, {rows}), got {x.shape}")
    if max(rows, n_cols, nnz) >= 2**31:
        raise ValueError("spmtv: rows, columns or entries do not fit int32 indices")
    cols = np.asarray(cols)
    if nnz and (cols.min() < 0 or cols.max() >= n_cols):
        raise ValueError(f"spmtv: column indices must lie in [0, {n_cols})")
    ids = np.asarray(coeff_ids)
    if nnz and (ids.min() < 0 or ids.max() >= table.shape[-1]):
        raise ValueError(f"spmtv: coefficient ids must lie in [0, {table.shape[-1]})")
    y = jnp.zeros((Fr.L, n_cols), jnp.uint32)
    if nnz == 0:
        return y
    chunk = chunk or min(DEFAULT_CHUNK, 1 << (nnz - 1).bit_length())
    if chunk & (chunk - 1):
        raise ValueError(f"spmtv: chunk must be a power of two, got {chunk}")
    pad = (0, -(-nnz // chunk) * chunk - nnz)            # padding entries: column n_cols, dropped
    c, r, k = _sort_by_column(
        jnp.pad(jnp.asarray(cols.astype(np.int32)), pad, constant_values=n_cols),
        jnp.pad(jnp.asarray(np.repeat(np.arange(rows, dtype=np.int32), np.diff(indptr))), pad),
        jnp.pad(jnp.asarray(ids.astype(np.int32)), pad))
    padded = c.shape[0]
    for lo in range(0, padded, chunk):
        y = _accumulate(y, x, table, c, r, k, jnp.int32(lo), chunk)
    return y
