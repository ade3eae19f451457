"""Sparse matrix × Fr vector products (SpMV): fixed-width (ELL) rows, long
rows in fixed-width pieces, lazily summed chunks.

Math: for a sparse matrix M (rows × n) over Fr and a batch of vectors w,
``(M·w)[r] = Σ_k coeff_k · w[col_k]`` over the entries k of row r, in Fr.

Layout (``BlockedCSR``): every row's entries split into parts.

1. The *ELL part* (fixed width): the first ``Kp`` entries of each row with
   coefficient ±1 (the overwhelming majority in bellperson circuits) and its
   first ``Kg`` entries with any other ("general") coefficient, in entry
   order, as dense row-major arrays: ``ell_cols`` int32 (rows, Kp) with the
   signs packed in ``ell_neg`` uint32 (rows,) (bit k set: slot k is −1), and
   ``ell_gen_cols``, ``ell_gen_coeff`` int32 (rows, Kg) (column, index into
   the coefficient table).  Unused slots have column ``num_cols``, which is
   gathered as zero, so they add nothing.  The widths are chosen from the
   histogram of per-row counts (``ell_widths``): a slot is added while the
   rows it would take out of the overflow are worth more than the slot
   costs every row.
2. The *pieces* of the long rows (rows with more entries of a kind than
   the ELL width; ``long_rows`` lists them): their remaining entries, in
   order, cut into pieces of ``Qp`` ±1 and ``Qg`` general entries (piece j
   of a row takes its spilled ±1 entries [j·Qp, (j+1)·Qp) and general
   entries [j·Qg, (j+1)·Qg)), stored like the ELL part (``piece_*``) and
   evaluated by the same kernel; the widths minimise slots plus piece
   sums over the spilled counts (``piece_widths``).  Real circuits need
   this: in the 2 KiB PoRep circuit 0.5% of A's rows (~190 terms each on
   average) hold 38% of its entries.  The pieces of long row i are the run
   [``piece_start[i]``, ``piece_start[i+1]``) (the last run ends at
   ``pieces``): each long row is the sum of its run (``_piece_sums``, one
   kernel that walks every run with the sum in registers; hypothesis 66).
3. The *chunks* (only without an ELL part, the earlier all-CSR layout, ELL
   widths (0, 0): no pieces, ``long_rows`` empty and unused): every entry
   of every row, over the witness, cut into chunks of bounded size.
   Chunk q holds a contiguous run of entries that starts in row ``row0[q]``
   and covers local rows ``0..last[q]``; a row may be split across
   consecutive chunks (then the later chunk has ``cont[q]`` set).  Each
   chunk has fixed-size slots: ``gen_slots`` slots for general entries
   (``gen_cols``, ``gen_coeff``, ``gen_seg`` = local row) and ``slots``
   slots for ±1 entries (``cols`` and ``seg``, the +1 entries first with
   ``seg = R + local row``, then the −1 entries with ``seg = 2R + local
   row``, R = ``block_rows``); unused slots have an out-of-range column
   (gathered as zero) and segment R − 1 (general) or 3R (±1, dropped), so
   each chunk's segment ids, general slots first, are sorted.

Everything is planned on the host (``block``) and evaluated on the device
(``spmv``); shapes are static and the working memory is bounded.

Evaluation of fixed-width rows (ELL part, pieces; per chunk of rows, one
``lax.scan`` step each): gather w at the Kp + Kg columns of every row (plain
XLA gathers from the element-major witness, whose 32-byte elements are
contiguous) and the general coefficients from the table, then ONE
elementwise kernel (``ops.elementwise``: a Pallas kernel on CUDA) per row
adds or subtracts the ±1 terms and multiplies-then-adds the general terms,
modular (Fr add, sub, mul of the formula layer) — no scatter.  The last row
chunk starts at ``rows − C`` (overlapping its predecessor with identical
values), so the output needs no padding.  That is the "gather" form; the
"fused" form (the default on CUDA since session 30; ``spmv(form=...)``,
``$JAXPROVE_SPMV``) is one Pallas kernel over all rows that loads each slot's
element by index itself and applies the same row formula in registers, so
no gathered terms exist in memory (``_spmv_ell_fused``).

Evaluation of the piece sums: one Pallas kernel (``_piece_sums``) whose
lanes are long rows; each walks its run of pieces with the Fr sum in
registers (masked loads past a shorter run), so no scatter and no atomics.
Where no Pallas kernel runs, the same sums lazily in half-limbs by one
segment sum (the chunks' method below; a run has at most ``MAX_TERMS``
pieces, ``block`` checks).  Until session 34 the runs were summed by chunks
of +1 entries (a scatter-add over consecutive entries of one segment, whose
atomics collide): 34 of the 55 ms of the real 32GiB PoRep SpMV.

Evaluation of the chunks (one ``lax.scan`` step per chunk): gather the
witness at the ±1 columns and at the general columns (one Fr Montgomery
product each), split every term's eight 32-bit limbs into sixteen 16-bit
halves, and add the halves of each (local row, group) with one segment sum
in uint32: LAZY accumulation.  A row receives at most ``max_terms ≤ 2^16``
terms per chunk (the planner cuts long rows across chunks), so each
half-limb sum stays below 2^32.  Per row the two sums S± are normalised
into S = X + T·2^254 with X < 2^254 < r and T < 2^18, and one kernel forms
``(X+ + T+·2^254) − (X− + T−·2^254) mod r``.  Since Montgomery form is
linear (x ↦ x·R mod r), sums of Montgomery limbs are the Montgomery form of
the sum, so no conversion is needed anywhere.

Row blocks (out of core, ``RowBlocks``, ``row_block``): rows [r0, r1) of
a BlockedCSR are again a BlockedCSR (its ELL rows, its long rows and
their pieces with rebased runs; without an ELL part the chunks meeting its
rows with the entries of other rows masked), so ``spmv`` of the block is
rows [r0, r1) of ``spmv`` of the whole, for any cut: a chunk straddling a
cut goes to both blocks.  A block needs only its own arrays on the device.
Every block of a plan is padded to one ``BlockShape`` (rows, long rows,
pieces, chunks) with entries that add nothing — ELL rows and pieces of
out-of-range columns, empty runs, chunks of dropped segments writing zeros
past the output, long rows past the block's rows (dropped) — so that all
of them run one compiled program; the result's rows past r1 − r0 are zero.

Memory (B instances, rows, n variables, K = Kp + Kg, P pieces, Q = Qp +
Qg): the matrix holds 4·(K + 1)·rows + 4·(Q + 1)·P bytes of fixed-width
rows plus 8 bytes per long row, or 8 bytes per chunk entry (plus slack); an
evaluation holds the element-major witness copy 32·B·n bytes, the output
32·B·rows, the pieces' values 32·B·P and the long rows' sums, and per row
chunk of C rows (C·K·B ≈ ``ELL_CHUNK_SLOTS``) about 32·B·C·(2K + 1) +
32·C·Kg bytes (gathered terms, their limb-major copy, the result), per
chunk about 96·B·(E + G) + 384·B·R bytes (E = slots, G = gen_slots).
"""
from __future__ import annotations

import dataclasses
import functools
import math
import os
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ops.elementwise import elementwise, x64
from ops.field import Fr
from ops.platform import by_platform
from ops.ptx import kernel_arith

try:  # Pallas' Triton backend; absent on exotic jaxlib builds
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu
except ImportError:  # pragma: no cover
    pl = plgpu = None

PLUS, MINUS, GENERAL = 0, 1, 2
# how spmv evaluates the fixed-width rows: by XLA gathers + the row kernel ("gather") or by
# one gathering kernel ("fused")
FORMS = ("gather", "fused")


def default_form() -> str:
    """The form ``spmv`` uses unless told: ``$JAXPROVE_SPMV`` (one of
    ``FORMS``; read once, at import), else "fused" (bench/NOTES.md 53: on the
    H200 the synthetic 32M-row SpMV in 17.3 ms against the gather form's
    41.4).  On a CPU every form runs the gather
    path, and kernels in interpret mode (tests) take "gather" unless a form
    is named."""
    v = os.environ.get("JAXPROVE_SPMV", "fused").strip()
    if v not in FORMS:
        raise ValueError(f"JAXPROVE_SPMV: {v!r} is not one of {FORMS}")
    return v


DEFAULT_FORM = default_form()
MAX_TERMS = 1 << 16          # terms of one row in one chunk: 2^16 · (2^16 − 1) < 2^32
TARGET_ENTRIES = 1 << 20     # default entries per overflow chunk
ALIGN = 128                  # slot counts are multiples of this
MAX_ELL_WIDTH = 32           # slots of one kind per row (the signs fit one uint32)
OVERFLOW_COST = 24.0         # an overflow entry costs about this many ±1 ELL slots (estimate:
                             # 1.77 ns per entry measured on the H200 for the lazy chunks,
                             # ~0.07 ns per slot for the gather, transpose and kernel traffic)
MAX_GEN_WIDTH = 8            # general slots per row chosen at most: each is a Montgomery product
                             # unrolled in the row kernel.  4 while a product was ~600 Triton ops
                             # (32 of them: minutes of compile on the H200); one PTX op since
                             # session 22, so 8 (bench/NOTES.md hypothesis 57: the real PoRep's
                             # 255-term bits-to-number rows in 2x fewer pieces and piece sums)
GENERAL_SLOT_COST = 2.0      # a general ELL slot (gather, coefficient, product) in ±1 slots
ELL_CHUNK_SLOTS = 1 << 24    # gathered terms per ELL row chunk (C·K·B), 512 MiB of limbs

DATA_FIELDS = ("cols", "seg", "gen_cols", "gen_seg", "gen_coeff", "row0", "last", "cont",
               "ell_cols", "ell_neg", "ell_gen_cols", "ell_gen_coeff", "long_rows",
               "piece_cols", "piece_neg", "piece_gen_cols", "piece_gen_coeff", "piece_start")
META_FIELDS = ("rows", "num_cols", "nnz", "block_rows")


def coefficient_classes(coeffs: Sequence[int]) -> np.ndarray:
    """PLUS / MINUS / GENERAL for each canonical Fr coefficient (int8 array)."""
    cls = np.full(len(coeffs), GENERAL, np.int8)
    for i, c in enumerate(coeffs):
        if c == 1:
            cls[i] = PLUS
        elif c == Fr.p - 1:
            cls[i] = MINUS
    return cls


@functools.partial(jax.tree_util.register_dataclass, data_fields=list(DATA_FIELDS),
                   meta_fields=list(META_FIELDS))
@dataclasses.dataclass(frozen=True)
class BlockedCSR:
    """A sparse Fr matrix: fixed-width rows plus chunked overflow (module
    docstring).

    Overflow chunks: cols, seg int32 (chunks, slots); gen_cols, gen_seg,
    gen_coeff int32 (chunks, gen_slots); row0, last int32 (chunks,); cont
    bool (chunks,).  ELL: ell_cols int32 (rows, Kp); ell_neg uint32 (rows,)
    (shape (0,) when Kp = 0); ell_gen_cols, ell_gen_coeff int32 (rows, Kg).
    long_rows int32 (long rows,): the global row of each long row (empty
    when Kp = Kg = 0: the chunks then cover all rows themselves).  Pieces
    of the long rows: piece_cols int32 (pieces, Qp), piece_neg uint32
    (pieces,) (or (0,) when Qp = 0), piece_gen_cols, piece_gen_coeff int32
    (pieces, Qg); piece_start int32 (long rows,): long row i is the sum of
    pieces [piece_start[i], piece_start[i+1]) (the last run ends at
    ``pieces``).  Chunks exist only without an ELL part (widths (0, 0)).
    rows × num_cols: the matrix's shape; nnz: its entry count; block_rows: R,
    the most local rows of one overflow chunk (0: no chunks)."""
    cols: np.ndarray
    seg: np.ndarray
    gen_cols: np.ndarray
    gen_seg: np.ndarray
    gen_coeff: np.ndarray
    row0: np.ndarray
    last: np.ndarray
    cont: np.ndarray
    ell_cols: np.ndarray
    ell_neg: np.ndarray
    ell_gen_cols: np.ndarray
    ell_gen_coeff: np.ndarray
    long_rows: np.ndarray
    piece_cols: np.ndarray
    piece_neg: np.ndarray
    piece_gen_cols: np.ndarray
    piece_gen_coeff: np.ndarray
    piece_start: np.ndarray
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

    @property
    def ell_width(self) -> tuple[int, int]:
        """(Kp, Kg): ±1 and general slots per row of the ELL part."""
        return self.ell_cols.shape[1], self.ell_gen_cols.shape[1]

    @property
    def piece_width(self) -> tuple[int, int]:
        """(Qp, Qg): ±1 and general slots per piece of the long rows."""
        return self.piece_cols.shape[1], self.piece_gen_cols.shape[1]

    @property
    def pieces(self) -> int:
        return self.piece_cols.shape[0]

    @property
    def overflow_rows(self) -> int:
        """Rows covered by the overflow chunks (all rows without an ELL part),
        else the long rows."""
        return self.rows if self.ell_width == (0, 0) else self.long_rows.shape[0]


# ---------------------------------------------------------------- planning (host)
def _round_up(x: int, m: int = ALIGN) -> int:
    return max(m, -(-int(x) // m) * m)


def ell_widths(n_pm, n_gen, overflow_cost: float = OVERFLOW_COST) -> tuple[int, int]:
    """ELL widths (Kp, Kg) from the per-row counts of ±1 and general entries
    (int arrays (rows,)).  Each width grows while the rows that still spill
    over it, times ``overflow_cost``, outweigh a slot for every row (a
    general slot costing ``GENERAL_SLOT_COST``): the smallest k with
    #{rows with count > k}·overflow_cost ≤ rows·slot_cost, at most
    ``MAX_ELL_WIDTH`` (general: ``MAX_GEN_WIDTH``).  overflow_cost = 100
    keeps ≥ 99% of rows (per kind) within the ELL part (up to those caps);
    0 gives (0, 0), no ELL part."""
    def width(counts, slot_cost):
        rows = len(counts)
        if rows == 0 or overflow_cost <= 0:
            return 0
        spill = rows - np.cumsum(np.bincount(counts))       # spill[k]: rows with count > k
        k = int(np.argmax(spill * overflow_cost <= rows * slot_cost))
        return min(k, MAX_ELL_WIDTH)

    return (width(np.asarray(n_pm), 1.0),
            min(width(np.asarray(n_gen), GENERAL_SLOT_COST), MAX_GEN_WIDTH))


def piece_widths(o_pm, o_gen, overflow_cost: float = OVERFLOW_COST) -> tuple[int, int]:
    """Piece widths (Qp, Qg) from the spilled counts of the long rows (int
    arrays (long rows,)): per kind the q in [1, MAX_ELL_WIDTH] (general:
    [1, MAX_GEN_WIDTH]) minimising the slots and the piece sums it costs,
    long_rows·q·slot_cost + overflow_cost·Σ ceil(count/q); 0 for a kind
    that does not spill."""
    def width(counts, slot_cost, most):
        counts = np.asarray(counts, np.int64)
        if not counts.any():
            return 0
        q = np.arange(1, most + 1)
        pieces = (-(-counts[:, None] // q)).sum(axis=0)
        return int(q[np.argmin(len(counts) * q * slot_cost + overflow_cost * pieces)])

    return width(o_pm, 1.0, MAX_ELL_WIDTH), width(o_gen, GENERAL_SLOT_COST, MAX_GEN_WIDTH)


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


def _plan_chunks(indptr, cols, coeff_ids, cls, num_cols, target, slots, gen_slots, block_rows,
                 max_terms):
    """The overflow chunks of a CSR (indptr, cols, coeff_ids; cls the class
    of each entry): the eight chunk arrays of ``BlockedCSR`` and block_rows."""
    rows, nnz = len(indptr) - 1, int(indptr[-1])
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
    if rows + 3 * block_rows >= 2**31:
        raise ValueError("block: rows do not fit int32 indices")

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
    return (pm_cols, pm_seg, g_cols, g_seg, g_coeff, row0.astype(np.int32),
            last.astype(np.int32), cont.astype(bool)), block_rows


def _kind_ranks(row, is_gen, rows):
    """Per entry: its rank among the entries of its kind (±1 or general) in
    its row, in entry order; and the per-row counts of ±1 and general
    entries."""
    n_gen = np.bincount(row[is_gen], minlength=rows)
    n_pm = np.bincount(row[~is_gen], minlength=rows)
    rank = np.empty(len(row), np.int64)
    for general, counts in ((False, n_pm), (True, n_gen)):
        idx = np.flatnonzero(is_gen == general)
        rank[idx] = np.arange(len(idx)) - (np.cumsum(counts) - counts)[row[idx]]
    return rank, n_pm, n_gen


def _ell_fill(n_vrows, widths, vrow, slot, sel, cols, coeff_ids, cls, is_gen, num_cols):
    """ELL arrays (cols, neg, gen_cols, gen_coeff) of n_vrows (virtual) rows
    holding the entries ``sel`` (mask) at (vrow, slot); slot < width of the
    entry's kind."""
    kp, kg = widths
    pm, g = sel & ~is_gen, sel & is_gen
    c = np.full((n_vrows, kp), num_cols, np.int32)
    c[vrow[pm], slot[pm]] = cols[pm]
    bits = (cls[pm] == MINUS).astype(np.float64) * np.exp2(slot[pm])       # exact: < 2^32
    neg = np.bincount(vrow[pm], weights=bits, minlength=n_vrows).astype(np.uint32) if kp \
        else np.zeros(0, np.uint32)
    gc = np.full((n_vrows, kg), num_cols, np.int32)
    gc[vrow[g], slot[g]] = cols[g]
    gi = np.zeros((n_vrows, kg), np.int32)
    gi[vrow[g], slot[g]] = coeff_ids[g]
    return c, neg, gc, gi


def _check_width(name, width):
    if width is not None and (len(width) != 2 or not all(
            isinstance(k, (int, np.integer)) and 0 <= k <= MAX_ELL_WIDTH for k in width)):
        raise ValueError(f"block: {name} must be two ints in [0, {MAX_ELL_WIDTH}], got {width!r}")
    return None if width is None else tuple(int(k) for k in width)


def block(indptr, cols, coeff_ids, classes, num_cols: int, *, target: int = TARGET_ENTRIES,
          slots: int | None = None, gen_slots: int | None = None,
          block_rows: int | None = None, max_terms: int = MAX_TERMS,
          ell_width: tuple[int, int] | None = None,
          piece_width: tuple[int, int] | None = None,
          overflow_cost: float = OVERFLOW_COST) -> BlockedCSR:
    """Plan a CSR matrix's ELL part, pieces and chunks (host numpy; arrays
    returned as numpy).

    indptr (rows+1,), cols (nnz,), coeff_ids (nnz,) as in a CSR of a matrix
    with ``num_cols`` columns; classes: ``coefficient_classes`` of the
    coefficient table.  Widths: ``ell_width`` = (Kp, Kg) and
    ``piece_width`` = (Qp, Qg), each in [0, MAX_ELL_WIDTH], or chosen by
    ``ell_widths`` and ``piece_widths`` (with ``overflow_cost``) from the
    row counts and the spilled counts of the long rows (a piece width is at
    least 1 for a kind that spills; a long row may take at most MAX_TERMS
    pieces; chosen widths are never (0, 0) for a matrix with entries).  An
    explicit ell_width (0, 0) puts every entry into chunks (the earlier
    layout; only there do the chunk arguments count): chunk slot counts
    default to about ``target`` entries per chunk split in the ±1 : general
    ratio (with headroom), and block_rows to the rows such a chunk spans (at
    most 2·target, which bounds the working set of mostly empty matrices);
    max_terms (≤ MAX_TERMS) bounds the terms of one row in one chunk.
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
    ell_width = _check_width("ell_width", ell_width)
    piece_width = _check_width("piece_width", piece_width)
    if rows >= 2**31 or num_cols >= 2**31:
        raise ValueError("block: rows or columns do not fit int32 indices")
    cls = np.asarray(classes)[coeff_ids] if nnz else np.zeros(0, np.int8)
    is_gen = cls == GENERAL
    row = np.repeat(np.arange(rows, dtype=np.int64), np.diff(indptr))
    rank, n_pm, n_gen = _kind_ranks(row, is_gen, rows)
    kp, kg = ell_width or ell_widths(n_pm, n_gen, overflow_cost)
    if ell_width is None and kp == kg == 0 and nnz:
        # The rule found no slot worth its rows (mostly empty rows, or a low overflow_cost),
        # but (0, 0) means the all-CSR chunks, which cost ~15x an ELL part plus pieces
        # (bench/NOTES.md hypothesis 66): one slot of the commoner kind, the rest in pieces.
        kp, kg = (1, 0) if n_pm.sum() >= n_gen.sum() else (0, 1)
    k = np.where(is_gen, kg, kp)
    ell = _ell_fill(rows, (kp, kg), row, rank, rank < k, cols, coeff_ids, cls, is_gen, num_cols)
    spill = rank >= k
    if kp == kg == 0:                                        # no ELL part: chunks over all rows
        no_pieces = (np.zeros((0, 0), np.int32), np.zeros(0, np.uint32),
                     np.zeros((0, 0), np.int32), np.zeros((0, 0), np.int32))
        chunks, block_rows = _plan_chunks(indptr, cols, coeff_ids, cls, num_cols, target, slots,
                                          gen_slots, block_rows, max_terms)
        return BlockedCSR(*chunks, *ell, np.zeros(0, np.int32), *no_pieces,
                          np.zeros(0, np.int32), rows, int(num_cols), nnz, block_rows)

    o_pm, o_gen = np.maximum(n_pm - kp, 0), np.maximum(n_gen - kg, 0)
    long_rows = np.flatnonzero(o_pm + o_gen).astype(np.int32)
    o_pm, o_gen = o_pm[long_rows], o_gen[long_rows]
    qp, qg = piece_width or piece_widths(o_pm, o_gen, overflow_cost)
    qp, qg = max(qp, int(o_pm.any())), max(qg, int(o_gen.any()))   # every spilled entry placed
    per_row = np.maximum(-(-o_pm // max(qp, 1)), -(-o_gen // max(qg, 1)))
    if per_row.size and per_row.max() > MAX_TERMS:           # the lazy sums' bound (_piece_sums)
        i = int(np.argmax(per_row))
        raise ValueError(f"block: row {long_rows[i]} spills into {per_row[i]} pieces of "
                         f"({qp}, {qg}) entries, more than {MAX_TERMS}; give wider pieces")
    first = np.cumsum(per_row) - per_row                     # first piece of each long row
    n_pieces = int(per_row.sum())
    where = np.full(rows, -1, np.int64)
    where[long_rows] = np.arange(len(long_rows))
    vrow, slot = np.zeros(nnz, np.int64), np.zeros(nnz, np.int64)
    i = np.flatnonzero(spill)                                # rank − k: rank among the spilled
    vrow[i], slot[i] = np.divmod(rank[i] - k[i], np.where(is_gen[i], qg, qp))
    vrow[i] += first[where[row[i]]]
    pieces = _ell_fill(n_pieces, (qp, qg), vrow, slot, spill, cols, coeff_ids, cls, is_gen,
                       num_cols)
    no_chunks = tuple(np.zeros((0, 0), np.int32) for _ in range(5)) + (
        np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, bool))
    return BlockedCSR(*no_chunks, *ell, long_rows, *pieces, first.astype(np.int32), rows,
                      int(num_cols), nnz, 0)


def to_csr(m: BlockedCSR, plus_id: int, minus_id: int):
    """The CSR (indptr, cols, coeff_ids) a BlockedCSR holds, entries of each
    row sorted by (col, coeff id); ±1 entries get coefficient ids ``plus_id``
    and ``minus_id``.  Host numpy; for tests and inspection."""
    R = m.block_rows
    row0 = np.asarray(m.row0)[:, None]
    parts = []                                   # (row, column, coefficient id)
    if m.ell_width == (0, 0):
        for cols, seg, ids in ((m.cols, m.seg, None), (m.gen_cols, m.gen_seg, m.gen_coeff)):
            cols, seg = np.asarray(cols), np.asarray(seg)
            keep = cols < m.num_cols
            cid = (np.where(seg >= 2 * R, minus_id, plus_id) if ids is None else np.asarray(ids))
            parts.append(((row0 + seg % R)[keep], cols[keep], cid[keep]))
    else:
        def fixed_width(arrays, row_of):
            cols, neg, gen_cols, gen_ids = (np.asarray(a) for a in arrays)
            q = cols.shape[1]
            minus = (neg.astype(np.uint64)[:, None] >> np.arange(q, dtype=np.uint64)) & 1 if q \
                else np.zeros(cols.shape, np.uint64)
            for c, cid in ((cols, np.where(minus == 1, minus_id, plus_id)), (gen_cols, gen_ids)):
                keep = c < m.num_cols
                parts.append((np.broadcast_to(row_of[:, None], c.shape)[keep], c[keep],
                              np.asarray(cid)[keep]))

        fixed_width((m.ell_cols, m.ell_neg, m.ell_gen_cols, m.ell_gen_coeff), np.arange(m.rows))
        runs = np.diff(np.append(np.asarray(m.piece_start, np.int64), m.pieces))
        piece_row = np.repeat(np.asarray(m.long_rows), runs)
        if m.pieces:
            fixed_width((m.piece_cols, m.piece_neg, m.piece_gen_cols, m.piece_gen_coeff),
                        piece_row)
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


def ell_row_formula(kp: int, kg: int):
    """The per-row formula of the ELL part, over (neg, pm, gen, coef) —
    only the first two when kg = 0, only the last two when kp = 0:
    neg raw limbs (1,) (bit k: slot k is −1), pm kp Fr terms, gen and coef
    kg Fr terms and coefficients.  Returns Σ_k ±pm_k + Σ_j gen_j·coef_j."""
    if kp + kg == 0:
        raise ValueError("ell_row_formula: no slots")

    def formula(ar, *args):
        acc = None
        if kp:
            neg, pm = args[0], args[1]
            for k in range(kp):
                minus = ar.scalar_bit(neg, k)
                acc = (ar.select(minus, ar.neg(pm[k]), pm[k]) if acc is None
                       else ar.select(minus, ar.sub(acc, pm[k]), ar.add(acc, pm[k])))
        if kg:
            gen, coef = args[-2], args[-1]
            for j in range(kg):
                p = ar.mul(gen[j], coef[j])
                acc = p if acc is None else ar.add(acc, p)
        return acc

    return formula


@functools.lru_cache(maxsize=None)
def _ell_kernel(kp: int, kg: int, config=Fr.config):
    prefixes = ([(1,), (kp, Fr.L)] if kp else []) + ([(kg, Fr.L)] * 2 if kg else [])
    return elementwise(ell_row_formula(kp, kg), prefixes, [((Fr.L,), jnp.uint32)], Fr.arith,
                       config, name=f"Fr_spmv_ell_{kp}_{kg}")


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


# ``element_major`` as a program of its own, compiled without autotuning: XLA
# on the GPU (jax 0.11) profiles candidate transposes on scratch buffers the
# size of w, a compile-time transient of 32·B·n bytes beside w that an
# out-of-core memory plan does not count (at 2^27 variables it exhausted a
# 14 GiB pool: bench/NOTES.md, hypothesis 43).  Top level only (jax refuses
# compiler options on a nested jit).
element_major_untuned = jax.jit(element_major, compiler_options={"xla_gpu_autotune_level": 0})


def _gather_terms(wt, idx):
    """w at the columns idx (C, K) (column num_cols: zero) -> limb-major Fr
    (K, 8, B, C).  wt: element-major (num_cols, B, 8)."""
    C, K = idx.shape
    n, B, L = wt.shape
    g = jnp.take(wt.reshape(n, B * L), idx, axis=0, mode="fill", fill_value=0)   # (C, K, B·8)
    return jnp.transpose(g.reshape(C, K, B, L), (1, 3, 2, 0))


def ell_row_chunks(rows: int, slots_per_row: int, chunk_slots: int = ELL_CHUNK_SLOTS):
    """Row chunks of the ELL evaluation: (C, starts) with C rows per chunk
    (C·slots_per_row ≤ chunk_slots, rounded down to a multiple of ALIGN when
    at least ALIGN so that the kernel needs no padding; at least 1, at most
    rows) and int32 start rows ``starts``, the last one ``rows − C``
    (overlapping its predecessor) so that every chunk is full.
    rows ≥ 1, slots_per_row ≥ 1."""
    C = max(1, chunk_slots // slots_per_row)
    C = min(rows, C // ALIGN * ALIGN if C >= ALIGN else C)
    return C, np.minimum(np.arange(-(-rows // C)) * C, rows - C).astype(np.int32)


def _spmv_ell(arrays, rows: int, coeffs, wt, chunk_slots: int, config):
    """Fixed-width rows: arrays (cols, neg, gen_cols, gen_coeff) of ``rows``
    rows -> (8, B, rows), one scan step per chunk of C rows."""
    cols, neg, gen_cols, gen_coeff = arrays
    kp, kg = cols.shape[1], gen_cols.shape[1]
    B = wt.shape[1]
    C, starts = ell_row_chunks(rows, (kp + kg) * B, chunk_slots)
    kernel = _ell_kernel(kp, kg, config)
    table = coeffs.T                                                      # (n_coeffs, 8)

    def step(out, s):
        args = []
        if kp:
            args += [lax.dynamic_slice_in_dim(neg, s, C)[None],                # (1, C)
                     _gather_terms(wt, lax.dynamic_slice_in_dim(cols, s, C))]
        if kg:
            ids = lax.dynamic_slice_in_dim(gen_coeff, s, C)                 # (C, Kg)
            coef = jnp.transpose(jnp.take(table, ids, axis=0, mode="clip"), (1, 2, 0))
            args += [_gather_terms(wt, lax.dynamic_slice_in_dim(gen_cols, s, C)),
                     coef[:, :, None, :]]                                  # (Kg, 8, 1, C)
        return lax.dynamic_update_slice(out, kernel(*args), (0, 0, s)), None

    out, _ = lax.scan(step, jnp.zeros((Fr.L, B, rows), jnp.uint32), jnp.asarray(starts))
    return out


def _ell_fused_kernel(kp: int, kg: int, n: int, B: int, rows: int, bn: int, config):
    """The Pallas kernel of ``_spmv_ell_fused``: program (i, b) evaluates
    rows [s, s + bn), s = min(i·bn, rows − bn), of instance b.  Refs: cols
    (rows, kp) int32, neg (rows,) uint32, gen_cols and gen_coeff (rows, kg)
    int32, table (n_coeffs, 8), wt (n·B, 8) element-major, out (8, B, rows)."""
    ar = kernel_arith(Fr.arith, config)
    formula = ell_row_formula(kp, kg)
    wide = n * B >= 1 << 31                   # element index past int32: 64-bit arithmetic

    def gather(wt_ref, c, b):
        """w[c] of instance b as Fr rows (bn,) per limb; column n: zero (no load)."""
        ok = c < n
        e = jnp.where(ok, c, 0)
        e = (e.astype(jnp.int64) if wide else e) * B + b
        return [plgpu.load(wt_ref.at[e, limb], mask=ok, other=0) for limb in range(Fr.L)]

    def kernel(cols_ref, neg_ref, gcols_ref, gcoef_ref, table_ref, wt_ref, out_ref):
        r = jnp.minimum(pl.program_id(0) * bn, rows - bn) + lax.iota(jnp.int32, bn)
        b = pl.program_id(1)
        args = []
        if kp:
            terms = tuple(gather(wt_ref, plgpu.load(cols_ref.at[r, k]), b) for k in range(kp))
            args += [[plgpu.load(neg_ref.at[r])], terms]
        if kg:
            gen, coef = [], []
            for j in range(kg):
                c = plgpu.load(gcols_ref.at[r, j])
                gen.append(gather(wt_ref, c, b))
                ids = jnp.where(c < n, plgpu.load(gcoef_ref.at[r, j]), 0)   # padding: any id
                coef.append([plgpu.load(table_ref.at[ids, limb]) for limb in range(Fr.L)])
            args += [tuple(gen), tuple(coef)]
        out = formula(ar, *args)
        for limb in range(Fr.L):
            plgpu.store(out_ref.at[limb, b, r], out[limb].astype(jnp.uint32))

    return kernel


def _spmv_ell_fused(arrays, rows: int, coeffs, wt, config):
    """``_spmv_ell`` as ONE Pallas kernel (hypothesis 53, bench/NOTES.md):
    each program gathers its rows' witness elements by index straight from
    the element-major witness (one 32-byte element per term; padding slots,
    column n, are masked loads that touch no memory), applies the row formula
    in registers and stores its rows of the limb-major output.  No gathered
    terms, limb-major copies or row-chunk scan in memory.  rows ≥ ``config.bn``
    (the last block overlaps its predecessor, storing the same values)."""
    cols, neg, gen_cols, gen_coeff = arrays
    kp, kg = cols.shape[1], gen_cols.shape[1]
    n, B = wt.shape[0], wt.shape[1]
    bn = config.bn
    grid = (-(-rows // bn), B)
    kernel = _ell_fused_kernel(kp, kg, n, B, rows, bn, config)
    i32 = lambda x: x.astype(jnp.int32) if x.size else jnp.zeros((1, 1), jnp.int32)
    full = pl.no_block_spec
    with x64():
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct((Fr.L, B, rows), jnp.uint32),
            grid=grid,
            in_specs=[full] * 6,
            out_specs=full,
            compiler_params=plgpu.CompilerParams(num_warps=config.num_warps, num_stages=1),
            interpret=config.interpret,
            debug=config.debug,
            name=f"Fr_spmv_ell_fused_{kp}_{kg}",
        )(i32(cols), neg.astype(jnp.uint32) if neg.size else jnp.zeros((1,), jnp.uint32),
          i32(gen_cols), i32(gen_coeff),
          coeffs.T, wt.reshape(n * B, Fr.L))


def _ell_rows(arrays, rows: int, coeffs, wt, chunk_slots: int, config, form: str):
    """The fixed-width rows in the chosen ``form`` ("fused" where a Pallas
    kernel can run and there is at least one block of rows, else "gather")."""
    def gather(arrays, coeffs, wt):
        return _spmv_ell(arrays, rows, coeffs, wt, chunk_slots, config)

    def fused(arrays, coeffs, wt):
        return _spmv_ell_fused(arrays, rows, coeffs, wt, config)

    if form == "gather" or pl is None or rows < config.bn:
        return gather(arrays, coeffs, wt)
    if config.interpret:
        return fused(arrays, coeffs, wt)
    return by_platform(arrays, coeffs, wt, default=gather, cuda=fused)


def _half_limbs(terms):
    """Element-major Fr terms (E, B, 8) -> their sixteen 16-bit halves (E,
    B·16) uint32: the summands of the lazy sums (up to 2^16 of them stay
    below 2^32; ``_normalize`` reads the sums)."""
    return jnp.stack([terms & 0xFFFF, terms >> 16], axis=-1).reshape(terms.shape[0], -1)


def _spmv_chunks(m: BlockedCSR, coeffs, wt):
    """The chunks over the witness wt (element-major (n, B, 8)) -> (8, B,
    rows), one scan step per chunk."""
    B = wt.shape[1]
    R = m.block_rows
    rows = m.overflow_rows
    gather = functools.partial(jnp.take, wt, axis=0, mode="fill", fill_value=0)

    def step(state, ch):
        out, carry = state
        cols, seg, gcols, gseg, gcoeff, row0, last, cont = ch
        k = jnp.take(coeffs, gcoeff, axis=1, mode="clip")[:, :, None]     # (8, G, 1)
        gp = Fr.mul(jnp.transpose(gather(gcols), (2, 0, 1)), k)           # (8, G, B)
        terms = jnp.concatenate([jnp.transpose(gp, (1, 2, 0)), gather(cols)])  # (G+E, B, 8)
        s = jax.ops.segment_sum(_half_limbs(terms), jnp.concatenate([gseg, seg]), num_segments=3 * R,
                                indices_are_sorted=True)
        s = jnp.transpose(s.reshape(3, R, B, 16), (3, 0, 2, 1))            # (16, 3, B, R)
        x, t = _normalize(jnp.stack([s[:, 0] + s[:, 1], s[:, 2]], axis=1))   # (8, 2, B, R)
        vals = _reduce(x[:, 0], t[:, 0], x[:, 1], t[:, 1])                # (8, B, R)
        first = jnp.where(cont, Fr.add(vals[:, :, 0], carry), vals[:, :, 0])
        vals = vals.at[:, :, 0].set(first)
        carry = lax.dynamic_index_in_dim(vals, last, axis=2, keepdims=False)
        out = lax.dynamic_update_slice(out, vals, (0, 0, row0))
        return (out, carry), None

    out0 = jnp.zeros((8, B, rows + R), jnp.uint32)
    xs = (m.cols, m.seg, m.gen_cols, m.gen_seg, m.gen_coeff, m.row0, m.last, m.cont)
    (out, _), _ = lax.scan(step, (out0, jnp.zeros((8, B), jnp.uint32)), xs)
    return out[:, :, :rows]


def _piece_sums_kernel(n_long: int, P: int, B: int, bn: int, config):
    """The Pallas kernel of ``_piece_sums``: program (i, b) sums the runs of
    long rows [s, s + bn), s = min(i·bn, n_long − bn), of instance b; each
    lane walks its own run for as many steps as the longest run of its
    block (masked loads past its end add zero).  Refs: start, count
    (n_long,) int32 (run i: count[i] pieces from start[i], ``run_counts``), values
    (8·B·P,) the pieces' limb-major values flattened, out (8, B, n_long)."""
    ar = kernel_arith(Fr.arith, config)
    wide = Fr.L * B * P >= 1 << 31            # flat index past int32: 64-bit arithmetic

    def kernel(start_ref, count_ref, val_ref, out_ref):
        r = jnp.minimum(pl.program_id(0) * bn, n_long - bn) + lax.iota(jnp.int32, bn)
        b = pl.program_id(1)
        first = plgpu.load(start_ref.at[r])
        count = plgpu.load(count_ref.at[r])
        base = [(limb * B + b) * (jnp.int64(P) if wide else P) for limb in range(Fr.L)]

        def body(j, acc):
            ok = j < count
            p = jnp.where(ok, first + j, 0)
            p = p.astype(jnp.int64) if wide else p
            x = [plgpu.load(val_ref.at[base[limb] + p], mask=ok, other=0)
                 for limb in range(Fr.L)]
            return ar.add(acc, x)

        zero = [jnp.zeros((bn,), jnp.uint32)] * Fr.L
        acc = lax.fori_loop(0, jnp.max(count), body, zero)
        for limb in range(Fr.L):
            plgpu.store(out_ref.at[limb, b, r], acc[limb].astype(jnp.uint32))

    return kernel


def _piece_sums_lazy(start, values):
    """``_piece_sums`` by one segment sum of the sixteen 16-bit halves of
    each piece (exact: a run has at most MAX_TERMS pieces), normalised and
    reduced like a chunk's sums."""
    n_long = start.shape[0]
    P, B = values.shape[2], values.shape[1]
    owner = jnp.searchsorted(start, jnp.arange(P, dtype=start.dtype), side="right") - 1
    halves = _half_limbs(jnp.transpose(values, (2, 1, 0)))               # (P, B·16)
    s = jax.ops.segment_sum(halves, owner, num_segments=n_long, indices_are_sorted=True)
    x, top = _normalize(jnp.transpose(s.reshape(n_long, B, 16), (2, 1, 0)))   # (8, B, n_long)
    zero = jnp.zeros_like(x)
    return _reduce(x, top, zero, zero)


def run_counts(start, pieces: int, live=None):
    """The runs' lengths: start int32 (n_long,) (run i = [start[i],
    start[i+1]), the last ending at ``pieces``) -> int32 (n_long,), 0 where
    ``live`` (bool (n_long,), optional) is False: the steps ``_piece_sums``
    walks per long row."""
    start = jnp.asarray(start, jnp.int32)
    count = jnp.diff(start, append=jnp.full((1,), pieces, jnp.int32))
    return count if live is None else jnp.where(live, count, 0)


def _piece_sums_pallas(start, values, config=Fr.config, live=None):
    """``_piece_sums`` as ONE Pallas kernel (``_piece_sums_kernel``);
    n_long ≥ ``config.bn``.  The runs' lengths are taken here, those of
    rows not ``live`` as 0."""
    n_long, (_, B, P) = start.shape[0], values.shape
    bn = config.bn
    start = start.astype(jnp.int32)
    count = run_counts(start, P, live)
    with x64():
        return pl.pallas_call(
            _piece_sums_kernel(n_long, P, B, bn, config),
            out_shape=jax.ShapeDtypeStruct((Fr.L, B, n_long), jnp.uint32),
            grid=(-(-n_long // bn), B),
            in_specs=[pl.no_block_spec] * 3,
            out_specs=pl.no_block_spec,
            compiler_params=plgpu.CompilerParams(num_warps=config.num_warps, num_stages=1),
            interpret=config.interpret,
            debug=config.debug,
            name="Fr_spmv_piece_sums",
        )(start, count, values.reshape(-1))


def _piece_sums(start, values, config=Fr.config, live=None):
    """The long rows' sums of their runs of pieces: start int32 (n_long,)
    (run i = [start[i], start[i+1]), the last ending at P), values (8, B, P)
    the pieces' Fr values -> (8, B, n_long) canonical Fr: one Pallas kernel
    where one runs (hypothesis 66: no scatter, no atomics), else lazy
    half-limb sums (``_piece_sums_lazy``).  ``live`` (bool (n_long,),
    optional): the rows whose sums are wanted; the kernel does not walk
    the others' runs and their sums are unspecified.  A padded row block's
    last padding row holds all its padding pieces (``row_block``): walked,
    that one run made its block of lanes walk it too, 2.27 s of the 32GiB
    PoRep's out-of-core SpMV (bench/NOTES.md hypothesis 80)."""
    if pl is None or start.shape[0] < config.bn or values.shape[2] == 0:
        return _piece_sums_lazy(start, values)
    kernel = functools.partial(_piece_sums_pallas, live=live, config=config)
    if config.interpret:
        return kernel(start, values)
    return by_platform(start, values, default=_piece_sums_lazy, cuda=kernel)


def spmv(m: BlockedCSR, coeffs, wt, *, chunk_slots: int = ELL_CHUNK_SLOTS,
         config=Fr.config, form: str | None = None):
    """M·w for every instance: wt (num_cols, B, 8) element-major Fr witnesses
    (``element_major``), coeffs (8, n_coeffs) the Fr coefficient table ->
    (8, B, rows) canonical Fr (Montgomery).  The ELL part and the pieces in
    row chunks of about ``chunk_slots`` gathered terms, each long row's run
    of pieces summed (``_piece_sums``) and added into the row; config: the
    kernels' ``KernelConfig`` (tests: the Pallas kernels in interpret mode).
    Long rows at or past ``m.rows`` (a padded row block's) are dropped.
    form (``FORMS``; default ``DEFAULT_FORM``): how fixed-width rows are
    evaluated where a Pallas kernel runs, "gather" (XLA gathers of each row
    chunk's terms, then the row kernel) or "fused" (one kernel that gathers
    by index, ``_spmv_ell_fused``)."""
    if form is None:        # interpret mode: the test vehicle, "fused" there only when named
        form = "gather" if config.interpret else DEFAULT_FORM
    if form not in FORMS:
        raise ValueError(f"spmv: form must be one of {FORMS}, got {form!r}")
    if wt.ndim != 3 or wt.shape[0] != m.num_cols or wt.shape[2:] != (8,):
        raise ValueError(f"spmv: expected element-major Fr (num_cols={m.num_cols}, B, 8), "
                         f"got {wt.shape}")
    if coeffs.ndim != 2 or coeffs.shape[0] != Fr.L:
        raise ValueError(f"spmv: expected the coefficient table as Fr (8, n_coeffs), "
                         f"got {coeffs.shape}")
    B = wt.shape[1]
    if coeffs.shape[1] == 0:                 # no general entries can refer to an empty table
        coeffs = jnp.zeros((8, 1), jnp.uint32)
    if m.ell_width == (0, 0):
        return (_spmv_chunks(m, coeffs, wt) if m.chunks
                else jnp.zeros((8, B, m.rows), jnp.uint32))
    if m.rows == 0:
        return jnp.zeros((8, B, 0), jnp.uint32)
    ell = (m.ell_cols, m.ell_neg, m.ell_gen_cols, m.ell_gen_coeff)
    out = _ell_rows(ell, m.rows, coeffs, wt, chunk_slots, config, form)
    if m.pieces:
        pieces = (m.piece_cols, m.piece_neg, m.piece_gen_cols, m.piece_gen_coeff)
        rest = _ell_rows(pieces, m.pieces, coeffs, wt, chunk_slots, config, form)  # (8, B, pieces)
        rest = _piece_sums(m.piece_start, rest, config,                     # (8, B, long)
                           live=m.long_rows < m.rows)      # a padded block's: dropped
        at = out.at[:, :, m.long_rows]
        out = at.set(Fr.add(at.get(indices_are_sorted=True, unique_indices=True), rest),
                     indices_are_sorted=True, unique_indices=True, mode="drop")
    return out


# ---------------------------------------------------------------- row blocks (out of core)
class BlockShape(NamedTuple):
    """Sizes of a row block along the leading axes of its arrays: rows (the
    ELL arrays and the output), long (long_rows), pieces (the piece arrays)
    and chunks (the overflow chunk arrays)."""
    rows: int
    long: int
    pieces: int
    chunks: int


def whole_shape(m: BlockedCSR) -> BlockShape:
    """The sizes of all of m (long = 0 without an ELL part)."""
    return BlockShape(m.rows, m.long_rows.shape[0], m.pieces, m.chunks)


class RowBlocks:
    """What a row block of a ``BlockedCSR`` holds (host numpy, computed once
    per matrix).  Any row is a valid cut.

    The overflow rows are the matrix rows (ELL widths (0, 0)) or the long
    rows; in the ELL layout a matrix row r maps to the overflow row i(r) =
    #{long rows < r}, and ``piece0[i]`` is the first piece of long row i
    (``piece_start`` and, last, the piece count: pieces follow their long
    rows in order).  Without an ELL part chunk q spans rows [row0[q],
    ``end``[q]] (end = row0 + last); a block of rows [i0, i1) takes every
    chunk that meets them (``row_block`` masks the entries of other rows),
    so a chunk straddling a cut goes to both blocks."""

    def __init__(self, m: BlockedCSR):
        self.m = m
        self.ell = m.ell_width != (0, 0)
        self.long_rows = np.asarray(m.long_rows, np.int64)
        self.row0 = np.asarray(m.row0, np.int64)
        self.end = self.row0 + np.asarray(m.last, np.int64)
        self.piece0 = (np.append(np.asarray(m.piece_start, np.int64), m.pieces) if self.ell
                       else None)

    def overflow(self, r: int) -> int:
        """i(r): the overflow rows before matrix row r."""
        return int(np.searchsorted(self.long_rows, r)) if self.ell else r

    def _chunk_range(self, i0: int, i1: int) -> tuple[int, int]:
        """The chunks meeting overflow rows [i0, i1): [q0, q1)."""
        if not self.m.chunks or i0 >= i1:
            return (0, 0)
        return (int(np.searchsorted(self.end, i0)), int(np.searchsorted(self.row0, i1)))

    def ranges(self, r0: int, r1: int) -> dict:
        """Per leading axis of the arrays, the slice block [r0, r1) takes:
        "rows" (ELL arrays), "long" (long_rows), "pieces", "chunks"."""
        i0, i1 = self.overflow(r0), self.overflow(r1)
        p = self.piece0[[i0, i1]] if self.ell else (0, 0)
        return {"rows": (r0, r1), "long": (i0, i1) if self.ell else (0, 0),
                "pieces": (int(p[0]), int(p[1])), "chunks": self._chunk_range(i0, i1)}

    def counts(self, r0: int, r1: int) -> BlockShape:
        """The sizes of block [r0, r1) (the lengths of its ``ranges``), each
        non-decreasing in r1 and non-increasing in r0."""
        rg = self.ranges(r0, r1)
        return BlockShape(*(rg[a][1] - rg[a][0] for a in BlockShape._fields))

    def smallest(self) -> BlockShape:
        """Per axis, the largest size among the one-row blocks (every block
        is a run of them, so caps on the sizes of blocks, ``pce.plan_blocks``,
        cover the matrix iff they are at least this): one row, at most one
        long row, the most pieces of a long row, the most chunks meeting one
        overflow row (attained at some row0[q], where the count rises)."""
        m = self.m
        pieces = int(np.max(np.diff(self.piece0), initial=0)) if self.ell else 0
        long = int(bool(self.long_rows.shape[0])) if self.ell else 0
        chunks = 0
        if m.chunks:
            at = np.unique(self.row0)
            chunks = int(np.max(np.searchsorted(self.row0, at, "right")
                                - np.searchsorted(self.end, at)))
        return BlockShape(min(1, m.rows), long, pieces, chunks)


_AXIS = {f: "chunks" for f in ("cols", "seg", "gen_cols", "gen_seg", "gen_coeff", "row0",
                               "last", "cont")}
_AXIS.update({f: "rows" for f in ("ell_cols", "ell_neg", "ell_gen_cols", "ell_gen_coeff")})
_AXIS.update({f: "pieces" for f in ("piece_cols", "piece_neg", "piece_gen_cols",
                                    "piece_gen_coeff")})
_AXIS["long_rows"] = _AXIS["piece_start"] = "long"


def block_signature(m: BlockedCSR) -> tuple:
    """What the program of m's padded row blocks depends on besides their
    ``BlockShape``: num_cols, block_rows and, per array, whether it is
    empty (an absent part, or a sign array of width 0), its trailing shape
    and dtype.  Blocks of one shape of matrices with equal signatures run
    one compiled program."""
    return (m.num_cols, m.block_rows) + tuple(
        (x.shape[0] == 0, tuple(x.shape[1:]), str(x.dtype))
        for x in (getattr(m, f) for f in DATA_FIELDS))


def block_nbytes(m: BlockedCSR, shape: BlockShape) -> int:
    """Bytes of the arrays of a row block of m padded to ``shape``
    (``row_block``): per array, its size along its axis times its row's
    bytes (arrays empty in m stay empty)."""
    return sum(getattr(shape, _AXIS[f]) * x.dtype.itemsize * math.prod(x.shape[1:])
               for f in DATA_FIELDS if (x := getattr(m, f)).shape[0])


def _padding(m: BlockedCSR, shape: BlockShape) -> dict:
    """Per array, the value of its padding entries in a row block of
    ``shape``, each adding nothing: ELL rows and pieces with every column
    num_cols (gathered as zero) and no signs; chunks with every column
    num_cols, segments 3R (±1, dropped) and R − 1 (general, + 0), writing
    their R zero rows at row0 = the block's rows, into the slack past its
    output.  Long rows and their runs are padded apart (``row_block``)."""
    R, n = m.block_rows, m.num_cols
    return {"cols": n, "seg": 3 * R, "gen_cols": n, "gen_seg": R - 1, "gen_coeff": 0,
            "row0": shape.rows, "last": 0, "cont": False,
            "ell_cols": n, "ell_neg": 0, "ell_gen_cols": n, "ell_gen_coeff": 0,
            "piece_cols": n, "piece_neg": 0, "piece_gen_cols": n, "piece_gen_coeff": 0}


def _pad(x: np.ndarray, size: int, fill) -> np.ndarray:
    """x (k, ...) extended along axis 0 to (size, ...) with ``fill``."""
    return np.concatenate([x, np.full((size - x.shape[0],) + x.shape[1:], fill, x.dtype)])


def _mask_chunks(out: dict, m: BlockedCSR, i0: int, i1: int) -> None:
    """In place, the sliced chunk arrays of a block of rows [i0, i1)
    (``row_block``, no ELL part): entries of rows outside the block gather
    column num_cols (zero), those before i0 (only in the first chunk, which
    may start there) moved to local row 0; the first chunk starts at row i0
    afresh (its local rows shifted down by d = i0 − row0, ``last`` too);
    row0 rebased to i0.  Segment ids stay sorted: the moved entries come
    first in their kind."""
    R, orig = m.block_rows, m.num_cols
    row0 = out["row0"].astype(np.int64)
    d = np.maximum(i0 - row0, 0)[:, None]
    for cf, sf, pad in (("cols", "seg", 3 * R), ("gen_cols", "gen_seg", None)):
        cols, seg = out[cf].astype(np.int64), out[sf].astype(np.int64)
        real = (cols < orig) & ((seg < pad) if pad else True)
        kind, local = (seg // R, seg % R) if pad else (0, seg)
        row = row0[:, None] + local
        keep = real & (row >= i0) & (row < i1)
        out[sf] = np.where(real, kind * R + np.where(row < i0, 0, local - d), seg)
        out[cf] = np.where(keep, cols, orig)
    out["last"] = out["last"] - d[:, 0]
    out["row0"] = np.maximum(row0, i0) - i0
    out["cont"] = out["cont"] & (row0 >= i0)


def row_block(rb: RowBlocks, r0: int, r1: int, shape: BlockShape | None = None) -> BlockedCSR:
    """Rows [r0, r1) of rb.m as a BlockedCSR over the same columns (any
    0 ≤ r0 ≤ r1 ≤ rows), host numpy: the ELL rows, the block's long rows
    (− r0), their pieces and runs (starts − the first), or without an ELL
    part the chunks meeting its rows with the entries of other rows masked
    (``_mask_chunks``), each array padded along its axis to ``shape``
    (default: the block's own sizes, ``RowBlocks.counts``) with entries
    that add nothing (``_padding``; the padding long rows shape.rows + j, j
    their position, are out of range, so ``spmv`` drops them, and their
    runs are empty but the last, which holds the padding pieces, so padding
    pieces need a padding long row: ValueError without one; ``spmv`` does
    not walk the padding rows' runs).  The
    block has shape.rows rows: ``spmv`` of it is rows [r0, r1) of ``spmv``
    of the whole, then zeros.  Padding every block to one shape gives all
    blocks one compiled program.  nnz is not
    recounted (−1)."""
    m, rg, own = rb.m, rb.ranges(r0, r1), rb.counts(r0, r1)
    shape = own if shape is None else shape
    if any(s < c for s, c in zip(shape, own)):
        raise ValueError(f"row_block: rows [{r0}, {r1}) have sizes {own}, over {shape}")
    if m.pieces and shape.pieces > own.pieces and shape.long == own.long:
        raise ValueError(f"row_block: rows [{r0}, {r1}) padded to {shape.pieces} pieces need a "
                         f"padding long row to hold them (shape.long > {own.long})")
    out = {f: np.asarray(getattr(m, f)[slice(*rg[_AXIS[f]])]) for f in DATA_FIELDS}
    out["long_rows"] = out["long_rows"] - r0
    out["piece_start"] = out["piece_start"] - rg["pieces"][0]
    if m.chunks:
        _mask_chunks(out, m, rb.overflow(r0), rb.overflow(r1))
    fill = _padding(m, shape)
    for f in DATA_FIELDS:
        x = getattr(m, f)
        out[f] = out[f].astype(x.dtype)
        if x.shape[0]:                                     # (0,) arrays stay empty
            out[f] = _pad(out[f], getattr(shape, _AXIS[f]), fill.get(f, 0))
    out["long_rows"][own.long:] = shape.rows + np.arange(own.long, len(out["long_rows"]))
    out["piece_start"][own.long:] = own.pieces
    return BlockedCSR(**out, rows=shape.rows, num_cols=m.num_cols, nnz=-1,
                      block_rows=m.block_rows)


def working_bytes(m: BlockedCSR, batch: int, shape: BlockShape | None = None,
                  chunk_slots: int = ELL_CHUNK_SLOTS) -> int:
    """Estimated device bytes of ``spmv`` of m (or of its row blocks padded
    to ``shape``) beyond the matrix, the table and the witness, for
    ``batch`` instances (module docstring, "Memory"): the output and its
    update 64·B·rows, per ELL row chunk 32·B·C·(2K + 1) + 32·C·Kg, the
    pieces' values 32·B·P with their own row chunks and the long rows'
    sums 96·B·(long rows) (the lazy form's halves and sums: 64·B·P more),
    per overflow chunk 96·B·(E + G) + 384·B·R and the chunk output
    32·B·(rows + R)."""
    def ell(rows, kp, kg):
        if not rows or not kp + kg:
            return 0
        C = ell_row_chunks(rows, (kp + kg) * batch, chunk_slots)[0]
        return 32 * batch * C * (2 * (kp + kg) + 1) + 32 * C * kg

    s = whole_shape(m) if shape is None else shape
    total = 64 * batch * s.rows + ell(s.rows, *m.ell_width)
    total += 128 * batch * s.pieces + ell(s.pieces, *m.piece_width) + 96 * batch * s.long
    if s.chunks:
        total += 96 * batch * (m.slots + m.gen_slots) + 384 * batch * m.block_rows \
            + 32 * batch * (s.rows + m.block_rows)
    return total
