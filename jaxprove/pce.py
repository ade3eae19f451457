"""Pre-compiled constraint evaluation (cuzk's Phase 5 "PCE"), on the device.

A circuit's constraint system is recorded once per topology (``circuits.cs``
-> ``R1CS``), compiled here into device-resident ``Matrices`` (A, B, C in the
chunked CSR layout of ``ops.spmv``, the coefficient table, bellperson's
density bitmaps and the bit-variable mask), stored with orbax, and reused for
every proof: per proof, ``evaluate`` computes

    a = A·w,  b = B·w,  c = C·w   (Fr, one value per row, for every instance)

for a batch of witnesses w (8, *batch, num_inputs + num_aux) in bellperson's
variable order (ONE, public inputs, aux).  Rows = num_constraints +
num_inputs: after the gadget rows come bellperson's input rows
(A = 1·input_i, B = C = 0).

The R1CS is taken as recorded (``circuits.cs`` canonicalises each row the way
bellperson's linear combinations do), and the density bitmaps mark the
variables that have an entry in the matrix:

* ``a_aux_density`` (num_aux,): aux variable j appears in A (A's input
  density is full in bellperson's prover);
* ``b_input_density`` (num_inputs,), ``b_aux_density`` (num_aux,): the
  variable appears in B.

Out of core (the "16 GB mode"): ``to_host`` keeps the Matrices in host
memory and ``evaluate_host`` computes the same a, b, c into host numpy
arrays (8, *batch, length), one row block of one matrix on the device at a
time (``ops.spmv.row_block``; blocks planned by ``plan_blocks`` within a
byte budget, an estimate by ``block_bytes``, and padded to one shape per
matrix so that one compiled program serves all of its blocks; ``host_plan``
prepares them once for every proof, in pinned memory on a GPU), checking
a∘b = c in row blocks (``first_bad_host``).  At 2^27 rows the matrices
(~8 GiB) and a, b, c (3 × 4 GiB) never sit on the device: it holds w, its
element-major copy (4 GiB each at batch 1) and one block (estimate).

Persistence: one directory per cache key under a cache folder, holding the
arrays (orbax-checkpoint) and ``meta.json`` (format, ``VERSION``, key, static
counts, and each array's shape, dtype and content checksum).  Written under a
temporary name and renamed into place, so a reader sees a complete entry or
none; ``load`` checks version, key, shapes and checksums and returns None on
any mismatch, so ``get_or_extract`` re-extracts instead of using it.  The
recorded ``R1CS`` itself (host arrays; what ``groth16.setup`` reads) is stored
the same way by ``save_r1cs`` / ``load_r1cs`` / ``get_or_record``, so a
circuit too large to record and set up in one sitting (a 32GiB PoRep
partition: 155 s of recording, 11.8 GB of CSR) is recorded once.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import math
import os
import re
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.profiler import TraceAnnotation as span   # named host spans in a profile

from circuits import cs
from jaxprove import memory, store
from ops import aot, spmv, transfer
from ops.field import Fr

VERSION = 5                 # bump whenever the stored layout or its meaning changes
FORMAT = "jaxprove-pce"
_MATRIX_FIELDS = spmv.DATA_FIELDS

log = logging.getLogger(__name__)


@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=["a", "b", "c", "coeffs", "a_aux_density", "b_input_density",
                                "b_aux_density", "bit_vars"],
                   meta_fields=["name", "num_inputs", "num_aux", "num_constraints"])
@dataclasses.dataclass(frozen=True)
class Matrices:
    """A circuit's pre-compiled constraint system (device arrays).

    a, b, c: ``ops.spmv.BlockedCSR`` (rows × num_vars); coeffs: Fr (8,
    n_coeffs), the deduplicated coefficient table; a_aux_density,
    b_aux_density: bool (num_aux,); b_input_density: bool (num_inputs,);
    bit_vars: bool (num_vars,), variables proven boolean."""
    a: spmv.BlockedCSR
    b: spmv.BlockedCSR
    c: spmv.BlockedCSR
    coeffs: jnp.ndarray
    a_aux_density: jnp.ndarray
    b_input_density: jnp.ndarray
    b_aux_density: jnp.ndarray
    bit_vars: jnp.ndarray
    name: str
    num_inputs: int
    num_aux: int
    num_constraints: int

    @property
    def num_vars(self) -> int:
        return self.num_inputs + self.num_aux

    @property
    def rows(self) -> int:
        return self.num_constraints + self.num_inputs

    @property
    def nnz(self) -> tuple[int, int, int]:
        return self.a.nnz, self.b.nnz, self.c.nnz

    @property
    def shapes(self) -> tuple[int, ...]:
        """The topology's sizes: inputs, aux, constraints, nnz of A, B, C, coefficients."""
        return (self.num_inputs, self.num_aux, self.num_constraints) + self.nnz \
            + (self.coeffs.shape[1],)

    @property
    def key(self) -> str:
        return cache_key(self.name, self.shapes)

    @property
    def nbytes(self) -> int:
        """Device bytes held by the arrays (for memory budgets)."""
        return sum(int(x.nbytes) for x in jax.tree.leaves(self))


def cache_key(name: str, shapes=()) -> str:
    """Cache key of a topology: a readable slug of the circuit name (with its
    parameters), the code version, and a hash of name, version and the
    sizes ``shapes`` (any tuple of ints, e.g. ``Matrices.shapes``)."""
    digest = hashlib.sha256(repr((name, VERSION, tuple(int(s) for s in shapes))).encode())
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.")[:64] or "circuit"
    return f"{slug}-pce{VERSION}-{digest.hexdigest()[:16]}"


# ---------------------------------------------------------------- extraction
def _check_csr(name: str, m, rows: int, n_vars: int, n_coeffs: int):
    indptr = np.asarray(m.indptr, np.int64)
    cols = np.asarray(m.cols, np.int64)
    ids = np.asarray(m.coeff_ids, np.int64)
    if indptr.shape != (rows + 1,) or indptr[0] != 0 or np.any(np.diff(indptr) < 0):
        raise ValueError(f"extract: {name}.indptr must be non-decreasing of length rows + 1 = "
                         f"{rows + 1} starting at 0, got shape {indptr.shape}")
    nnz = int(indptr[-1])
    if cols.shape != (nnz,) or ids.shape != (nnz,):
        raise ValueError(f"extract: {name} has {nnz} entries by indptr but cols {cols.shape} "
                         f"and coeff_ids {ids.shape}")
    if nnz and (cols.min() < 0 or cols.max() >= n_vars):
        raise ValueError(f"extract: {name}.cols outside [0, {n_vars})")
    if nnz and (ids.min() < 0 or ids.max() >= n_coeffs):
        raise ValueError(f"extract: {name}.coeff_ids outside [0, {n_coeffs})")
    return indptr, cols, ids


def _check_input_rows(r1cs, csrs, one_ids):
    """bellperson's input rows: row num_constraints + i is A = 1·input_i, B = C = 0."""
    m, k = r1cs.num_constraints, r1cs.num_inputs
    (ai, ac, aid), (bi, _, _), (ci, _, _) = csrs
    ok = (np.all(np.diff(ai[m:]) == 1) and np.all(np.diff(bi[m:]) == 0)
          and np.all(np.diff(ci[m:]) == 0))
    if ok:
        sl = slice(ai[m], ai[m + k])
        ok = np.array_equal(ac[sl], np.arange(k)) and np.all(np.isin(aid[sl], one_ids))
    if not ok:
        raise ValueError("extract: the last num_inputs rows must be bellperson's input rows "
                         "(A = 1·input_i, B and C empty)")


def extract(r1cs, **block_args) -> Matrices:
    """Compile an ``R1CS`` (circuits.cs interface) into device ``Matrices``.

    Validates the R1CS (shapes, index ranges, canonical distinct
    coefficients, the input rows) and raises ValueError naming what is wrong.
    ``block_args`` go to ``ops.spmv.block`` (chunk sizes; defaults suit large
    circuits)."""
    k, aux, m = int(r1cs.num_inputs), int(r1cs.num_aux), int(r1cs.num_constraints)
    if k < 1 or aux < 0 or m < 0:
        raise ValueError(f"extract: need num_inputs >= 1 (ONE included), num_aux >= 0, "
                         f"num_constraints >= 0; got {k}, {aux}, {m}")
    coeffs = list(r1cs.coeffs)
    for i, x in enumerate(coeffs):
        if not isinstance(x, (int, np.integer)) or isinstance(x, bool) or not 0 <= x < Fr.p:
            raise ValueError(f"extract: coefficient {i} ({x!r}) is not a canonical Fr integer")
    if len(set(int(x) for x in coeffs)) != len(coeffs):
        raise ValueError("extract: the coefficient table has duplicates")
    n_vars, rows = k + aux, m + k
    bits = np.asarray(r1cs.bit_vars)
    if bits.shape != (n_vars,) or bits.dtype != np.bool_:
        raise ValueError(f"extract: bit_vars must be bool of shape ({n_vars},), "
                         f"got {bits.dtype} {bits.shape}")
    one_ids = [i for i, x in enumerate(coeffs) if x == 1]
    csrs = [_check_csr(nm, mat, rows, n_vars, len(coeffs))
            for nm, mat in (("a", r1cs.a), ("b", r1cs.b), ("c", r1cs.c))]
    _check_input_rows(r1cs, csrs, one_ids)

    def used(cols, lo, hi):
        mask = np.zeros(hi - lo, bool)
        sel = cols[(cols >= lo) & (cols < hi)]
        mask[sel - lo] = True
        return mask

    classes = spmv.coefficient_classes(coeffs)
    blocked = [jax.tree.map(jnp.asarray, spmv.block(*csr, classes, n_vars, **block_args))
               for csr in csrs]
    table = Fr.from_int(coeffs) if coeffs else np.zeros((Fr.L, 0), np.uint32)
    return Matrices(*blocked, jnp.asarray(table),
                    jnp.asarray(used(csrs[0][1], k, n_vars)), jnp.asarray(used(csrs[1][1], 0, k)),
                    jnp.asarray(used(csrs[1][1], k, n_vars)), jnp.asarray(bits),
                    str(r1cs.name), k, aux, m)


# ---------------------------------------------------------------- evaluation
def _check_witness(m: Matrices, w):
    if w.dtype != jnp.uint32 or w.ndim < 2 or w.shape[0] != Fr.L or w.shape[-1] != m.num_vars:
        raise ValueError(f"pce: witness must be Fr limbs uint32 (8, *batch, {m.num_vars}) for "
                         f"circuit {m.name!r}, got {w.dtype} {w.shape}")


@aot.program(static_argnums=(2,))
def evaluate(m: Matrices, w, form: str | None = None):
    """(a, b, c) = (A·w, B·w, C·w) for a witness batch w (8, *batch,
    num_vars) of canonical Montgomery Fr limbs -> three Fr arrays (8, *batch,
    rows).  Coefficients ±1 cost no multiplication; terms are summed lazily
    (``ops.spmv``; ``form``: one of ``ops.spmv.FORMS``, how its fixed-width
    rows and chunk sums are evaluated, default ``ops.spmv.DEFAULT_FORM``).  Peak device memory beyond m and w, with B = prod(batch):
    32·B·(num_vars + 4·rows) bytes (the element-major witness copy, a, b and
    the padded and final c) plus one chunk's working set (``ops.spmv``)."""
    _check_witness(m, w)
    batch = w.shape[1:-1]
    B = math.prod(batch)
    wt = spmv.element_major(w.reshape(Fr.L, B, m.num_vars))
    return tuple(spmv.spmv(x, m.coeffs, wt, form=form).reshape((Fr.L,) + batch + (m.rows,))
                 for x in (m.a, m.b, m.c))


def evaluate_bytes(m: Matrices, batch: int = 1) -> int:
    """Estimated device bytes of ``evaluate`` beyond m and w: the
    element-major witness copy, two finished outputs, and the largest
    matrix's ``ops.spmv.working_bytes`` (its output included).  An upper
    bound: XLA reuses buffers (the 32GiB WindowPoSt partition, whose A is
    1.4 pieces per row, estimates 8.5 vectors of the domain for A where
    XLA's temporaries for all of ``evaluate`` were 17.3 GiB, ~4.6)."""
    vec = 32 * batch * m.rows
    return 32 * batch * m.num_vars + 2 * vec + max(
        spmv.working_bytes(x, batch) for x in (m.a, m.b, m.c))


def evaluate_xla_bytes(m: Matrices, batch: int = 1) -> int | None:
    """XLA's own count of ``evaluate``'s device bytes beyond m and w for a
    batch of ``batch`` witnesses: its temporaries plus its three outputs,
    read from the program compiled for m's shapes (abstract arguments: no
    data moves).  ``evaluate_bytes`` is a model; this is what the compiler
    plans, per backend (the 32GiB WindowPoSt partition on the H200: 17.3 GiB
    of temporaries where the model says ~34 GiB; the 2KiB PoRep circuit on
    XLA:CPU: 2.19 GB where it says 1.59 GB).  Costs one compilation
    (seconds); None where the backend reports no memory analysis."""
    def spec(x):
        return jax.ShapeDtypeStruct(x.shape, x.dtype)

    w = jax.ShapeDtypeStruct((Fr.L, batch, m.num_vars), jnp.uint32)
    try:
        got = evaluate.lower(jax.tree.map(spec, m), w).compile().memory_analysis()
    except (NotImplementedError, AttributeError):
        return None
    if got is None:
        return None
    return int(got.temp_size_in_bytes + got.output_size_in_bytes)


def rows_satisfied(a, b, c):
    """Per instance of a, b, c ``(8, *batch, rows)``: (ok, first_bad) where ok
    = (a∘b == c on every row) as bool (*batch,), and first_bad is the first
    row with a·b != c (int32 (*batch,), −1 where satisfied)."""
    good = Fr.eq(Fr.mul(a, b), c)                        # (*batch, rows)
    ok = jnp.all(good, axis=-1)
    first = jnp.argmin(good, axis=-1).astype(jnp.int32)
    return ok, jnp.where(ok, jnp.int32(-1), first)


satisfied = aot.program(rows_satisfied)                 # on a, b, c already evaluated


@aot.program
def is_satisfied(m: Matrices, w):
    """``rows_satisfied`` of the circuit's a, b, c = A·w, B·w, C·w."""
    return rows_satisfied(*evaluate(m, w))


# ---------------------------------------------------------------- out of core
def to_host(m: Matrices) -> Matrices:
    """m with every array in host memory (numpy): what ``evaluate_host``
    streams to the device a row block at a time."""
    return jax.device_get(m)


class Plan(NamedTuple):
    """One matrix's row blocks [r0, r1) (consecutive, from 0 to rows) and
    the ``ops.spmv.BlockShape`` every block is padded to: one program."""
    blocks: list[tuple[int, int]]
    shape: spmv.BlockShape


def block_bytes(m: Matrices, x: spmv.BlockedCSR, batch: int, shape: spmv.BlockShape) -> int:
    """Estimated device bytes of evaluating a row block of the matrix x
    padded to ``shape`` (``evaluate_host``): the element-major witness
    32·B·num_vars and the table, ``ops.transfer.STEPS_HELD`` blocks' arrays
    (``ops.spmv.block_nbytes``; ``evaluate_host`` is pipelined: the running
    block's, the next one's and the one put ahead of both), the SpMV's
    output and working set (``ops.spmv.working_bytes``), and the previous
    block's output on its way back (32·B·rows)."""
    return (32 * batch * m.num_vars + int(m.coeffs.nbytes)
            + transfer.STEPS_HELD * spmv.block_nbytes(x, shape)
            + spmv.working_bytes(x, batch, shape) + 32 * batch * shape.rows)


def _caps(low: spmv.BlockShape, whole: spmv.BlockShape, t: int, rows: int) -> spmv.BlockShape:
    """Per axis max(low, ⌈t·whole/rows⌉): the sizes of a t-row share of
    a matrix, at least those of its largest one-row block (0 ≤ t ≤ rows)."""
    return spmv.BlockShape(*(max(lo, -(-t * w // rows)) for lo, w in zip(low, whole)))


def _greedy(rb: spmv.RowBlocks, caps: spmv.BlockShape) -> list[tuple[int, int]]:
    """From r0 = 0, each block the longest [r0, r1) whose sizes
    (``RowBlocks.counts``, monotone in r1) are all within ``caps``; caps ≥
    ``RowBlocks.smallest`` always reach at least the next row."""
    blocks, r0, rows = [], 0, rb.m.rows
    while r0 < rows:
        lo, hi = r0 + 1, rows
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if all(c <= k for c, k in zip(rb.counts(r0, mid), caps)):
                lo = mid
            else:
                hi = mid - 1
        blocks.append((r0, lo))
        r0 = lo
    return blocks


def _plan(m: Matrices, rbs: list, batch: int, budget: int) -> list[Plan] | None:
    """Plans of matrices of one ``ops.spmv.block_signature`` (rows ≥ 1)
    sharing one shape, or None when the per-axis largest of their one-row
    blocks (``RowBlocks.smallest``) does not fit ``budget``.  Caps: per axis the
    largest ``_caps`` of the matrices for the largest t whose padded block
    fits the budget (the bytes grow with t); the ``_greedy`` blocks of
    each matrix within them; shape: the per-axis largest sizes of all
    those blocks (within the caps, so within the budget), and one more
    long row where a block has as many long rows but fewer pieces (its
    padding pieces need a padding long row, ``ops.spmv.row_block``; the
    budget counts it)."""
    x = rbs[0].m
    lows = [rb.smallest() for rb in rbs]
    wholes = [spmv.whole_shape(rb.m) for rb in rbs]

    def caps(t):
        return spmv.BlockShape(*map(max, zip(*(_caps(lo, w, t, x.rows)
                                                for lo, w in zip(lows, wholes)))))

    def fits(t):                    # a padding long row counted (below)
        c = caps(t)
        return block_bytes(m, x, batch, c._replace(long=c.long + 1)) <= budget

    if not fits(0):
        return None
    lo, hi = 0, x.rows
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    blocks = [_greedy(rb, caps(lo)) for rb in rbs]
    sizes = np.array([rb.counts(r0, r1) for rb, bl in zip(rbs, blocks) for r0, r1 in bl])
    shape = spmv.BlockShape(*(int(v) for v in sizes.max(axis=0)))
    if ((sizes[:, 1] == shape.long) & (sizes[:, 2] < shape.pieces)).any():
        shape = shape._replace(long=shape.long + 1)   # every block's padding pieces: a padding row's
    return [Plan(bl, shape) for bl in blocks]


def _plans(m: Matrices, rbs: list, batch: int, budgets) -> list[Plan]:
    """``plan_blocks`` over the RowBlocks of A, B, C, matrix k within
    ``budgets[k]``: matrices of one ``ops.spmv.block_signature`` and one
    budget planned together (one shape, one program), or each alone where
    their one-row blocks together do not fit."""
    sigs = [(spmv.block_signature(rb.m), b) for rb, b in zip(rbs, budgets)]
    plans = {}
    for sig in dict.fromkeys(sigs):
        same = [i for i, s in enumerate(sigs) if s == sig]
        joint = _plan(m, [rbs[i] for i in same], batch, sig[1])
        for k, i in enumerate(same):
            plans[i] = joint[k] if joint else _plan_alone(m, rbs[i], "abc"[i], batch, sig[1])
    return [plans[i] for i in range(len(rbs))]


def _plan_alone(m: Matrices, rb: spmv.RowBlocks, name: str, batch: int, budget: int) -> Plan:
    """``_plan`` of matrix ``name`` alone; ValueError naming its largest
    one-row block's sizes and bytes when even that does not fit ``budget``."""
    plan = _plan(m, [rb], batch, budget)
    if plan is None:
        low = rb.smallest()
        raise ValueError(f"evaluate_host: the smallest row block of matrix {name} of circuit "
                         f"{m.name!r} (sizes {tuple(low)}) needs about "
                         f"{block_bytes(m, rb.m, batch, low)} device bytes, over the budget "
                         f"of {budget}")
    return plan[0]


def plan_blocks(m: Matrices, batch: int, budget: int) -> list[Plan]:
    """The ``Plan`` of A, B and C that ``evaluate_host`` follows for
    ``batch`` instances: row blocks (``ops.spmv.RowBlocks``; each matrix
    has its own cuts), all padded to one shape per matrix (one compiled program;
    one for all of A, B, C where their ``ops.spmv.block_signature``
    agrees and the budget allows) whose ``block_bytes`` fit ``budget``.  A
    block may hold about a t-row share of each of the matrix's rows, long
    rows, pieces and chunks (or its largest one-row block's, if more), t
    as large as the budget allows (``_plan``).  ValueError when a matrix's
    largest one-row block does not fit."""
    return list(host_plan(m, batch, budget, prepared=False).plans)


class HostPlan(NamedTuple):
    """``evaluate_host``'s row blocks for one circuit, batch size and budget,
    prepared once (``host_plan``) and reused by every proof: per matrix its
    ``Plan`` and its blocks (``ops.spmv.row_block``, padded to the plan's
    shape), held in pinned host memory where the device has it
    (``ops.transfer.to_pinned``: each proof's puts run at the link's rate),
    or cut from the matrices as each block is needed (``prepared`` False:
    nothing held beyond one block).  A prepared plan holds a second copy of
    the matrices' arrays in host memory (pinned, on a GPU).  ``budget``
    and ``on_device`` are ``evaluate_host``'s; each matrix's blocks are
    planned within what its evaluation leaves of the budget
    (``spmv_budgets``: ``budgets``)."""
    plans: tuple
    row_blocks: tuple                 # ops.spmv.RowBlocks of A, B, C
    blocks: tuple | None              # per matrix, per block: a BlockedCSR, or None
    batch: int
    budget: int
    rows: int
    on_device: tuple = ()
    length: int | None = None         # the device results' length (None: none there)

    @property
    def budgets(self) -> tuple:
        """Per matrix the device bytes its row blocks are planned within."""
        return spmv_budgets(self.batch, self.budget, self.length or self.rows, self.on_device)

    def block(self, k: int, j: int) -> spmv.BlockedCSR:
        """Block j of matrix k (0, 1, 2 = A, B, C), host arrays."""
        if self.blocks is not None:
            return self.blocks[k][j]
        r0, r1 = self.plans[k].blocks[j]
        return spmv.row_block(self.row_blocks[k], r0, r1, self.plans[k].shape)


def host_plan(m: Matrices, batch: int, budget: int, dev=None, *,
              on_device: tuple = (), length: int | None = None,
              prepared: bool | None = True, pinned: bool | None = None,
              working: int = 0) -> HostPlan:
    """The ``HostPlan`` of m (host arrays, ``to_host``) for ``batch``
    instances of ``evaluate_host`` within ``budget`` device bytes, with its
    ``on_device`` and ``length`` (``plan_blocks`` per matrix within
    ``spmv_budgets``; ValueError when a matrix's smallest block does not
    fit).  ``prepared``: every
    block cut and padded now, and placed in ``dev``'s pinned host memory
    (``pinned`` as ``ops.transfer.to_pinned``: None on a GPU only) as far
    as the pool has room (``_pin_blocks``); None:
    prepared where the host has room for that copy (about m's bytes) beside
    ``working`` bytes (what each proof allocates there: a, b, c, h) and
    ``memory.HOST_RESERVE``, else cut per call (logged: each proof's SpMV
    is slower, ~3× at 2^23, bench/NOTES.md hypothesis 40)."""
    on_device = tuple(sorted(set(on_device)))
    length = (m.rows if length is None else length) if on_device else None   # planes' only
    rbs = tuple(spmv.RowBlocks(x) for x in (m.a, m.b, m.c))
    plans = tuple(_plans(m, list(rbs), batch,
                         spmv_budgets(batch, budget, length or m.rows, on_device)))
    plan = HostPlan(plans, rbs, None, batch, budget, m.rows, on_device, length)
    if prepared is None:
        have = memory.host_available()
        prepared = memory.host_fits(m.nbytes + working, available=have)
        if not prepared:
            log.warning("host_plan: %s's row blocks cut per proof, not prepared: the host "
                        "has about %s bytes available, the prepared copy needs %d beside %d "
                        "working and %d reserved", m.name, have,
                        m.nbytes, working, memory.HOST_RESERVE)
    if not prepared:
        return plan
    dev = dev or jax.devices()[0]
    return plan._replace(blocks=_pin_blocks(plan, m.name, dev, pinned, working))


def _pin_blocks(plan: HostPlan, name: str, dev, pinned: bool | None, working: int) -> tuple:
    """Every block of ``plan`` cut now, per matrix; in ``dev``'s pinned host
    memory (``pinned`` as ``ops.transfer.to_pinned``) in turn while the
    pool has room for it beside what is pinned already and ``working``
    bytes more (``memory.pinned_room``: other circuits' keys and blocks
    share the pool) and allocates it; the blocks after that stay numpy
    (logged: their puts run at the pageable rate)."""
    if transfer.device_pinned_sharding(dev, pinned) is None:     # no pinned memory: numpy
        return tuple(tuple(plan.block(k, j) for j in range(len(p.blocks)))
                     for k, p in enumerate(plan.plans))
    room = memory.pinned_room(dev, working, memory.pinned_in_use())
    left, spilled, blocks = room, 0, []
    for k, p in enumerate(plan.plans):
        out = []
        for j in range(len(p.blocks)):
            x = plan.block(k, j)
            n = sum(int(v.nbytes) for v in jax.tree.leaves(x))
            if not spilled and (left is None or n <= left):
                try:
                    out.append(transfer.to_pinned(x, dev, pinned))
                    left = None if left is None else left - n
                    continue
                except jax.errors.JaxRuntimeError as e:
                    if not memory.out_of_memory(e):
                        raise
                    log.warning("host_plan: pinned host memory ran out (%s)", e)
            spilled += n
            out.append(x)
        blocks.append(tuple(out))
    if spilled:
        log.warning("host_plan: %s of %s's row blocks stay in pageable memory (their puts "
                    "are slower): the pinned pool had room for %s beside what is pinned",
                    memory.gib(spilled), name, memory.gib(room or 0))
    return tuple(blocks)


@aot.program
def _spmv_block(x: spmv.BlockedCSR, coeffs, wt):
    """One row block of one matrix: (8, B, rows) from wt (num_vars, B, 8)."""
    return spmv.spmv(x, coeffs, wt)


def _write_rows(out: np.ndarray, r0: int, r1: int, y, pool) -> None:
    """Rows [r0, r1) of a host (8, B, length) from a block's result (8, B, ≥
    r1 − r0), one plane per task on ``pool`` (the copy also takes the first
    touch of out's pages)."""
    with span("evaluate_host.fetch"):
        src = np.asarray(y)
    with span("evaluate_host.write_rows"):
        list(pool.map(lambda i: np.copyto(out[i][:, r0:r1], src[i][:, :r1 - r0]), range(Fr.L)))


CHECK_ALIGN = 1 << 12   # rows: a multiple of every power-of-two lane block bn ≤ 4096 (ops.elementwise)


def first_bad_host(a: np.ndarray, b: np.ndarray, c: np.ndarray, rows: int,
                   budget: int, pool=None) -> np.ndarray:
    """As ``is_satisfied``'s first_bad over host a, b, c (8, B, ≥ rows):
    the first of rows [0, rows) with a·b != c per instance (int (B,), −1
    where satisfied).  Blocks of C rows (the last one overlapping its
    predecessor: one program), 5 vectors' worth (a, b, c, a·b, the
    comparison) of 32·B·C bytes within ``budget``, C a multiple of
    ``CHECK_ALIGN`` where it can be (so that Fr.mul's kernel pads no copies
    of a and b: with C = 60.4M rows those two copies took a 32GiB partition's
    check past its budget, bench/NOTES.md session 24), put one limb plane per
    task on ``pool`` (``ops.transfer.put_planes``; default: a pool of its own)."""
    B = a.shape[1]
    C = min(rows, budget // (5 * 32 * B))
    if C > CHECK_ALIGN:
        C -= C % CHECK_ALIGN
    if rows and C < 1:
        raise ValueError(f"evaluate_host: the satisfaction check needs {5 * 32 * B} device "
                         f"bytes per row, over the budget of {budget}")
    with transfer.copy_pool(pool) as pool:
        def first_at(s):
            with span("check_host.put"):
                blocks = [transfer.put_planes(x[:, :, s:s + C], pool) for x in (a, b, c)]
            with span("check_host.satisfied"):
                return np.asarray(satisfied(*blocks)[1])
        return first_over_blocks(rows, C, first_at, (B,))


def first_over_blocks(count: int, size: int, first_at, shape, unit: int = 1) -> np.ndarray:
    """The first failing index per instance (int64 ``shape``, −1 where none)
    over lines [0, count) checked in blocks of ``size`` lines (the last
    overlapping its predecessor: one program for all): ``first_at(s)`` gives
    block [s, s + size)'s first failing index from its start per instance
    (−1 where none), the index of line s being ``s · unit``."""
    first = np.full(shape, -1, np.int64)
    for r0 in range(0, count, max(size, 1)):
        s = min(r0, count - size)
        bad = np.asarray(first_at(s))
        new = (first < 0) & (bad >= 0)
        first[new] = s * unit + bad[new]
    return first


def evaluate_host(m: Matrices, w, budget: int, *, length: int | None = None,
                  check: bool = False, plan: HostPlan | None = None,
                  learned: dict | None = None, on_device: tuple = (),
                  plane_shape: tuple | None = None, held: tuple = (),
                  put_ahead: bool = True):
    """``evaluate`` out of core: m's arrays in host memory (``to_host``; device
    arrays work too), w (8, *batch, num_vars) on the device or in host
    memory (numpy: put a piece at a time into the element-major copy,
    ``element_major_host``; a whole ``ops.transfer.PinnedView``, where twice
    its bytes fit the budget: put by one DMA, made element-major on the
    device, bench/NOTES.md hypothesis 91) -> (a, b, c), each a host numpy uint32 (8,
    *batch, length) (length ≥ rows, default rows; rows [rows, length) zero:
    the domain padding), equal bit for bit.

    ``on_device`` (indices of A, B, C: 0, 1, 2): those results stay on the
    device instead, each as its 8 limb planes (a tuple of 8 ``(*batch,
    *plane_shape)`` arrays, default ``(length,)``; ``plane_shape`` must
    hold ``length`` elements), written a block at a time
    (``_write_planes``), never fetched.  They count against ``budget``:
    the matrices with host results are evaluated first, then those on the
    device in order, each one's planes allocated just before it, so each
    matrix's row blocks are planned within what the planes existing by then
    leave (``spmv_budgets``; bench/NOTES.md hypothesis 85: C's and A's
    blocks beside no planes and one instead of two, fewer and larger).

    ``held`` (indices of matrices with host results): those come back as
    ``HeldRows`` (each block's result as fetched, pinned on a GPU, not copied
    into one numpy array: ``held_planes`` writes them into device planes
    later, bench/NOTES.md hypothesis 94).

    Each matrix is evaluated in row blocks (``plan``, a ``HostPlan`` of m
    for this batch, budget, ``on_device`` and length, prepared once by the caller;
    default one that cuts each block as it goes): the block's rows (ELL
    rows, its long rows' pieces and overflow chunks, ``ops.spmv.row_block``,
    padded to the plan's shape) go to the device, one program (the same for
    every block of the plan) computes them, and the result's first r1 − r0
    rows come back (into pinned memory on a GPU, ``ops.transfer.start_fetch``)
    while the next block runs, or are written into the device planes; block
    j + 1 is put before block j is dispatched, at most two blocks in flight
    (``ops.transfer.pipeline``; ``put_ahead`` False: each block's put just
    before its SpMV, for measuring; bench/NOTES.md hypothesis 98).
    Device bytes beyond a device w: at most ``budget`` by the estimate
    ``block_bytes`` (the element-major witness and the table stay for the
    whole evaluation).  With ``check``, also the first row with a·b != c
    per instance (int (*batch,), −1 where satisfied, as ``is_satisfied``;
    ``first_bad_host``, run again within half the budget where the device
    runs out of memory: ``memory.halving``, with ``learned``; host results
    only)."""
    _check_witness(m, w)
    batch = w.shape[1:-1]
    B = math.prod(batch)
    length = m.rows if length is None else length
    if length < m.rows:
        raise ValueError(f"evaluate_host: length {length} < {m.rows} rows")
    on_device = tuple(sorted(set(on_device)))
    if any(k not in (0, 1, 2) for k in on_device):
        raise ValueError(f"evaluate_host: on_device names matrices 0, 1, 2 (A, B, C), "
                         f"got {on_device}")
    plane_shape = (length,) if plane_shape is None else tuple(plane_shape)
    if math.prod(plane_shape) != length:
        raise ValueError(f"evaluate_host: plane_shape {plane_shape} does not hold {length} "
                         f"elements")
    held = tuple(sorted(set(held)))
    if any(k not in (0, 1, 2) or k in on_device for k in held):
        raise ValueError(f"evaluate_host: held names matrices 0, 1, 2 (A, B, C) not on the "
                         f"device, got {held} (on the device: {on_device})")
    if check and (on_device or held):
        raise ValueError("evaluate_host: check needs a, b, c in host memory (on_device and "
                         "held empty)")
    if plan is None:
        plan = host_plan(m, B, budget, on_device=on_device, length=length, prepared=False)
    else:
        got = (plan.batch, plan.budget, plan.on_device, plan.length, plan.rows)
        want = (B, budget, on_device, length if on_device else None, m.rows)
        if got != want:
            raise ValueError(
                f"evaluate_host: a plan for {got[0]} instances, {got[1]} bytes, results "
                f"{got[2]} on the device (length {got[3]}) and {got[4]} rows, called for "
                f"{want[0]} instances, {want[1]} bytes, {want[2]} (length {want[3]}) and "
                f"{want[4]} rows of circuit {m.name!r}")
    dev = next(iter(w.devices())) if isinstance(w, jax.Array) else jax.devices()[0]
    planes, outs, kept = {}, {}, {}
    with transfer.copy_pool() as pool:
        whole = transfer.held(w)
        if whole is not None and 2 * w.nbytes <= budget:   # hypothesis 91: one DMA, then
            with span("evaluate_host.put_witness"):         # element-major on the device
                wd = transfer.put_held(whole, dev)
            wt = spmv.element_major_untuned(wd if wd.ndim == 3 else
                                            wd.reshape(Fr.L, B, m.num_vars))
            del wd
        elif isinstance(w, np.ndarray):
            wt = element_major_host(w.reshape(Fr.L, B, m.num_vars), dev, pool)
        else:
            wt = spmv.element_major_untuned(w.reshape(Fr.L, B, m.num_vars))
        coeffs = jnp.asarray(m.coeffs, device=dev)
        for k in evaluation_order(on_device):
            if k in on_device:
                planes[k] = tuple(jnp.zeros(batch + plane_shape, jnp.uint32, device=dev)
                                  for _ in range(Fr.L))
            elif k in held:
                kept[k] = []
            else:
                outs[k] = np.empty((Fr.L, B, length), np.uint32)
                outs[k][:, :, m.rows:] = 0
            blocks = plan.plans[k].blocks
            pending = [None]       # host results: block j − 1's rows, written once j is dispatched

            def put_block(j, k=k):
                with span("evaluate_host.put"):
                    return transfer.put(plan.block(k, j), dev, pool)   # pageable: on the pool

            def run_block(j, x, k=k, blocks=blocks, pending=pending):
                r0, r1 = blocks[j]
                with span("evaluate_host.spmv"):
                    y = _spmv_block(x, coeffs, wt)
                if k in planes:
                    planes[k] = _write_planes(planes[k], y, jnp.int32(r0), jnp.int32(r1 - r0))
                    return y
                if k in kept:                  # kept as fetched: no copy into one array
                    with span("evaluate_host.hold"):
                        y = transfer.start_fetch(y)
                    kept[k].append((r0, r1, y))
                    return y
                y = transfer.start_fetch(y)                       # pinned on a GPU
                if pending[0] is not None:
                    _write_rows(outs[k], *pending[0], pool)
                pending[0] = (r0, r1, y)
                return y
            transfer.pipeline(len(blocks), put_block, run_block, put_ahead=put_ahead,
                              span_name="evaluate_host.wait")
            if pending[0] is not None:
                _write_rows(outs[k], *pending[0], pool)
        del wt
        first = check_host(*(outs[k] for k in range(3)), m.rows, budget, learned, pool) \
            if check else None
    res = tuple(planes[k] if k in planes else
                HeldRows(tuple(kept[k]), (Fr.L,) + batch + (length,)) if k in kept else
                outs[k].reshape((Fr.L,) + batch + (length,)) for k in range(3))
    return res + (first.reshape(batch),) if check else res


def evaluation_order(on_device: tuple) -> list[int]:
    """The order ``evaluate_host`` evaluates A, B, C (0, 1, 2) in: those
    with host results first, then those kept on the device."""
    return [k for k in range(3) if k not in on_device] + sorted(on_device)


def spmv_budgets(batch: int, budget: int, length: int, on_device: tuple = ()) -> tuple:
    """Per matrix (A, B, C) the budget ``evaluate_host`` plans its row blocks
    within: ``budget`` less the device results that exist while it is
    evaluated (``evaluation_order``: a host-result matrix beside none, the
    i-th device one beside i, its own included; 32·batch·length bytes
    each)."""
    on = sorted(set(on_device))
    return tuple(budget - (on.index(k) + 1 if k in on else 0) * 32 * batch * length
                 for k in range(3))


WITNESS_PIECE = 1 << 22   # element_major_host: variables per piece (128 MiB at batch 1)


def element_major_host(w: np.ndarray, dev, pool, piece: int | None = None) -> jax.Array:
    """``ops.spmv.element_major`` of a host witness w ``(8, B, n)``, built on
    ``dev`` a piece of ``piece`` variables at a time (each put as its limb
    rows, ``transfer.put_planes``, then transposed into place): the device
    holds the result and one piece, never w itself (the 16 GB mode with the
    witness in host memory, bench/NOTES.md hypothesis 83; ``piece``
    default ``WITNESS_PIECE``).  The last piece starts at n − piece
    (overlapping its predecessor, same values): one compiled program for
    every piece."""
    L, B, n = w.shape
    size = min(piece or WITNESS_PIECE, n)
    wt = jnp.zeros((n, B, L), jnp.uint32, device=dev)
    for lo in range(0, n, size):
        at = min(lo, n - size)
        with span("evaluate_host.put_witness"):
            p = transfer.put_planes(w[:, :, at:at + size], pool, dev=dev)
        wt = _element_major_into(wt, p, jnp.int32(at))
    return wt


@functools.partial(jax.jit, donate_argnums=(0,))
def _element_major_into(wt, piece, at):
    """wt (n, B, 8) with rows [at, at + k) = the piece (8, B, k) transposed."""
    return jax.lax.dynamic_update_slice_in_dim(wt, spmv.element_major(piece), at, 0)


@functools.partial(jax.jit, donate_argnums=(0,))
def _write_planes(planes, y, r0, live):
    """Limb planes ``(*batch, *shape)`` (donated: written in place) with
    flat elements [r0, r0 + live) of each instance = y's first ``live``
    rows (y: a block's result (8, B, R), B = prod(batch), R ≥ live; rows
    past ``live`` and past the planes' end are dropped): ``_set_rows``
    per plane."""
    return tuple(_set_rows(p, y[i], r0, live) for i, p in enumerate(planes))


@functools.partial(jax.jit, donate_argnums=(0,))
def _write_plane(plane, yi, r0, live):
    """``_write_planes`` for one limb's plane and its rows yi (B, R)."""
    return _set_rows(plane, yi, r0, live)


def _set_rows(p, yi, r0, live):
    """Plane p ``(*batch, *shape)`` with flat elements [r0, r0 + live) of
    each instance = the first ``live`` columns of yi (B, R).

    A window of R rows at s = min(r0, L − R) (in range: the last block's
    window ends at the plane's end L) is read, blended with yi shifted by
    r0 − s rows (a slice of [0…0, yi]) where the block's rows land, and
    written back: slices only.  The scatter this replaces (an index per
    row) took 930 of the 979 ms the device h's SpMV kept an H100 busy at
    32GiB (bench/NOTES.md hypothesis 90)."""
    flat = p.reshape(yi.shape[0], -1)
    L = flat.shape[-1]
    yi = yi[:, :L]                       # rows past L land past the end: dropped
    R = yi.shape[-1]
    s = jnp.minimum(r0, L - R)
    d = r0 - s                           # 0 <= d <= R: yi's row 0 lands at window row d
    shifted = jax.lax.dynamic_slice_in_dim(
        jnp.concatenate([jnp.zeros_like(yi), yi], axis=-1), R - d, R, axis=-1)
    k = jnp.arange(R, dtype=jnp.int32)
    keep = (k >= d) & (k - d < live)
    window = jax.lax.dynamic_slice_in_dim(flat, s, R, axis=-1)
    flat = jax.lax.dynamic_update_slice_in_dim(flat, jnp.where(keep, shifted, window), s,
                                               axis=-1)
    return flat.reshape(p.shape)


class HeldRows(NamedTuple):
    """A matrix's results ``(8, *batch, length)`` as ``evaluate_host(held=)``
    leaves them (bench/NOTES.md hypothesis 94): per row block ``(r0, r1,
    y)``, y its result ``(8, B, R)`` (R ≥ r1 − r0) as fetched
    (``ops.transfer.start_fetch``: a pinned host jax Array on a GPU), whose
    first r1 − r0 rows are rows [r0, r1); every row no block holds is
    zero.  ``shape``, ``dtype``, ``ndim`` and ``nbytes`` are the vector's."""
    blocks: tuple
    shape: tuple

    dtype = np.dtype(np.uint32)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


HELD_IN_FLIGHT = 2   # held_planes: limbs put ahead of the one being written


def held_planes(x: HeldRows, plane_shape: tuple, pool=None, dev=None) -> tuple:
    """x on ``dev`` (default the default device) as its 8 limb planes
    ``(*batch, *plane_shape)`` (``plane_shape`` holding the length): zeros,
    then each block's limbs put from their host view
    (``ops.transfer.put_planes`` on ``pool``'s threads) and written in place
    (``_write_plane``), one limb at a time with at most ``HELD_IN_FLIGHT``
    more in flight, so the device holds the vector and about three limbs
    of one block, never a block whole (at 32GiB the 16 GB mode's h has
    ~1 GB beside its three vectors; a block of C's results is ~1 GB).  No
    copy of the vector is made on the host (``evaluate_host``'s
    ``_write_rows``: 215 ms a 32GiB proof on an H100)."""
    L, *batch, length = x.shape
    if math.prod(plane_shape) != length:
        raise ValueError(f"held_planes: plane_shape {plane_shape} does not hold {length} "
                         f"elements")
    dev = transfer.default_device(dev)
    planes = [jnp.zeros(tuple(batch) + tuple(plane_shape), x.dtype, device=dev)
              for _ in range(L)]
    written = []
    for r0, r1, y in x.blocks:
        src = np.asarray(y)                      # a view of the pinned copy on a GPU
        for i in range(L):
            limb = transfer.put_planes(src[i], pool, dev=dev)   # whole: one program
            planes[i] = _write_plane(planes[i], limb, jnp.int32(r0), jnp.int32(r1 - r0))
            written.append(planes[i])
            if len(written) > HELD_IN_FLIGHT:    # < L: never a plane donated since
                jax.block_until_ready(written.pop(0))
    return tuple(planes)


def check_host(a: np.ndarray, b: np.ndarray, c: np.ndarray, rows: int, budget: int,
               learned: dict | None = None, pool=None) -> np.ndarray:
    """``first_bad_host`` over host a, b, c ``(8, *batch, ≥ rows)`` (as
    ``evaluate_host`` gives them) -> the first of rows [0, rows) with a·b != c
    per instance (int ``batch``, −1 where satisfied), run again within half
    the budget where the device runs out of memory (``memory.halving``, with
    ``learned``)."""
    batch = a.shape[1:-1]
    flat = [x.reshape(x.shape[0], -1, x.shape[-1]) for x in (a, b, c)]
    first = memory.halving(lambda bud: first_bad_host(*flat, rows, bud, pool), budget,
                           "evaluate_host: the satisfaction check", learned=learned)
    return first.reshape(batch)


# ---------------------------------------------------------------- persistence
def _flat(m: Matrices) -> dict:
    """name -> array for every array of m ("a__cols", ..., "bit_vars")."""
    out = {}
    for mat in ("a", "b", "c"):
        for f in _MATRIX_FIELDS:
            out[f"{mat}__{f}"] = getattr(getattr(m, mat), f)
    for f in ("coeffs", "a_aux_density", "b_input_density", "b_aux_density", "bit_vars"):
        out[f] = getattr(m, f)
    return out


def _static(m: Matrices) -> dict:
    d = {f: getattr(m, f) for f in ("name", "num_inputs", "num_aux", "num_constraints")}
    for mat in ("a", "b", "c"):
        x = getattr(m, mat)
        d[mat] = {"rows": x.rows, "num_cols": x.num_cols, "nnz": x.nnz, "block_rows": x.block_rows}
    return d


def _build(static: dict, arrays: dict) -> Matrices:
    mats = [spmv.BlockedCSR(*(arrays[f"{mat}__{f}"] for f in _MATRIX_FIELDS),
                            **{k: int(v) for k, v in static[mat].items()})
            for mat in ("a", "b", "c")]
    return Matrices(*mats, arrays["coeffs"], arrays["a_aux_density"], arrays["b_input_density"],
                    arrays["b_aux_density"], arrays["bit_vars"], str(static["name"]),
                    int(static["num_inputs"]), int(static["num_aux"]),
                    int(static["num_constraints"]))


def save(m: Matrices, directory: str, key: str | None = None) -> str:
    """Store m under ``directory/key`` (key defaults to ``m.key``), replacing
    any entry already there; returns the entry's path.  Atomic: everything is
    written under a temporary name first and renamed into place, and on any
    failure the temporary is removed, so no partial entry is ever visible
    (``jaxprove.store``)."""
    return store.save(directory, key or m.key, _flat(m), FORMAT, VERSION, _static(m))


def load(directory: str, key: str, device=None) -> Matrices | None:
    """The Matrices stored under ``directory/key``, restored onto ``device``
    (default: the first device), or None when there is no entry or the entry
    is unusable (other format or version, other key, missing or mismatching
    arrays, checksum mismatch); the reason is logged as a warning."""
    try:
        got = store.load(directory, key, FORMAT, VERSION, device)
        return None if got is None else _build(got[1], got[0])
    except Exception as e:  # noqa: BLE001 - any unusable entry means: extract again
        log.warning("pce cache entry %s is unusable (%s: %s); it will be re-extracted",
                    os.path.join(directory, key), type(e).__name__, e)
        return None


def get_or_extract(r1cs_fn, key: str, directory: str, **block_args) -> Matrices:
    """The cached Matrices for ``key``, or (no usable entry) ``extract(r1cs_fn())``,
    saved under ``key`` (replacing an unusable entry) and returned.  A failed
    save (disk full, a concurrent writer) is logged; the matrices are still
    returned.  ``key``: ``cache_key(name)`` or, where the sizes are known
    before recording, ``cache_key(name, shapes)``."""
    m = load(directory, key)
    if m is None:
        m = extract(r1cs_fn(), **block_args)
        try:
            save(m, directory, key)
        except OSError as e:
            log.warning("pce: could not store %s in %s (%s)", key, directory, e)
    return m


# ---------------------------------------------------------------- recorded circuits
R1CS_FORMAT = "jaxprove-r1cs"


def save_r1cs(r1cs: cs.R1CS, directory: str, key: str) -> str:
    """Store a recorded circuit under ``directory/key`` as host arrays
    (``jaxprove.store``: atomic, checksummed); returns the entry's path."""
    arrays = {f"{mat}__{f}": np.asarray(getattr(getattr(r1cs, mat), f))
              for mat in ("a", "b", "c") for f in cs.CSR._fields}
    arrays["coeffs"] = np.asarray([c.to_bytes(32, "little") for c in r1cs.coeffs],
                                  np.dtype("V32")).view(np.uint8).reshape(-1, 32)
    arrays["bit_vars"] = np.asarray(r1cs.bit_vars, bool)
    static = {f: getattr(r1cs, f) for f in ("name", "num_inputs", "num_aux", "num_constraints")}
    return store.save(directory, key, arrays, R1CS_FORMAT, VERSION, static)


def load_r1cs(directory: str, key: str) -> cs.R1CS | None:
    """The circuit stored under ``directory/key``, or None when there is no
    entry or it is unusable (the reason logged, as ``load``)."""
    try:
        got = store.load(directory, key, R1CS_FORMAT, VERSION)
        if got is None:
            return None
        arrays, static = got
        csr = [cs.CSR(*(arrays[f"{mat}__{f}"] for f in cs.CSR._fields)) for mat in ("a", "b", "c")]
        coeffs = tuple(int.from_bytes(bytes(row), "little") for row in arrays["coeffs"])
        r = cs.R1CS(str(static["name"]), int(static["num_inputs"]), int(static["num_aux"]),
                    int(static["num_constraints"]), *csr, coeffs, arrays["bit_vars"])
        for mat, m in zip("abc", csr):
            if m.indptr.shape != (r.num_rows + 1,) or m.indptr[-1] != m.cols.shape[0]:
                raise ValueError(f"matrix {mat}: indptr does not fit {r.num_rows} rows")
        return r
    except Exception as e:  # noqa: BLE001 - any unusable entry means: record again
        log.warning("r1cs cache entry %s is unusable (%s: %s); it will be recorded again",
                    os.path.join(directory, key), type(e).__name__, e)
        return None


def get_or_record(record_fn, key: str, directory: str) -> cs.R1CS:
    """The stored circuit for ``key``, or (no usable entry) ``record_fn()``,
    saved under ``key`` and returned; a failed save is logged.  The key
    must name the circuit's topology and the circuits' code version (as
    ``cache_key``): an entry is never checked against the circuit code."""
    r = load_r1cs(directory, key)
    if r is None:
        r = record_fn()
        try:
            save_r1cs(r, directory, key)
        except OSError as e:
            log.warning("pce: could not store the circuit %s in %s (%s)", key, directory, e)
    return r
