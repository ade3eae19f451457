"""circuits.cs (record / witness) and the gadgets boolean, uint32, num,
multipack, against independent references:

* values: Python integers (field arithmetic, sums of words, packing);
* constraint counts: scalar transliterations of bellperson's folding rules
  (boolean.rs, uint32.rs, multieq.rs, num.rs) written here per element, so the
  vectorised gadgets are checked against the sequential rules;
* satisfaction: ``is_satisfied`` evaluates every row with Python integers, and
  it must find the row when a witness value is corrupted.

Compile discipline: each witness circuit is compiled once, with the batch
size B (the instance axis) fixed per test.
"""
from __future__ import annotations

import itertools
import random

import jax.numpy as jnp
import numpy as np
import pytest

from circuits import cs as C
from circuits.gadgets import boolean as Bo
from circuits.gadgets import multipack as M
from circuits.gadgets import uint32 as U
from circuits.gadgets.num import Num
from ops.field import Fr
from tests.conftest import R

B = 4   # instances per witness batch


def fr_ints(w):
    """Fr array (8, *batch, n) -> object array (*batch, n)."""
    return np.asarray(Fr.to_int(np.asarray(w)), dtype=object)


def check_csr(r1cs):
    """Structure of the recorded matrices (CSR invariants, input rows)."""
    n = r1cs.num_vars
    assert r1cs.num_rows == r1cs.num_constraints + r1cs.num_inputs
    assert len(set(r1cs.coeffs)) == len(r1cs.coeffs)
    assert all(0 < c < R for c in r1cs.coeffs)
    for m in (r1cs.a, r1cs.b, r1cs.c):
        assert m.indptr.shape == (r1cs.num_rows + 1,) and m.indptr[0] == 0
        assert np.all(np.diff(m.indptr) >= 0) and m.indptr[-1] == m.cols.size == m.coeff_ids.size
        assert m.cols.size == 0 or (m.cols.min() >= 0 and m.cols.max() < n)
        assert m.coeff_ids.size == 0 or m.coeff_ids.max() < len(r1cs.coeffs)
        for i in range(r1cs.num_rows):            # strictly increasing columns per row
            assert np.all(np.diff(m.cols[m.indptr[i]:m.indptr[i + 1]]) > 0)
    # bellperson's input rows: A = 1·input_i, B = C = 0
    k = r1cs.num_inputs
    lo = r1cs.num_constraints
    a = r1cs.a
    assert np.array_equal(np.diff(a.indptr[lo:]), np.ones(k))
    assert np.array_equal(a.cols[a.indptr[lo]:], np.arange(k))
    assert all(r1cs.coeffs[c] == 1 for c in a.coeff_ids[a.indptr[lo]:])
    for m in (r1cs.b, r1cs.c):
        assert m.indptr[lo] == m.indptr[-1]


def run(circuit, inputs, *static, in_axes=0):
    """Record and witness one circuit; checks the structure, the agreement of
    the two interpretations and satisfaction of every instance."""
    r1cs = C.record(circuit, *static)
    check_csr(r1cs)
    w, out = C.witness_with_outputs(circuit, inputs, *static, in_axes=in_axes)
    w = np.asarray(w)
    assert w.shape == (8, B, r1cs.num_vars)
    vals = fr_ints(w)
    assert np.all(vals[:, 0] == 1)
    assert np.all((vals[:, r1cs.bit_vars] == 0) | (vals[:, r1cs.bit_vars] == 1))
    for i in range(B):
        assert C.is_satisfied(r1cs, w[:, i]) == (True, None)
    return r1cs, w, out


# ---------------------------------------------------------------- Boolean folding
KINDS = (Bo.CONST0, Bo.CONST1, Bo.IS, Bo.NOT)


def make_operand(cs, kinds, x: Bo.Bits) -> Bo.Bits:
    """Booleans of the given static kinds: constants, or the allocated bits x
    (Is) or their negation (Not)."""
    kinds = np.asarray(kinds, np.int8)
    if cs.recording:
        return Bo.Bits(kinds, np.where(kinds >= Bo.IS, x.var, C.NOVAR), None)
    value = jnp.where(jnp.asarray(kinds == Bo.NOT), 1 - x.value, x.value)
    value = jnp.where(jnp.asarray(kinds <= Bo.CONST1), jnp.asarray(kinds == Bo.CONST1, jnp.uint32),
                      value)
    return Bo.Bits(kinds, None, value.astype(jnp.uint32))


def bellperson_rows(op, ka, kb, kc=None) -> int:
    """Rows bellperson's Boolean gadget adds for operand kinds (scalar rules
    of boolean.rs, first match wins)."""
    const = lambda k: k in (Bo.CONST0, Bo.CONST1)
    and_rows = lambda x, y: 0 if const(x) or const(y) else 1
    if op in ("xor", "and"):
        return and_rows(ka, kb)
    neg = {Bo.CONST0: Bo.CONST1, Bo.CONST1: Bo.CONST0, Bo.IS: Bo.NOT, Bo.NOT: Bo.IS}
    if const(ka) and const(kb) and const(kc):
        return 0
    if op == "ch":
        if ka == Bo.CONST0:
            return 0
        if kb == Bo.CONST0:
            return and_rows(neg[ka], kc)
        if kc == Bo.CONST0:
            return and_rows(ka, kb)
        if kc == Bo.CONST1:
            return and_rows(ka, neg[kb])
        if kb == Bo.CONST1:
            return and_rows(neg[ka], neg[kc])
        return 1
    if ka == Bo.CONST0:
        return and_rows(kb, kc)
    if kb == Bo.CONST0:
        return and_rows(ka, kc)
    if kc == Bo.CONST0:
        return and_rows(ka, kb)
    if kc == Bo.CONST1:
        return and_rows(neg[ka], neg[kb])
    if kb == Bo.CONST1:
        return and_rows(neg[ka], neg[kc])
    if ka == Bo.CONST1:
        return and_rows(neg[kb], neg[kc])
    return 2


TRUTH = {"xor": lambda a, b, c: a ^ b, "and": lambda a, b, c: a & b,
         "ch": lambda a, b, c: (a & b) ^ ((1 - a) & c),
         "maj": lambda a, b, c: (a & b) ^ (a & c) ^ (b & c)}
COMBOS = np.array(list(itertools.product(KINDS, repeat=3)), np.int8)      # (64, 3)


def boolean_circuit(cs, x, op, combos):
    """Every combination of operand kinds, one element each; the three
    operands take their variables from allocated bits x (n, 3)."""
    combos = np.asarray(combos, np.int8)
    bits = Bo.alloc_bits(cs, combos.shape, lambda: x)
    a, b, c = (make_operand(cs, combos[:, j], bits[:, j]) for j in range(3))
    f = {"xor": lambda: Bo.xor(cs, a, b), "and": lambda: Bo.and_(cs, a, b),
         "ch": lambda: Bo.sha256_ch(cs, a, b, c), "maj": lambda: Bo.sha256_maj(cs, a, b, c)}[op]
    out = f()
    return out.value, a.value, b.value, c.value


@pytest.mark.parametrize("op", ["xor", "and", "ch", "maj"])
def test_boolean_folding_counts(op):
    """Per combination of operand kinds, the rows equal bellperson's rules."""
    for combo in COMBOS:
        r1cs = C.record(boolean_circuit, op, (tuple(combo),))
        want = bellperson_rows(op, *combo)
        assert r1cs.num_constraints - 3 == want, (op, combo)
        assert r1cs.num_aux - 3 == want


@pytest.mark.parametrize("op", ["xor", "and", "ch", "maj"])
def test_boolean_values_and_satisfaction(op):
    rng = np.random.default_rng(7)
    combos = tuple(map(tuple, COMBOS))
    x = jnp.asarray(rng.integers(0, 2, (B,) + COMBOS.shape), jnp.uint32)
    r1cs, w, (out, a, b, c) = run(boolean_circuit, x, op, combos)
    want = TRUTH[op](*(np.asarray(v) for v in (a, b, c)))
    assert np.array_equal(np.asarray(out), want)
    # the ONE-row checker finds a corrupted result variable
    if r1cs.num_aux > 3 * COMBOS.shape[0]:
        vals = fr_ints(w)[0].copy()
        col = r1cs.num_vars - 1                    # the last allocated result
        vals[col] = (vals[col] + 1) % R
        ok, row = C.is_satisfied(r1cs, vals)
        assert not ok
        lo, hi = r1cs.a.indptr[row], r1cs.a.indptr[row + 1]
        touched = set(r1cs.a.cols[lo:hi]) | set(r1cs.b.cols[r1cs.b.indptr[row]:r1cs.b.indptr[row + 1]]) \
            | set(r1cs.c.cols[r1cs.c.indptr[row]:r1cs.c.indptr[row + 1]])
        assert col in touched


def test_xor_row_merges_repeated_variable():
    """bellperson's xor row A = a + a is one term 2·a after LC merging."""
    def circ(cs, _):
        x = Bo.alloc_bits(cs, (2,))
        Bo.xor(cs, x[0], x[1])
    r1cs = C.record(circ)
    row = 2
    lo, hi = r1cs.a.indptr[row], r1cs.a.indptr[row + 1]
    assert hi - lo == 1 and r1cs.coeffs[r1cs.a.coeff_ids[lo]] == 2
    # C = a + b - r
    lo, hi = r1cs.c.indptr[row], r1cs.c.indptr[row + 1]
    assert [r1cs.coeffs[i] for i in r1cs.c.coeff_ids[lo:hi]] == [1, 1, R - 1]


def test_record_is_batch_independent():
    """A gadget over (k, 32) bits allocates k·32 variables and rows."""
    def circ(cs, _, k):
        x = Bo.alloc_bits(cs, (k, 2, 32))
        Bo.xor(cs, x[:, 0], x[:, 1])
    for k in (1, 3, 1000):
        r1cs = C.record(circ, k)
        assert r1cs.num_constraints == k * 96 and r1cs.num_aux == k * 96
        assert r1cs.bit_vars.sum() == k * 96


# ---------------------------------------------------------------- uint32 / MultiEq
ADD_N = (2, 3, 5, 10, 10, 10, 10, 10, 10, 10)


def multieq_rows(bit_counts) -> int:
    """multieq.rs: start a new row when bits_used + n >= 254; flush at the end."""
    rows, used = 0, 0
    for n in bit_counts:
        if 254 <= used + n:
            rows, used = rows + 1, 0
        used += n
    return rows + (used > 0)


def addmany_circuit(cs, words):
    """addmany over the operand counts ADD_N (one MultiEq), plus one sum of
    constants (folded)."""
    ws = U.alloc_words(cs, (sum(ADD_N),), lambda: words)
    outs, i = [], 0
    with U.MultiEq(cs) as meq:
        for n in ADD_N:
            outs.append(U.addmany(cs, meq, [ws[i + j] for j in range(n)]))
            i += n
        k = U.addmany(cs, meq, [U.constant_words(cs, 0xFFFFFFFF), U.constant_words(cs, 5)])
    assert k.is_constant.all()
    return [U.word_value(o) for o in outs] + [U.word_value(k)]


def test_addmany_values_and_counts():
    rng = np.random.default_rng(3)
    words = rng.integers(0, 2**32, (B, sum(ADD_N)), dtype=np.uint64)
    words[0] = 0xFFFFFFFF                                    # maximal carries
    bits = (words[..., None] >> np.arange(32, dtype=np.uint64)) & 1
    r1cs, w, outs = run(addmany_circuit, jnp.asarray(bits, jnp.uint32))
    i = 0
    for n, o in zip(ADD_N, outs):
        want = words[:, i:i + n].astype(object).sum(1) % 2**32
        assert list(np.asarray(o).astype(object)) == list(want)
        i += n
    assert list(np.asarray(outs[-1])) == [4] * B
    nbits = [(n * (2**32 - 1)).bit_length() for n in ADD_N]
    assert nbits[:4] == [33, 34, 35, 36]
    inputs = 32 * sum(ADD_N)
    assert r1cs.num_constraints == inputs + sum(nbits) + multieq_rows(nbits)
    assert multieq_rows(nbits) == 2


def test_uint32_rotations_and_shift():
    """rotr/shr are free index moves; checked on constants against ints."""
    cs = C.Recorder()
    v = 0x80000001
    w = U.constant_words(cs, v)
    val = lambda x: int(sum(int(b) << i for i, b in enumerate(x.constant_value())))
    assert val(U.rotr(w, 7)) == ((v >> 7) | (v << 25)) & 0xFFFFFFFF
    assert val(U.shr(cs, w, 3)) == v >> 3
    assert val(U.from_bits_be(U.into_bits_be(w))) == v
    assert cs.num_constraints == 0 and cs.num_aux == 0


# ---------------------------------------------------------------- AllocatedNum
def strict_rows() -> int:
    """Rows of to_bits_le_strict for Fr, by num.rs's walk over r - 1."""
    rows, run, last = 0, 0, False
    for pos in range(254, -1, -1):
        if ((R - 1) >> pos) & 1:
            rows += 1
            run += 1
            continue
        if run:
            rows += run + last - 1            # the k-ary AND of the run (+ last run)
            run, last = 0, True
        rows += 1
    return rows + 1                           # the unpacking row


def num_circuit(cs, inp):
    a = Num.alloc(cs, (3,), lambda: inp[0])
    b = Num.alloc(cs, (3,), lambda: inp[1])
    prod, sq, total = a.mul(cs, b), a.square(cs), a.add(cs, b)
    public = total.inputize(cs)
    bits = a.to_bits_le(cs)
    strict = b.to_bits_le_strict(cs)
    return prod.value, sq.value, total.value, public.value, bits.value, strict.value


def test_num_against_python_ints():
    rng = random.Random(11)
    A = [[rng.randrange(R) for _ in range(3)] for _ in range(B)]
    Bv = [[0, 1, R - 1], [2**254, rng.randrange(R), 5], [R - 2, 2**128, 7],
          [rng.randrange(R) for _ in range(3)]]
    inp = (jnp.asarray(Fr.from_int(A)), jnp.asarray(Fr.from_int(Bv)))
    r1cs, w, (prod, sq, total, public, bits, strict) = run(num_circuit, inp, in_axes=1)
    def got(x):       # outputs are (B, 8, 3): instance axis first
        return [list(map(int, r)) for r in Fr.to_int(np.moveaxis(np.asarray(x), 0, 1))]
    assert got(prod) == [[x * y % R for x, y in zip(a, b)] for a, b in zip(A, Bv)]
    assert got(sq) == [[x * x % R for x in a] for a in A]
    assert got(total) == [[(x + y) % R for x, y in zip(a, b)] for a, b in zip(A, Bv)]
    assert got(public) == got(total)
    vals = fr_ints(w)
    assert [list(v[1:4]) for v in vals] == got(total)       # the public inputs' columns
    for i in range(B):
        for j in range(3):
            assert sum(int(v) << k for k, v in enumerate(np.asarray(bits)[i, j])) == A[i][j]
            assert sum(int(v) << k for k, v in enumerate(np.asarray(strict)[i, j])) == Bv[i][j]
    assert r1cs.num_inputs == 4
    assert r1cs.num_constraints == 3 * (1 + 1 + 1 + 1 + 256 + strict_rows())
    assert r1cs.bit_vars.sum() == 3 * (255 + strict_rows() - 1)


def test_non_strict_bits_alias():
    """to_bits_le is not strict: the bits of x + r also satisfy it when
    x + r < 2^255 (the checker must accept them), while a corrupted bit
    fails at its boolean row."""
    def circ(cs, inp):
        Num.alloc(cs, (), lambda: inp).to_bits_le(cs)
    x = 5
    r1cs = C.record(circ)
    w = C.witness(circ, jnp.asarray(Fr.from_int([x] * B)), in_axes=1)
    vals = fr_ints(w)[0].copy()
    assert C.is_satisfied(r1cs, vals) == (True, None)
    alias = x + R
    vals[2:257] = [(alias >> i) & 1 for i in range(255)]
    assert C.is_satisfied(r1cs, vals) == (True, None)
    vals[2 + 3] = 2
    assert C.is_satisfied(r1cs, vals) == (False, 3)


def test_corrupted_product_is_found():
    """(inputs as a dict, with a dict of instance axes)"""
    def circ(cs, inp):
        a = Num.alloc(cs, (2,), lambda: inp["a"])
        a[0].mul(cs, a[1])
    r1cs = C.record(circ)
    w = C.witness(circ, {"a": jnp.asarray(Fr.from_int([[3, 4]] * B))}, in_axes={"a": 1})
    vals = fr_ints(w)[0].copy()
    assert list(vals) == [1, 3, 4, 12]
    vals[3] = 13
    assert C.is_satisfied(r1cs, vals) == (False, 0)


# ---------------------------------------------------------------- multipack
NBITS = (300, 511, 254)


def pack_circuit(cs, bits):
    parts, i = [], 0
    x = Bo.alloc_bits(cs, (sum(NBITS),), lambda: bits)
    for n in NBITS:
        parts.append(M.pack_into_inputs(cs, x[i:i + n]).value)
        i += n
    return parts + [M.pack_bits(cs, x[:NBITS[0]]).value]


def test_pack_into_inputs_against_ints():
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2, (B, sum(NBITS))).astype(np.uint32)
    r1cs, w, outs = run(pack_circuit, jnp.asarray(bits))
    chunks = [-(-n // 254) for n in NBITS]
    assert r1cs.num_inputs == 1 + sum(chunks)
    assert r1cs.num_constraints == sum(NBITS) + sum(chunks) + 1
    vals = fr_ints(w)
    for i in range(B):
        want, off = [], 0
        for n in NBITS:
            seq = [int(b) for b in bits[i, off:off + n]]
            ints = [sum(b << k for k, b in enumerate(seq[j:j + 254])) for j in range(0, n, 254)]
            assert M.compute_multipacking(seq) == ints
            want += ints
            off += n
        assert list(vals[i, 1:r1cs.num_inputs]) == want
        assert Fr.to_int(np.asarray(outs[-1])[i]) == want[0]
    batch = M.compute_multipacking(bits[:, :NBITS[0]])
    assert batch.shape == (B, 2)
    assert [list(row) for row in batch] == [list(v[1:3]) for v in vals]


def test_bytes_to_bits():
    data = bytes([0x80, 0x01, 0xA5])
    assert list(M.bytes_to_bits(data)) == list(np.unpackbits(np.frombuffer(data, np.uint8)))
    assert list(M.bytes_to_bits_le(data)) == list(
        np.unpackbits(np.frombuffer(data, np.uint8), bitorder="little"))
    arr = np.frombuffer(data, np.uint8).reshape(1, 3)
    assert np.array_equal(np.asarray(M.bytes_to_bits(jnp.asarray(arr))), M.bytes_to_bits(arr))


# ---------------------------------------------------------------- cs.loop and errors
def loop_circuit(cs, bits, scanned):
    """A chain of xor and addmany steps, as a cs.loop or a Python loop."""
    x = U.alloc_words(cs, (12,), lambda: bits)
    with U.MultiEq(cs) as meq:
        def step(cs, carry, w):
            s = U.addmany(cs, meq, [carry, Bo.xor(cs, U.rotr(carry, 3), w)])
            return s, U.word_value(s)
        if scanned:
            acc, ys = cs.loop(step, x[0], [x[i] for i in range(1, 12)])
        else:
            acc, ys = x[0], []
            for i in range(1, 12):
                acc, y = step(cs, acc, x[i])
                ys.append(y)
    return ys


def test_loop_scan_equals_unrolled():
    rng = np.random.default_rng(9)
    bits = jnp.asarray(rng.integers(0, 2, (B, 12, 32)), jnp.uint32)
    r_scan = C.record(loop_circuit, True)
    r_unrolled = C.record(loop_circuit, False)
    for f in ("num_inputs", "num_aux", "num_constraints", "coeffs"):
        assert getattr(r_scan, f) == getattr(r_unrolled, f)
    for m1, m2 in zip(r_scan[4:7], r_unrolled[4:7]):
        assert all(np.array_equal(x, y) for x, y in zip(m1, m2))
    w1, y1 = C.witness_with_outputs(loop_circuit, bits, True)
    w2, y2 = C.witness_with_outputs(loop_circuit, bits, False)
    assert np.array_equal(np.asarray(w1), np.asarray(w2))
    assert all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(y1, y2))
    assert C.is_satisfied(r_scan, np.asarray(w1)[:, 0]) == (True, None)
    words = [int(sum(int(b) << i for i, b in enumerate(np.asarray(bits)[0, j]))) for j in range(12)]
    acc = words[0]
    for j in range(1, 12):
        rot = ((acc >> 3) | (acc << 29)) & 0xFFFFFFFF
        acc = (acc + (rot ^ words[j])) & 0xFFFFFFFF
        assert int(np.asarray(y1[j - 1])[0]) == acc


def test_errors():
    with pytest.raises(ValueError, match="expected"):
        C.witness(lambda cs, x: cs.alloc((3,), lambda: x, bit=True), jnp.zeros((B, 2), jnp.uint32))
    def circ(cs, _):
        Num.alloc(cs, (1,))
    r1cs = C.record(circ)
    with pytest.raises(ValueError, match="shape"):
        C.is_satisfied(r1cs, np.zeros((8, 5), np.uint32))
    with pytest.raises(ValueError, match="ONE"):
        C.is_satisfied(r1cs, [0, 0])
    with pytest.raises(ValueError, match="2..10"):
        U.addmany(C.Recorder(), None, [U.constant_words(C.Recorder(), 1)])
    cs = C.Recorder()
    x = Bo.alloc_bits(cs, (2,))
    masked = cs.alloc((2,), where=np.array([True, False]))
    with pytest.raises(ValueError, match="unallocated"):
        cs.enforce(lambda: (cs.lc(masked), cs.lc(x.var), cs.lc(x.var)))
