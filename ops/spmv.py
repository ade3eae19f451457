"""Sparse matrix × Fr vector products (SpMV) with lazy carry accumulation.

Math: for a sparse matrix M (rows × n) over Fr and a batch of vectors w,
``(M·w)[r] = Σ_k coeff_k · w[col_k]`` over the entries k of row r, in Fr.

Layout (``BlockedCSR``): the entries of a CSR matrix, in row order, cut into
chunks of bounded size.  Chunk q holds a contiguous run of entries that
starts in row ``row0[q]`` and covers local rows ``0..last[q]`` (global row
``row0[q] + i``); a row may be split across consecutive chunks (then the
later chunk has ``cont[q]`` set).  Each chunk has fixed-size slots:

* ``gen_slots`` slots for entries with a coefficient other than ±1:
  ``gen_cols``, ``gen_coeff`` (index into the coefficient table) and
  ``gen_seg`` = local row;
* ``slots`` slots for entries with coefficient ±1 (the overwhelming majority
  in bellperson circuits): ``cols`` and ``seg``, the +1 entries first
  (``seg = R + local row``), then the −1 entries (``seg = 2R + local row``),
  R = ``block_rows``;

unused slots have column ``num_cols`` (gathered as zero) and segment R − 1
(general slots) or 3R (±1 slots, dropped), so each chunk's segment ids,
general slots first, are sorted, which XLA's sorted scatter uses to add runs
of equal ids before touching memory.  Chunks are planned on the host
(``block``) and evaluated on the device (``spmv``), one chunk per step of a
``lax.scan``, so the shapes are static and the working memory is bounded by
the chunk size, not by the matrix.

Per chunk: gather w at the ±1 columns (no multiplication) and at the general
columns (one Fr Montgomery product each, ``Fr.mul``: a Pallas kernel on GPU),
split every term's eight 32-bit limbs into sixteen 16-bit halves, and add the
halves of each (local row, group) with one segment sum in uint32: LAZY
accumulation, no modular addition per term.  A row receives at most
``max_terms ≤ 2^16`` terms per chunk (the planner cuts long rows into
pieces), so each half-limb sum, even of the general and +1 groups together,
stays below 2^32.  Per row the two sums S± are normalised
(carries of the halves) into S = X + T·2^254 with X < 2^254 < r and a small
T < 2^18, and one kernel forms ``(X+ + T+·2^254) − (X− + T−·2^254) mod r``
(one Montgomery product by the constant 2^254·R per sign).  Since Montgomery
form is linear (x ↦ x·R mod r), sums of Montgomery limbs are the Montgomery
form of the sum, so no conversion is needed anywhere.

Memory (B instances, E = slots, G = gen_slots, R = block_rows, n variables):
the element-major witness copy 32·B·n bytes, the padded output 32·B·(rows+R)
(plus the final unpadded copy), and per chunk about
96·B·(E+G) (gathered terms, halves) + 384·B·R bytes (segment sums,
normalisation, reduced rows).  The matrix itself: 8 bytes per ±1 entry and
12 per general entry, plus slack in partly filled chunks.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ops.elementwise import elementwise
from ops.field import Fr

PLUS, MINUS, GENERAL = 0, 1, 2
MAX_TERMS = 1 << 16          # terms of one row in one chunk: 2^16 · (2^16 − 1) < 2^32
TARGET_ENTRIES = 1 << 20     # default entries per chunk
ALIGN = 128                  # slot counts are multiples of this


def coefficient_classes(coeffs: Sequence[int]) -> np.ndarray:
    """PLUS / MINUS / GENERAL for each canonical Fr coefficient (int8 array)."""
    cls = np.full(len(coeffs), GENERAL, np.int8)
    for i, c in enumerate(coeffs):
        if c == 1:
            cls[i] = PLUS
        elif c == Fr.p - 1:
            cls[i] = MINUS
    return cls


@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=["cols", "seg", "gen_cols", "gen_seg", "gen_coeff", "row0", "last",
                                "cont"],
                   meta_fields=["rows", "num_cols", "nnz", "block_rows"])
@dataclasses.dataclass(frozen=True)
class BlockedCSR:
    """A sparse Fr matrix in fixed-size chunks (module docstring).

    cols, seg: int32 (chunks, slots); gen_cols, gen_seg, gen_coeff: int32
    (chunks, gen_slots); row0, last: int32 (chunks,); cont: bool (chunks,).
    rows × num_cols: the matrix's shape; nnz: its entry count; block_rows: R,
    the most local rows of one chunk."""
    cols: np.ndarray
    seg: np.ndarray
    gen_cols: np.ndarray
    gen_seg: np.ndarray
    gen_coeff: np.ndarray
    row0: np.ndarray
    last: np.ndarray
    cont: np.ndarray
    rows: int
    num_cols: int
    nnz: int
    block_rows: int

    @property
    def chunks(self) -> int:
        return self.row0.shape[0]

    @property
    def slots(self) -> int:
        return self.cols.shape[1]

    @property
    def gen_slots(self) -> int:
        return self.gen_cols.shape[1]


# ---------------------------------------------------------------- planning (host)
def _round_up(x: int, m: int = ALIGN) -> int:
    return max(m, -(-int(x) // m) * m)


def _chunk_bounds(indptr, is_gen, slots, gen_slots, block_rows, max_terms):
    """Greedy cut of the entries into chunks: each chunk takes as many entries
    as fit (≤ slots ±1 entries, ≤ gen_slots general entries, ≤ block_rows
    local rows, ≤ max_terms entries of any one row).  Returns int64 arrays
    (start entry, end entry, row0, last local row, cont) per chunk."""
    rows = len(indptr) - 1
    gen_cum = np.concatenate([[0], np.cumsum(is_gen, dtype=np.int64)])
    pm_cum = np.arange(len(gen_cum), dtype=np.int64) - gen_cum
    long_rows = np.flatnonzero(np.diff(indptr) > max_terms)
    out = []
    e, r = 0, 0
    while r < rows:
        cont = e > indptr[r]
        end = min(np.searchsorted(pm_cum, pm_cum[e] + slots, "right") - 1,
                  np.searchsorted(gen_cum, gen_cum[e] + gen_slots, "right") - 1,
                  indptr[min(r + block_rows, rows)])
        if indptr[r + 1] - e > max_terms:
            end = min(end, e + max_terms)
        i = np.searchsorted(long_rows, r, "right")
        if i < len(long_rows):
            end = min(end, indptr[long_rows[i]] + max_terms)
        j = int(np.searchsorted(indptr, end, "right")) - 1      # last row starting at or before end
        if j < rows and indptr[j] < end:                         # end inside row j: continue it
            nxt, last = j, j - r
        else:
            nxt = min(j, r + block_rows)
            last = nxt - r - 1
        out.append((e, end, r, last, cont))
        e, r = int(end), int(nxt)
    return np.array(out, dtype=np.int64).reshape(-1, 5).T


def block(indptr, cols, coeff_ids, classes, num_cols: int, *, target: int = TARGET_ENTRIES,
          slots: int | None = None, gen_slots: int | None = None,
          block_rows: int | None = None, max_terms: int = MAX_TERMS) -> BlockedCSR:
    """Plan the chunks of a CSR matrix (host numpy; arrays returned as numpy).

    indptr (rows+1,), cols (nnz,), coeff_ids (nnz,) as in a CSR of a matrix
    with ``num_cols`` columns; classes: ``coefficient_classes`` of the
    coefficient table.  Slot counts default to about ``target`` entries per
    chunk split in the matrix's ±1 : general ratio (with headroom), and
    block_rows to the rows such a chunk spans (at most 2·target, which bounds
    the working set of mostly empty matrices); max_terms (≤ MAX_TERMS) bounds
    the terms of one row in one chunk.
    """
    indptr = np.asarray(indptr, np.int64)
    cols = np.asarray(cols, np.int64)
    coeff_ids = np.asarray(coeff_ids, np.int64)
    rows, nnz = len(indptr) - 1, int(indptr[-1])
    if rows < 0 or indptr[:1].tolist() != [0] or np.any(np.diff(indptr) < 0) or len(cols) != nnz \
            or len(coeff_ids) != nnz:
        raise ValueError(f"block: not a CSR matrix (indptr of length {len(indptr)} must rise "
                         f"from 0 to the {len(cols)} cols and {len(coeff_ids)} coeff ids)")
    if not 1 <= max_terms <= MAX_TERMS:
        raise ValueError(f"block: max_terms must be in [1, {MAX_TERMS}], got {max_terms}")
    if nnz and (coeff_ids.min() < 0 or coeff_ids.max() >= len(classes)):
        raise ValueError(f"block: coefficient ids must lie in [0, {len(classes)})")
    if nnz and (cols.min() < 0 or cols.max() >= num_cols):
        raise ValueError(f"block: column indices must lie in [0, {num_cols})")
    cls = np.asarray(classes)[coeff_ids] if nnz else np.zeros(0, np.int8)
    is_gen = cls == GENERAL
    n_gen = int(is_gen.sum())
    n_pm = nnz - n_gen
    total = max(nnz, 1)
    slots = slots or _round_up(min(n_pm, math.ceil(1.1 * target * n_pm / total)))
    gen_slots = gen_slots or _round_up(min(n_gen, math.ceil(1.25 * target * n_gen / total)))
    block_rows = block_rows or _round_up(min(rows, 2 * target,
                                             math.ceil(1.25 * rows * (slots + gen_slots) / total)))
    if min(slots, gen_slots, block_rows) < 1:
        raise ValueError("block: slots, gen_slots and block_rows must be positive")
    if rows + 3 * block_rows >= 2**31 or num_cols >= 2**31:
        raise ValueError("block: rows or columns do not fit int32 indices")

    start, end, row0, last, cont = _chunk_bounds(indptr, is_gen, slots, gen_slots, block_rows,
                                                 max_terms)
    n = len(start)
    chunk = np.repeat(np.arange(n), end - start)
    local = np.repeat(np.arange(rows), np.diff(indptr)) - row0[chunk]
    R = block_rows

    def fill(groups, width, pad_seg):
        """Slots of each chunk: the entries of each (mask, segment offset)
        group in turn, in entry order, then padding.  Returns the column and
        segment arrays and, per group, (entry, chunk, slot) of its entries."""
        c = np.full((n, width), num_cols, np.int32)
        s = np.full((n, width), pad_seg, np.int32)
        used = np.zeros(n, np.int64)
        placed = []
        for mask, offset in groups:
            idx = np.flatnonzero(mask)
            ch = chunk[idx]
            first = np.searchsorted(idx, start)                 # first entry of each chunk
            slot = used[ch] + np.arange(len(idx)) - first[ch]
            c[ch, slot] = cols[idx]
            s[ch, slot] = local[idx] + offset
            used += np.searchsorted(idx, end) - first
            placed.append((idx, ch, slot))
        return c, s, placed

    pm_cols, pm_seg, _ = fill([(cls == PLUS, R), (cls == MINUS, 2 * R)], slots, 3 * R)
    g_cols, g_seg, [(gidx, gch, gslot)] = fill([(is_gen, 0)], gen_slots, R - 1)
    g_coeff = np.zeros((n, gen_slots), np.int32)
    g_coeff[gch, gslot] = coeff_ids[gidx]
    return BlockedCSR(pm_cols, pm_seg, g_cols, g_seg, g_coeff, row0.astype(np.int32),
                      last.astype(np.int32), cont.astype(bool), rows, int(num_cols), nnz,
                      block_rows)


def to_csr(m: BlockedCSR, plus_id: int, minus_id: int):
    """The CSR (indptr, cols, coeff_ids) a BlockedCSR holds, entries of each
    row sorted by (col, coeff id); ±1 entries get coefficient ids ``plus_id``
    and ``minus_id``.  Host numpy; for tests and inspection."""
    R = m.block_rows
    row0 = np.asarray(m.row0)[:, None]
    parts = []
    for cols, seg, ids in ((m.cols, m.seg, None), (m.gen_cols, m.gen_seg, m.gen_coeff)):
        cols, seg = np.asarray(cols), np.asarray(seg)
        keep = cols < m.num_cols
        row = (row0 + seg % R)[keep]
        cid = (np.where(seg >= 2 * R, minus_id, plus_id) if ids is None else np.asarray(ids))[keep]
        parts.append((row, cols[keep], cid))
    row, col, cid = (np.concatenate(x).astype(np.int64) for x in zip(*parts))
    order = np.lexsort((cid, col, row))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(row, minlength=m.rows))])
    return indptr, col[order], cid[order]


# ---------------------------------------------------------------- evaluation (device)
def _reduce_formula(ar, xp, tp, xn, tn):
    """(xp + tp·2^254) − (xn + tn·2^254) mod r, for xp, xn < 2^254 < r and
    small t (all canonical): one Montgomery product by 2^254·R per sign."""
    c = ar.const(1 << 254, ar.like(xp))
    return ar.sub(ar.add(xp, ar.mul(tp, c)), ar.add(xn, ar.mul(tn, c)))


_reduce = elementwise(_reduce_formula, [(8,)] * 4, [((8,), jnp.uint32)], Fr.arith, Fr.config,
                      name="Fr_spmv_reduce")


def _normalize(h):
    """Half-limb sums h (16, ...) uint32, h[d] of weight 2^(16d), each <
    2^32 − 2^16 -> (X, T) as Fr limb arrays (8, ...) with S = X + T·2^254,
    X < 2^254 and T < 2^18 in limb 0."""
    c = jnp.zeros_like(h[0])
    digits = []
    for d in range(16):
        t = h[d] + c
        digits.append(t & 0xFFFF)
        c = t >> 16
    x = [digits[2 * j] | (digits[2 * j + 1] << 16) for j in range(8)]
    top = (x[7] >> 30) | (c << 2)
    x[7] = x[7] & 0x3FFFFFFF
    zero = jnp.zeros_like(top)
    return jnp.stack(x), jnp.stack([top] + [zero] * 7)


def element_major(w):
    """Witness batch (8, B, n) limb-major -> (n, B, 8): one variable's limbs
    of all instances contiguous, so a column gather reads whole elements."""
    return jnp.transpose(w, (2, 1, 0))


def spmv(m: BlockedCSR, coeffs, wt):
    """M·w for every instance: wt (num_cols, B, 8) element-major Fr witnesses
    (``element_major``), coeffs (8, n_coeffs) the Fr coefficient table ->
    (8, B, rows) canonical Fr (Montgomery).  One ``lax.scan`` step per chunk."""
    if wt.shape[0] != m.num_cols or wt.shape[2:] != (8,):
        raise ValueError(f"spmv: expected element-major Fr (num_cols={m.num_cols}, B, 8), "
                         f"got {wt.shape}")
    B = wt.shape[1]
    R = m.block_rows
    if m.chunks == 0:
        return jnp.zeros((8, B, m.rows), jnp.uint32)
    if coeffs.shape[1] == 0:                 # no general entries can refer to an empty table
        coeffs = jnp.zeros((8, 1), jnp.uint32)
    gather = functools.partial(jnp.take, wt, axis=0, mode="fill", fill_value=0)

    def step(state, ch):
        out, carry = state
        cols, seg, gcols, gseg, gcoeff, row0, last, cont = ch
        k = jnp.take(coeffs, gcoeff, axis=1, mode="clip")[:, :, None]     # (8, G, 1)
        gp = Fr.mul(jnp.transpose(gather(gcols), (2, 0, 1)), k)           # (8, G, B)
        terms = jnp.concatenate([jnp.transpose(gp, (1, 2, 0)), gather(cols)])  # (G+E, B, 8)
        halves = jnp.stack([terms & 0xFFFF, terms >> 16], axis=-1).reshape(terms.shape[0], B * 16)
        s = jax.ops.segment_sum(halves, jnp.concatenate([gseg, seg]), num_segments=3 * R,
                                indices_are_sorted=True)
        s = jnp.transpose(s.reshape(3, R, B, 16), (3, 0, 2, 1))            # (16, 3, B, R)
        x, t = _normalize(jnp.stack([s[:, 0] + s[:, 1], s[:, 2]], axis=1))   # (8, 2, B, R)
        vals = _reduce(x[:, 0], t[:, 0], x[:, 1], t[:, 1])                # (8, B, R)
        first = jnp.where(cont, Fr.add(vals[:, :, 0], carry), vals[:, :, 0])
        vals = vals.at[:, :, 0].set(first)
        carry = lax.dynamic_index_in_dim(vals, last, axis=2, keepdims=False)
        out = lax.dynamic_update_slice(out, vals, (0, 0, row0))
        return (out, carry), None

    out0 = jnp.zeros((8, B, m.rows + R), jnp.uint32)
    xs = (m.cols, m.seg, m.gen_cols, m.gen_seg, m.gen_coeff, m.row0, m.last, m.cont)
    (out, _), _ = lax.scan(step, (out0, jnp.zeros((8, B), jnp.uint32)), xs)
    return out[:, :, :m.rows]
