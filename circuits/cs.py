"""The tensor constraint system: one circuit source, two interpretations.

A circuit is a Python function ``circuit_fn(cs, inputs, *static_args)`` written
with the gadgets of ``circuits.gadgets``.  It runs in one of two modes:

* **record** (``record``): once per topology, with shapes only (``inputs`` is
  None, value thunks are never called).  ``cs.alloc`` hands out whole tensors
  of variable ids and ``cs.enforce`` appends whole blocks of rows built with
  numpy index arithmetic, so a gadget over 10^6 instances costs the Python time
  of one.  The result is an ``R1CS`` in CSR form.
* **witness** (``witness``): under ``jax.jit`` and ``jax.vmap`` over a batch
  of instances.  ``cs.alloc`` calls the value thunk (jax ops) and appends the
  values; ``cs.enforce`` does nothing.  The result is the witness array.

Both modes execute the same sequence of ``alloc`` calls with the same static
shapes and masks, so the variable order is identical by construction.

**Variables (bellperson's model).**  Column 0 is the constant ONE, columns
1..num_inputs-1 the public inputs in allocation order, then the aux variables
in allocation order.  While recording, ids are int64: aux variable j is j,
input i is ``INPUT_BASE + i`` (ONE = ``INPUT_BASE``), so sorting ids sorts
columns; ``NOVAR`` marks tensor slots that were not allocated (masked out).
After synthesis one row per public input (ONE included) is appended:
A = 1·input_i, B and C empty.

**Allocation order within a block.**  ``alloc(shape, where=mask)`` numbers the
masked elements of ``shape`` in row-major order, and ``enforce(..., where=mask)``
emits one row per masked element in row-major order.  A gadget that allocates
and constrains element by element in bellperson (e.g. the 32 bits of a word)
therefore gets bellperson's order; a gadget that does several steps per
element stacks the steps on a trailing "slot" axis.  A gadget applied to a
batch of k instances allocates op by op (all k instances of step 1, then of
step 2, ...), which is a valid order but not the one of a bellperson loop over
the k instances.

**Linear combinations** (record mode only) are tensors too: ``LC(var, coef)``
with ``var`` int64 ``(*shape, k)`` and ``coef`` int32 ``(*shape, k)``, ids into
the recording's ``CoeffTable`` of canonical Fr integers (id 0 is the
coefficient 0: a padding term).  Each enforced row is canonicalised like
bellperson's sparse LinearCombination: terms sorted by column, repeated
variables merged by adding coefficients, zero terms dropped.

**Witness values.**  Bits are ``uint32`` 0/1 arrays of the tensor's shape;
field elements are ``ops.field.Fr`` arrays ``(8, *shape)`` (Montgomery limbs).
The witness of a batch is an Fr array ``(8, B, num_inputs + num_aux)``
(``w[:, :, 0]`` = 1): ``jax.vmap`` maps the circuit over one instance axis.

**Loops.**  ``cs.loop(body, carry, xs)`` runs ``carry, y = body(cs, carry, x)``
over xs.  Record mode: a Python loop.  Witness mode: unrolled until a step
maps the carry to one of the same static structure, then every run of steps
with equally structured x is ONE ``lax.scan``, so a 64-round compression or a
many-block hash compiles to a program of a few steps (XLA compile time grows
with program size, and an unrolled SHA-256 takes minutes to compile).

**API.**
* ``record(circuit_fn, *static_args, name=None) -> R1CS``
* ``witness(circuit_fn, inputs, *static_args, in_axes=0) -> w`` (8, B, n)
* ``witness_with_outputs(...) -> (w, out)``: ``out`` is what the circuit
  returns in witness mode (a pytree of arrays, instance axis first);
  ``witness_fn(circuit_fn, *static_args, in_axes=0)`` is the cached jitted
  function behind both.  ``in_axes`` is ``jax.vmap``'s for ``inputs``
  (hashable; Fr arrays are limb-major, their instance axis is 1).
* ``is_satisfied(r1cs, w) -> (ok, first_failing_row)``: reference check of one
  instance with Python integers.
* inside a circuit: ``cs.recording``, ``cs.alloc(shape, value, where=, bit=)``,
  ``cs.alloc_input(...)``, ``cs.enforce(lambda: (A, B, C), where=)``,
  ``cs.lc(ids, coeff)``, ``cs.zero_lc(shape)``, ``cs.loop(body, carry, xs)``.
"""
from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ops import aot
from ops.field import Fr, R_FR
from ops.limbs import to_limbs

INPUT_BASE = -(1 << 40)          # id of input i is INPUT_BASE + i
ONE = INPUT_BASE                 # the constant variable (input 0)
NOVAR = np.iinfo(np.int64).min   # an unallocated (masked-out) slot
_PAD = np.iinfo(np.int64).max    # sort key of dropped terms
_SMALL = 2048                    # arrays up to this size: plain numpy calls (less overhead)


# ---------------------------------------------------------------- the interface
class CSR(NamedTuple):
    """One sparse matrix, rows x (num_inputs + num_aux)."""
    indptr: np.ndarray       # int64 (rows + 1,)
    cols: np.ndarray         # int64 (nnz,) column in bellperson order
    coeff_ids: np.ndarray    # int32 (nnz,) index into R1CS.coeffs


class R1CS(NamedTuple):
    """A recorded circuit (see the module docstring for the column order)."""
    name: str
    num_inputs: int          # public inputs INCLUDING the constant ONE
    num_aux: int
    num_constraints: int     # gadget constraints, NOT counting the input rows
    a: CSR                   # rows = num_constraints + num_inputs
    b: CSR
    c: CSR
    coeffs: tuple            # deduplicated canonical Fr coefficients (ints in [0, r))
    bit_vars: np.ndarray     # bool (num_inputs + num_aux,): variables proven boolean

    @property
    def num_vars(self) -> int:
        return self.num_inputs + self.num_aux

    @property
    def num_rows(self) -> int:
        return self.num_constraints + self.num_inputs


# ---------------------------------------------------------------- coefficients
def _core(*arrays):
    """Broadcast the arrays against each other; along every axis on which all
    of them repeat one value (stride 0), keep a single slice.  Returns
    (broadcast shape, the reduced arrays): an element-wise result on the
    reduced arrays, broadcast to the shape (``_expand``), is the result on
    the full ones."""
    arrs = np.broadcast_arrays(*arrays)
    shape = arrs[0].shape
    idx = tuple(slice(0, 1) if all(x.strides[i] == 0 for x in arrs) else slice(None)
                for i in range(len(shape)))
    return shape, [x[idx] for x in arrs]


def _expand(x, shape):
    """``x`` (a reduced result of ``_core``) broadcast to ``shape``: a
    read-only view when ``x`` is smaller (LC arrays are never written)."""
    return x if x.shape == shape else np.broadcast_to(x, shape)


def _distinct(x, size: int):
    """``np.unique(x, return_inverse=True)`` for a flat array of integers in
    [0, size): the sorted distinct values and each element's index among
    them.  O(len(x)) through a table of ``size`` entries when ``size`` is at
    most a few times len(x), else a sort."""
    if size > 4 * x.size + 4096:
        u, inv = np.unique(x, return_inverse=True)
        return u, inv.reshape(-1)
    present = np.zeros(size, bool)
    present[x] = True
    u = np.flatnonzero(present)
    rank = np.zeros(size, np.intp)
    rank[u] = np.arange(u.size)
    return u, rank[x]


class CoeffTable:
    """Interned canonical Fr coefficients of one recording; arithmetic on id
    arrays is vectorised by evaluating each distinct operand pair once."""

    def __init__(self):
        self.values: list[int] = []
        self._index: dict[int, int] = {}
        self._cache: dict[tuple, np.ndarray] = {}
        for v in (0, 1, R_FR - 1):
            self.id(v)

    def id(self, x: int) -> int:
        x = int(x) % R_FR
        i = self._index.get(x)
        if i is None:
            i = self._index[x] = len(self.values)
            self.values.append(x)
        return i

    def ids(self, xs) -> np.ndarray:
        """Python ints (any nesting / object array) -> int32 ids, same shape
        (flat lists and tuples are cached: gadgets reuse weight vectors)."""
        if isinstance(xs, (list, tuple)) and all(isinstance(x, int) for x in xs):
            key = tuple(xs)
            hit = self._cache.get(key)
            if hit is None:
                hit = self._cache[key] = np.asarray([self.id(x) for x in xs], np.int32)
            return hit
        arr = np.asarray(xs, dtype=object)
        flat = [self.id(x) for x in arr.reshape(-1)]
        return np.asarray(flat, np.int32).reshape(arr.shape)

    def _unary(self, a, op):
        a = np.asarray(a, np.int32)
        if a.size > _SMALL:
            shape, (a,) = _core(a)
            u, inv = _distinct(a.reshape(-1), len(self.values))
        else:
            shape = a.shape
            u, inv = np.unique(a, return_inverse=True)
        res = np.asarray([self.id(op(self.values[i])) for i in u.tolist()], np.int32)
        return _expand(res[inv].reshape(a.shape), shape)

    def _binary(self, a, b, op):
        """op over pairs of ids, each distinct pair once, in the order of
        ``np.unique`` over (a, b) (so new values are interned in that order)."""
        a, b = np.asarray(a, np.int32), np.asarray(b, np.int32)
        vals = self.values
        if a.size <= _SMALL and b.size <= _SMALL:
            a, b = np.broadcast_arrays(a, b)
            key = (a.astype(np.int64) << 32) | b.astype(np.int64)
            u, inv = np.unique(key, return_inverse=True)
            res = np.asarray([self.id(op(vals[k >> 32], vals[k & 0xFFFFFFFF]))
                              for k in u.tolist()], np.int32)
            return res[inv].reshape(a.shape)
        shape, (a, b) = _core(a, b)
        ua, ia = _distinct(a.reshape(-1), len(vals))
        ub, ib = _distinct(b.reshape(-1), len(vals))
        u, inv = _distinct(ia.astype(np.int64) * ub.size + ib, ua.size * ub.size)
        res = np.asarray([self.id(op(vals[x], vals[y]))
                          for x, y in zip(ua[u // ub.size].tolist(), ub[u % ub.size].tolist())],
                         np.int32)
        return _expand(res[inv].reshape(a.shape), shape)

    def neg(self, a):
        return self._unary(a, lambda x: -x)

    def add(self, a, b):
        return self._binary(a, b, lambda x, y: x + y)

    def mul(self, a, b):
        return self._binary(a, b, lambda x, y: x * y)


# ---------------------------------------------------------------- linear combinations
class LC(NamedTuple):
    """A tensor of linear combinations: element ``e`` is
    Σ_t values[coef[e, t]] · x[var[e, t]] (record mode only)."""
    var: np.ndarray          # int64 (*shape, k)
    coef: np.ndarray         # int32 (*shape, k)
    table: CoeffTable

    @property
    def shape(self) -> tuple:
        return self.var.shape[:-1]

    def __add__(self, other: "LC") -> "LC":
        if self.shape == other.shape:
            return LC(np.concatenate([self.var, other.var], -1),
                      np.concatenate([self.coef, other.coef], -1), self.table)
        shape = np.broadcast_shapes(self.shape, other.shape)
        parts = [(np.broadcast_to(x.var, shape + x.var.shape[-1:]),
                  np.broadcast_to(x.coef, shape + x.coef.shape[-1:])) for x in (self, other)]
        return LC(np.concatenate([p[0] for p in parts], -1),
                  np.concatenate([p[1] for p in parts], -1), self.table)

    def __neg__(self) -> "LC":
        return LC(self.var, self.table.neg(self.coef), self.table)

    def __sub__(self, other: "LC") -> "LC":
        return self + (-other)

    def scale(self, c) -> "LC":
        """Multiply by constants: a Python int, or an array of ints
        broadcastable to ``shape``."""
        ids = self.table.ids(c)
        return LC(self.var, self.table.mul(self.coef, ids[..., None]), self.table)

    def __getitem__(self, idx) -> "LC":
        """Index the axes of ``shape`` (never the term axis); ``None`` adds an axis."""
        idx = idx if isinstance(idx, tuple) else (idx,)
        if any(i is Ellipsis for i in idx):
            idx = idx + (slice(None),)
        return LC(self.var[idx], self.coef[idx], self.table)

    def compact(self) -> "LC":
        """The same LCs canonicalised (repeated variables merged, zero terms
        dropped), k = the largest remaining term count: keeps accumulated
        LCs (MultiEq) small."""
        n = int(np.prod(self.shape, dtype=np.int64))
        lengths, v, c = _canonical_rows(LC(self.var.reshape(n, -1), self.coef.reshape(n, -1),
                                           self.table))
        k = int(lengths.max()) if n else 0
        if v.size == n * k:                       # every row has k terms
            return LC(v.reshape(self.shape + (k,)), c.reshape(self.shape + (k,)), self.table)
        rows = np.repeat(np.arange(n), lengths)
        pos = np.arange(v.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        var = np.full((n, k), ONE, np.int64)
        coef = np.zeros((n, k), np.int32)
        var[rows, pos], coef[rows, pos] = v, c
        return LC(var.reshape(self.shape + (k,)), coef.reshape(self.shape + (k,)), self.table)

    def sum(self, axis: int = -1) -> "LC":
        """Σ over one axis of ``shape`` (the terms are concatenated)."""
        axis = axis % len(self.shape)
        var = np.moveaxis(self.var, axis, -2)
        coef = np.moveaxis(self.coef, axis, -2)
        return LC(var.reshape(var.shape[:-2] + (-1,)), coef.reshape(coef.shape[:-2] + (-1,)),
                  self.table)


def stack_lcs(lcs, axis: int = -1) -> LC:
    """Stack LCs of one shape along a new axis of ``shape`` (k padded with
    zero terms)."""
    shape = np.broadcast_shapes(*[x.shape for x in lcs])
    k = max(x.var.shape[-1] for x in lcs)
    vs, cs = [], []
    for x in lcs:
        pad = k - x.var.shape[-1]
        v = np.broadcast_to(x.var, shape + x.var.shape[-1:])
        c = np.broadcast_to(x.coef, shape + x.coef.shape[-1:])
        vs.append(np.concatenate([v, np.full(shape + (pad,), ONE, np.int64)], -1))
        cs.append(np.concatenate([c, np.zeros(shape + (pad,), np.int32)], -1))
    axis = axis % (len(shape) + 1)
    return LC(np.stack(vs, axis), np.stack(cs, axis), lcs[0].table)


def concat_lcs(lcs, axis: int = -1) -> LC:
    """Concatenate LCs along an existing axis of ``shape`` (k padded with
    zero terms)."""
    k = max(x.var.shape[-1] for x in lcs)
    nd = len(lcs[0].shape)
    axis = axis % nd
    pad = [(0, 0)] * nd
    vs = [np.pad(x.var, pad + [(0, k - x.var.shape[-1])], constant_values=ONE) for x in lcs]
    cs = [np.pad(x.coef, pad + [(0, k - x.coef.shape[-1])]) for x in lcs]
    return LC(np.concatenate(vs, axis), np.concatenate(cs, axis), lcs[0].table)


def select_lc(cases, lcs) -> LC:
    """Element-wise choice among LCs of one shape: element e takes lcs[j] where
    cases[e] == j (k padded with zero terms)."""
    st = stack_lcs(lcs, axis=-1)               # (*shape, n, k)
    cases = np.broadcast_to(np.asarray(cases), st.shape[:-1])
    idx = cases[..., None, None]
    return LC(np.take_along_axis(st.var, idx, -2)[..., 0, :],
              np.take_along_axis(st.coef, idx, -2)[..., 0, :], st.table)


# ---------------------------------------------------------------- record mode
def _sort_rows(key, coef, tries: int = 3):
    """Stable sort of every row of ``key`` (n, k), ``coef`` carried along.

    The rows of one block usually share one sorting permutation (a gadget's
    terms are laid out alike in every instance): the stable argsort of the
    first row is applied to all rows and checked (adjacent keys increase,
    equal keys stay in their original order; the order of dropped ``_PAD``
    terms does not matter); rows it does not sort try the first such row's
    permutation, and after ``tries`` permutations the rest is argsorted row
    by row.  The result equals ``np.argsort(key, 1, kind="stable")``'s."""
    n, k = key.shape
    if k == 1:
        return key, coef
    if n * k <= _SMALL:
        order = np.argsort(key, axis=1, kind="stable")
        return np.take_along_axis(key, order, 1), np.take_along_axis(coef, order, 1)
    out_k, out_c = key, coef
    todo = None                                   # None: all rows
    for _ in range(tries):
        kk = key if todo is None else key[todo]
        cc = coef if todo is None else coef[todo]
        perm = np.argsort(kk[0], kind="stable")
        ks, cs = kk[:, perm], cc[:, perm]
        lo, hi = ks[:, :-1], ks[:, 1:]
        ok = ((lo < hi) | ((lo == hi) & ((perm[:-1] < perm[1:]) | (lo == _PAD)))).all(1)
        if todo is None:
            out_k, out_c = ks, cs
            bad = np.flatnonzero(~ok)
        else:
            out_k[todo[ok]], out_c[todo[ok]] = ks[ok], cs[ok]
            bad = todo[~ok]
        if bad.size == 0:
            return out_k, out_c
        todo = bad
    order = np.argsort(key[todo], axis=1, kind="stable")
    out_k[todo] = np.take_along_axis(key[todo], order, 1)
    out_c[todo] = np.take_along_axis(coef[todo], order, 1)
    return out_k, out_c


def _canonical_rows(lc: LC):
    """Rows (n, k) -> CSR fragment (lengths (n,), ids (nnz,), coeff ids (nnz,)):
    sorted by variable, repeated variables merged, zero terms dropped."""
    var, coef, table = lc.var, lc.coef, lc.table
    n, k = var.shape
    if k == 0 or n == 0:
        return np.zeros(n, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32)
    key, coef = _sort_rows(np.where(coef != 0, var, _PAD), np.asarray(coef, np.int32))
    if (key[:, 0] == NOVAR).any():                # NOVAR sorts first
        raise ValueError("enforce: a linear combination uses an unallocated (masked-out) "
                         "variable slot")
    live = key != _PAD
    if not ((key[:, 1:] == key[:, :-1]) & live[:, 1:]).any():      # no repeated variable
        return live.sum(1, dtype=np.int64), key[live], coef[live]
    rows = np.broadcast_to(np.arange(n)[:, None], (n, k))[live]
    v, c = key[live], coef[live]
    first = np.ones(v.size, bool)
    first[1:] = (rows[1:] != rows[:-1]) | (v[1:] != v[:-1])
    starts = np.flatnonzero(first)
    gid = np.cumsum(first) - 1
    dup = np.flatnonzero(~first)
    rank = dup - starts[gid[dup]]
    acc = c[starts].copy()
    order = np.argsort(rank, kind="stable")
    dup, rank = dup[order], rank[order]
    bounds = np.flatnonzero(np.diff(rank)) + 1
    for part in np.split(dup, bounds):
        g = gid[part]
        acc[g] = table.add(acc[g], c[part])
    keep = acc != 0
    rows, v, c = rows[starts][keep], v[starts][keep], acc[keep]
    return np.bincount(rows, minlength=n).astype(np.int64), v, c.astype(np.int32)


def _pack_ids(ids, int32: bool):
    """Variable ids -> their compact form in a stored fragment: aux j -> j,
    input i -> -1 - i; int32 when ``int32`` (every id fits), else int64."""
    ids = np.where(ids < 0, (INPUT_BASE - 1) - ids, ids)
    return ids.astype(np.int32) if int32 else ids


def _columns(packed, out, num_inputs: int):
    """Compact ids (``_pack_ids``) -> bellperson columns, written into the
    int64 array ``out``: input i -> i, aux j -> num_inputs + j."""
    out[...] = packed
    out += num_inputs
    inp = out < num_inputs                        # was -1 - i: now num_inputs - 1 - i
    out[inp] = (num_inputs - 1) - out[inp]
    return out


class Recorder:
    """Record mode: hands out variable ids, collects rows as CSR fragments.

    Memory: each enforced block is stored as a fragment in the smallest
    dtypes that hold it (row lengths uint8/uint16, compact variable ids
    int32, coefficient ids uint16 while the table has at most 2^16 entries);
    ``finish`` fills the final CSR arrays fragment by fragment, freeing each
    fragment once copied, so the peak is about the finished R1CS plus the
    fragments of the matrices not yet built (a finished recorder cannot be
    finished again)."""
    recording = True

    def __init__(self):
        self.coeffs = CoeffTable()
        self.num_inputs = 1
        self.num_aux = 0
        self.num_constraints = 0
        self._rows = ([], [], [])
        self._bits = []

    # -- allocation
    def alloc(self, shape, value=None, *, where=None, bit=False, input=False):
        """Allocate the masked elements of a tensor of variables (row-major).
        Returns int64 ids of ``shape`` (``NOVAR`` where not allocated)."""
        shape = tuple(int(s) for s in shape)
        if where is None:
            n = int(np.prod(shape, dtype=np.int64))
            ids = np.arange(n, dtype=np.int64).reshape(shape)
        else:
            mask = np.broadcast_to(np.asarray(where, bool), shape)
            n = int(mask.sum())
            ids = np.full(shape, NOVAR, np.int64)
            ids[mask] = np.arange(n, dtype=np.int64)
        if input:
            base = INPUT_BASE + self.num_inputs
            self.num_inputs += n
        else:
            base = self.num_aux
            self.num_aux += n
        ids = np.where(ids == NOVAR, NOVAR, ids + base) if where is not None else ids + base
        if bit and n:
            self._bits.append(_pack_ids(ids[ids != NOVAR] if where is not None
                                        else ids.reshape(-1), self._int32()))
        return ids

    def _int32(self) -> bool:
        """Every variable id so far fits a compact int32 id."""
        return max(self.num_aux, self.num_inputs) < (1 << 31)

    def alloc_input(self, shape, value=None, *, where=None, bit=False):
        return self.alloc(shape, value, where=where, bit=bit, input=True)

    # -- constraints
    def lc(self, var, coeff=1) -> LC:
        """The one-term LCs coeff·x[var] (var an id array, coeff an int or an
        int array broadcastable to var)."""
        var = np.asarray(var, np.int64)
        ids = self.coeffs.ids(coeff)
        ids = np.broadcast_to(ids, np.broadcast_shapes(ids.shape, var.shape))
        var = np.broadcast_to(var, ids.shape)
        return LC(var[..., None], ids[..., None].astype(np.int32), self.coeffs)

    def zero_lc(self, shape=()) -> LC:
        shape = tuple(shape)
        return LC(np.zeros(shape + (0,), np.int64), np.zeros(shape + (0,), np.int32), self.coeffs)

    def enforce(self, abc: Callable[[], tuple], *, where=None):
        """Append the rows A·B = C, one per (masked) element, row-major.
        ``abc`` returns the three LC tensors (broadcast against each other)."""
        a, b, c = abc()
        shape = np.broadcast_shapes(a.shape, b.shape, c.shape)
        mask = None if where is None else np.broadcast_to(np.asarray(where, bool), shape)
        for store, x in zip(self._rows, (a, b, c)):
            v = np.broadcast_to(x.var, shape + x.var.shape[-1:])
            co = np.broadcast_to(x.coef, shape + x.coef.shape[-1:])
            if mask is None:
                rows = int(np.prod(shape, dtype=np.int64))
                v, co = v.reshape(rows, v.shape[-1]), co.reshape(rows, co.shape[-1])
            else:
                v, co = v[mask], co[mask]
            lengths, ids, cids = _canonical_rows(LC(v, co, self.coeffs))
            k = v.shape[-1]                           # lengths <= k
            lengths = lengths.astype(np.uint8 if k < 1 << 8 else
                                     np.uint16 if k < 1 << 16 else np.int64)
            if len(self.coeffs.values) <= 1 << 16:
                cids = cids.astype(np.uint16)
            store.append((lengths, _pack_ids(ids, self._int32()), cids))
        self.num_constraints += int(np.prod(shape, dtype=np.int64)) if mask is None else int(mask.sum())

    def loop(self, body: Callable, carry, xs):
        """carry, y = body(cs, carry, x) for each x of xs, in order; returns
        (carry, [y, ...]).  Record mode: a plain Python loop."""
        ys = []
        for x in xs:
            carry, y = body(self, carry, x)
            ys.append(y)
        return carry, ys

    # -- result
    def finish(self, name: str) -> R1CS:
        """The R1CS: the stored fragments in order, then bellperson's input
        rows (A = 1·input_i); the coefficient table keeps the used ids in id
        order.  Consumes the fragments."""
        if self._rows is None:
            raise RuntimeError("Recorder.finish: this recording was already finished")
        stores, bits, self._rows, self._bits = self._rows, self._bits, None, None
        ni, na = self.num_inputs, self.num_aux
        one_id = self.coeffs.id(1)
        used = np.zeros(len(self.coeffs.values), bool)
        used[one_id] = True
        for store in stores:
            for f in store:
                used[f[2]] = True
        used = np.flatnonzero(used)
        remap = np.zeros(len(self.coeffs.values), np.int32)
        remap[used] = np.arange(used.size, dtype=np.int32)
        rows = self.num_constraints + ni
        mats = []
        for j, store in enumerate(stores):
            nnz = sum(f[1].size for f in store) + (ni if j == 0 else 0)
            indptr = np.empty(rows + 1, np.int64)
            cols = np.empty(nnz, np.int64)
            cids = np.empty(nnz, np.int32)
            indptr[0] = r = o = 0
            store.reverse()
            while store:                              # free each fragment once copied
                lengths, ids, c = store.pop()
                seg = indptr[r + 1:r + 1 + lengths.size]
                np.cumsum(lengths, dtype=np.int64, out=seg)
                seg += o
                _columns(ids, cols[o:o + ids.size], ni)
                np.take(remap, c, out=cids[o:o + ids.size])
                r, o = r + lengths.size, o + ids.size
                del lengths, ids, c, seg
            if j == 0:                                # input rows: A = 1·input_i
                indptr[r + 1:] = o + np.arange(1, ni + 1)
                cols[o:] = np.arange(ni)
                cids[o:] = remap[one_id]
            else:
                indptr[r + 1:] = o
            mats.append(CSR(indptr, cols, cids))
        bit_vars = np.zeros(ni + na, bool)
        for ids in bits:
            bit_vars[_columns(ids, np.empty(ids.size, np.int64), ni)] = True
        return R1CS(name, ni, na, self.num_constraints, *mats,
                    tuple(self.coeffs.values[i] for i in used.tolist()), bit_vars)


def record(circuit_fn: Callable, *static_args, name: str | None = None) -> R1CS:
    """Record ``circuit_fn(cs, None, *static_args)`` (shapes only) into an R1CS.
    ``name`` defaults to the function name and the static arguments."""
    cs = Recorder()
    circuit_fn(cs, None, *static_args)
    if name is None:
        name = circuit_fn.__name__ + "".join(f"-{a}" for a in static_args)
    return cs.finish(name)


# ---------------------------------------------------------------- witness mode
_R_LIMBS = np.asarray(to_limbs(Fr.R, Fr.L), np.uint32)   # Montgomery form of 1


def bits_to_fr(bits):
    """uint32 0/1 array (*shape) -> Fr array (8, *shape): 0 -> 0, 1 -> 1."""
    bits = jnp.asarray(bits)
    one = jnp.asarray(_R_LIMBS).reshape((Fr.L,) + (1,) * bits.ndim)
    return jnp.where(bits[None] != 0, one, jnp.uint32(0))


def _merge(blocks):
    """Consecutive allocation blocks [(bit, values)] -> one block (bit, values):
    bits stay bits if all are bits, else everything becomes Fr (8, n).
    None if there are none."""
    if not blocks:
        return None
    if all(bit for bit, _ in blocks):
        return True, jnp.concatenate([v for _, v in blocks])
    frs = [bits_to_fr(v) if bit else v for bit, v in blocks]
    return False, jnp.concatenate(frs, axis=-1)


class WitnessBuilder:
    """Witness mode (one instance, traced under vmap/jit): ``alloc`` computes
    and stores values, ``enforce`` does nothing."""
    recording = False

    def __init__(self):
        self._inputs = []
        self._aux = []

    def alloc(self, shape, value, *, where=None, bit=False, input=False):
        """Store the value of the masked elements of a tensor of variables
        (row-major) and return the whole value: ``uint32`` 0/1 of ``shape`` for
        bits, Fr ``(8, *shape)`` otherwise."""
        shape = tuple(int(s) for s in shape)
        v = jnp.asarray(value())
        want = shape if bit else (Fr.L,) + shape
        if v.shape != want:
            raise ValueError(f"alloc: the value has shape {v.shape}, expected {want} "
                             f"({'bits' if bit else 'Fr limbs'} of a {shape} tensor)")
        if bit:
            v = v.astype(jnp.uint32)
        elif v.dtype != jnp.uint32:
            raise ValueError(f"alloc: Fr values must be uint32 limbs, got {v.dtype}")
        flat = v.reshape(-1) if bit else v.reshape(Fr.L, -1)
        mask = None if where is None else np.broadcast_to(np.asarray(where, bool), shape)
        if mask is not None and not mask.all():
            idx = np.flatnonzero(mask)
            flat = flat[idx] if bit else flat[:, idx]
        (self._inputs if input else self._aux).append((bit, flat))
        return v

    def alloc_input(self, shape, value, *, where=None, bit=False):
        return self.alloc(shape, value, where=where, bit=bit, input=True)

    def enforce(self, abc, *, where=None):
        return None

    def loop(self, body: Callable, carry, xs):
        """carry, y = body(cs, carry, x) for each x of xs; returns (carry, ys).

        Steps run unrolled until the static structure repeats: once a step
        maps a carry to a carry of the same pytree structure (gadget values
        are leaves, their static parts such as Boolean kinds are the
        structure), the following steps whose x has the same structure as
        that step's allocate exactly what it did, and (two or more of them)
        run as ONE ``lax.scan``, a program of one step's size.  Scanned
        allocations are appended step by step, so the order is the unrolled
        one.  ``body`` must depend on nothing but (carry, x) and loop-invariant
        values."""
        xs = list(xs)
        ys, t = [], 0
        while t < len(xs):
            tree = jax.tree_util.tree_structure(carry)
            xtree = jax.tree_util.tree_structure(xs[t])
            carry, y = body(self, carry, xs[t])
            ys.append(y)
            t += 1
            if jax.tree_util.tree_structure(carry) != tree:
                continue
            m = 0
            while t + m < len(xs) and jax.tree_util.tree_structure(xs[t + m]) == xtree:
                m += 1
            if m >= 2:
                carry, more = self._scan(body, carry, xs[t:t + m])
                ys += more
                t += m
        return carry, ys

    def _scan(self, body, carry, xs):
        c_leaves, c_tree = jax.tree_util.tree_flatten(carry)
        x_tree = jax.tree_util.tree_structure(xs[0])
        x_leaves = [jax.tree_util.tree_leaves(x) for x in xs]
        stacked = [jnp.stack([jnp.asarray(xl[i]) for xl in x_leaves]) for i in range(len(x_leaves[0]))]
        meta = {}

        def step(c, x):
            sub = WitnessBuilder()
            c2, y = body(sub, jax.tree_util.tree_unflatten(c_tree, c),
                         jax.tree_util.tree_unflatten(x_tree, x))
            l2, t2 = jax.tree_util.tree_flatten(c2)
            if t2 != c_tree:
                raise RuntimeError("cs.loop: the scanned step changed the carry's structure")
            y_leaves, meta["y"] = jax.tree_util.tree_flatten(y)
            blocks = []
            for name, store in (("inputs", sub._inputs), ("aux", sub._aux)):
                meta[name] = _merge(store)
                blocks.append(None if meta[name] is None else meta[name][1])
            out = [jnp.asarray(v).astype(jnp.asarray(u).dtype) for v, u in zip(l2, c)]
            return out, (blocks, [jnp.asarray(v) for v in y_leaves])

        init = [jnp.asarray(v) for v in c_leaves]
        c_out, (blocks, ys) = jax.lax.scan(step, init, stacked, length=len(xs))
        for name, store, block in (("inputs", self._inputs, blocks[0]), ("aux", self._aux, blocks[1])):
            if block is not None:                 # step-major order
                bit = meta[name][0]
                store.append((bit, block.reshape(-1) if bit
                              else jnp.moveaxis(block, 1, 0).reshape(Fr.L, -1)))
        ys = [jax.tree_util.tree_unflatten(meta["y"], [v[i] for v in ys]) for i in range(len(xs))]
        return jax.tree_util.tree_unflatten(c_tree, c_out), ys

    def assemble(self):
        """The witness of this instance: Fr ``(8, num_inputs + num_aux)``;
        runs of consecutive bit blocks are converted at once."""
        blocks = [(True, jnp.ones((1,), jnp.uint32))] + self._inputs + self._aux
        out, run = [], []
        for bit, flat in blocks:
            if bit:
                run.append((bit, flat))
                continue
            if run:
                out.append(_merge(run)[1])
                run = []
            out.append(flat)
        if run:
            out.append(_merge(run)[1])
        return jnp.concatenate([bits_to_fr(v) if v.ndim == 1 else v for v in out], axis=-1)


def witness_fn(circuit_fn: Callable, *static_args, in_axes=0):
    """The jitted batch witness generator of a circuit: ``f(inputs) -> (w, out)``
    with ``w`` Fr ``(8, B, n_vars)`` and ``out`` the circuit's return value
    (a pytree of arrays, instance axis first).  ``in_axes`` says where each
    input leaf has its instance axis, as in ``jax.vmap`` (Fr arrays are
    limb-major: their instance axis is 1).  Cached per (circuit, static
    arguments, in_axes)."""
    leaves, tree = jax.tree_util.tree_flatten(in_axes, is_leaf=lambda x: x is None)
    return _witness_fn(circuit_fn, static_args, tuple(leaves), tree)


@functools.lru_cache(maxsize=64)
def _witness_fn(circuit_fn, static_args, axes_leaves, axes_tree):
    in_axes = jax.tree_util.tree_unflatten(axes_tree, axes_leaves)

    def one(inputs):
        cs = WitnessBuilder()
        out = circuit_fn(cs, inputs, *static_args)
        return cs.assemble(), out

    # the program is the circuit with its static arguments: the store's name says which
    module = getattr(circuit_fn, "__module__", "")
    name = (f"witness:{module}.{getattr(circuit_fn, '__qualname__', '<locals>')}"
            f"{static_args!r}:{in_axes!r}")
    fn = jax.vmap(one, in_axes=(in_axes,), out_axes=(1, 0))
    fn.__module__ = module                  # the circuit's source file is in the key
    return aot.program(fn, name=name)


def witness(circuit_fn: Callable, inputs, *static_args, in_axes=0):
    """Witness ``(8, B, n_vars)`` (Fr) of a batch of instances of a circuit."""
    return witness_fn(circuit_fn, *static_args, in_axes=in_axes)(inputs)[0]


def witness_with_outputs(circuit_fn: Callable, inputs, *static_args, in_axes=0):
    """(witness, the circuit's return value) of a batch of instances."""
    return witness_fn(circuit_fn, *static_args, in_axes=in_axes)(inputs)


# ---------------------------------------------------------------- reference checker
def _matvec(m: CSR, coeffs, w):
    """Row values of a sparse matrix times a vector of Python ints (object)."""
    rows = m.indptr.size - 1
    if m.cols.size == 0:
        return np.zeros(rows, dtype=object)
    terms = np.asarray(coeffs, dtype=object)[m.coeff_ids] * w[m.cols]
    lengths = np.diff(m.indptr)
    sums = np.zeros(rows, dtype=object)
    nz = lengths > 0
    sums[nz] = np.add.reduceat(terms, m.indptr[:-1][nz])
    return sums


def is_satisfied(r1cs: R1CS, w) -> tuple[bool, int | None]:
    """Reference check of one instance with Python integers (small circuits):
    ``w`` is a Fr witness ``(8, n_vars)`` or a sequence of canonical ints.
    Returns (all rows hold, index of the first failing row or None)."""
    arr = np.asarray(w)
    if arr.dtype == np.uint32:
        if arr.shape != (Fr.L, r1cs.num_vars):
            raise ValueError(f"is_satisfied: witness shape {arr.shape}, expected "
                             f"({Fr.L}, {r1cs.num_vars})")
        vals = np.asarray(Fr.to_int(arr), dtype=object)
    else:
        vals = np.asarray([int(x) for x in np.asarray(w, dtype=object).reshape(-1)], dtype=object)
        if vals.shape != (r1cs.num_vars,):
            raise ValueError(f"is_satisfied: {vals.size} values, expected {r1cs.num_vars}")
    if vals[0] != 1:
        raise ValueError(f"is_satisfied: w[0] (the constant ONE) is {vals[0]}, not 1")
    a, b, c = (_matvec(m, r1cs.coeffs, vals) for m in (r1cs.a, r1cs.b, r1cs.c))
    bad = np.flatnonzero([(x * y - z) % R_FR != 0 for x, y, z in zip(a, b, c)])
    return (bad.size == 0, None if bad.size == 0 else int(bad[0]))
