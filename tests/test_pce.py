"""jaxprove.pce and ops.spmv against an independent reference: every row of
A·w, B·w, C·w recomputed with Python integers mod r from the R1CS's own CSR
lists; the satisfaction check against a witness built to satisfy (then
broken); persistence by restoring and comparing every array.

Sizes are tiny and the widths and chunk sizes forced small (long rows cut
into many pieces; in the all-CSR layout many chunks, rows split across
chunks, the general-coefficient slots full), so the CPU run exercises every
path of the evaluation; the fixed-width (ELL) rows are checked against the
rows they came from, in several widths, against Python ints and as the
Pallas kernel body, and so are the sums of the pieces.
"""
from __future__ import annotations

import functools
import json
import os
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from circuits import cs
from circuits.cs import CSR, R1CS
from conftest import R
from jaxprove import pce, store
from ops import spmv
from ops.field import Fr

# Narrow ELL rows and pieces: every part carries many entries, long rows in many
# pieces; small chunks for the all-CSR layout (rows split across chunks).
SMALL = dict(slots=16, gen_slots=8, block_rows=8, max_terms=6, ell_width=(2, 1),
             piece_width=(1, 1))


# ---------------------------------------------------------------- builders (Python ints)
def csr_from_rows(rows, table):
    """rows: list of [(col, coeff int)] -> CSR over the coefficient table
    (dict coeff -> id, extended as needed)."""
    indptr, cols, ids = [0], [], []
    for row in rows:
        for col, k in row:
            cols.append(col)
            ids.append(table.setdefault(k, len(table)))
        indptr.append(len(cols))
    return CSR(np.array(indptr, np.int64), np.array(cols, np.int64), np.array(ids, np.int32))


def make_r1cs(name, num_inputs, num_aux, rows_abc, bits=None):
    """R1CS from gadget rows (three lists of [(col, coeff)]), appending
    bellperson's input rows (A = 1·input_i, B = C = 0)."""
    k = num_inputs
    a, b, c = (list(r) for r in rows_abc)
    a += [[(i, 1)] for i in range(k)]
    b += [[] for _ in range(k)]
    c += [[] for _ in range(k)]
    table = {}
    csrs = [csr_from_rows(r, table) for r in (a, b, c)]
    coeffs = tuple(sorted(table, key=table.get))
    if bits is None:
        bits = np.zeros(num_inputs + num_aux, bool)
    return R1CS(name, num_inputs, num_aux, len(rows_abc[0]), *csrs, coeffs, bits)


def random_coeff(rng):
    return rng.choice([1, 1, 1, 1, R - 1, R - 1, 2, 3, R - 2, 0, rng.randrange(R)])


def random_rows(rng, n_rows, n_vars):
    """Random sparse rows: empty rows, short rows, long rows (beyond
    SMALL's max_terms and slots), duplicate columns, all coefficient kinds."""
    rows = []
    for _ in range(n_rows):
        length = rng.choice([0, 0, 1, 1, 2, 3, 4, 7, 13, 40])
        rows.append([(rng.randrange(n_vars), random_coeff(rng)) for _ in range(length)])
    return rows


def random_r1cs(seed, num_inputs=3, num_aux=40, num_constraints=50):
    rng = random.Random(seed)
    n = num_inputs + num_aux
    abc = [random_rows(rng, num_constraints, n) for _ in range(3)]
    for rows in abc:                 # a run of empty rows longer than SMALL's block_rows
        rows[20:32] = [[] for _ in range(12)]
    bits = np.array([rng.random() < 0.3 for _ in range(n)])
    return make_r1cs(f"random/{seed}", num_inputs, num_aux, abc, bits)


def rows_of(csr, coeffs):
    ip = csr.indptr
    return [[(int(csr.cols[j]), coeffs[csr.coeff_ids[j]]) for j in range(ip[r], ip[r + 1])]
            for r in range(len(ip) - 1)]


def reference(r1cs, ws):
    """A·w, B·w, C·w with Python ints for each witness (list of int lists)."""
    out = []
    for mat in (r1cs.a, r1cs.b, r1cs.c):
        rows = rows_of(mat, r1cs.coeffs)
        out.append([[sum(k * w[col] for col, k in row) % R for row in rows] for w in ws])
    return out


def random_witnesses(rng, n_inst, n_vars):
    ws = [[rng.randrange(R) for _ in range(n_vars)] for _ in range(n_inst)]
    for w in ws:
        w[0] = 1
        if n_vars > 2:               # edge values
            w[1], w[2] = R - 1, 0
    return ws


def to_device(ws, batch):
    return jnp.asarray(Fr.from_int(ws)).reshape((8,) + batch + (len(ws[0]),))


@pytest.fixture(scope="module")
def small():
    r1cs = random_r1cs(1)
    return r1cs, pce.extract(r1cs, **SMALL)


# ---------------------------------------------------------------- extraction
def test_extract_layout_and_metadata(small):
    r1cs, m = small
    k, aux = r1cs.num_inputs, r1cs.num_aux
    assert (m.num_inputs, m.num_aux, m.num_constraints, m.rows) == (k, aux, 50, 53)
    for x in (m.a, m.b):                    # long rows of several pieces, no chunks
        runs = np.diff(np.append(np.asarray(x.piece_start), x.pieces))
        assert x.chunks == 0 and runs.min() >= 1 and runs.max() > 3
    chunked = pce.extract(r1cs, **dict(SMALL, ell_width=(0, 0)))
    assert chunked.a.chunks > 5 and chunked.b.chunks > 5 and np.asarray(chunked.a.cont).any()
    one, minus = r1cs.coeffs.index(1), r1cs.coeffs.index(R - 1)
    for name, mat, blocked in [(f"{name}/{layout}", mat, getattr(mm, name))
                               for layout, mm in (("ell", m), ("csr", chunked))
                               for name, mat in (("a", r1cs.a), ("b", r1cs.b), ("c", r1cs.c))]:
        want = [sorted((c, r1cs.coeffs.index(x)) for c, x in row)
                for row in rows_of(mat, r1cs.coeffs)]
        indptr, cols, ids = spmv.to_csr(blocked, one, minus)
        got = [list(zip(cols[indptr[r]:indptr[r + 1]].tolist(), ids[indptr[r]:indptr[r + 1]].tolist()))
               for r in range(m.rows)]
        assert got == want, name
        assert blocked.nnz == sum(map(len, want))
        if not blocked.chunks:
            continue
        ids = np.concatenate([np.asarray(blocked.gen_seg), np.asarray(blocked.seg)], axis=1)
        assert np.all(np.diff(ids, axis=1) >= 0), name        # sorted segment ids per chunk
        live = np.concatenate([np.asarray(blocked.gen_cols), np.asarray(blocked.cols)], 1) < m.num_vars
        R_ = blocked.block_rows
        per_row = [np.bincount(ids[q][live[q]] % R_, minlength=R_) for q in range(blocked.chunks)]
        assert max(x.max() for x in per_row) == SMALL["max_terms"], name   # the headroom bound
    assert Fr.to_int(m.coeffs).tolist() == list(r1cs.coeffs)
    used = lambda mat: {c for row in rows_of(mat, r1cs.coeffs) for c, _ in row}
    ua, ub = used(r1cs.a), used(r1cs.b)
    assert np.asarray(m.a_aux_density).tolist() == [k + j in ua for j in range(aux)]
    assert np.asarray(m.b_input_density).tolist() == [i in ub for i in range(k)]
    assert np.asarray(m.b_aux_density).tolist() == [k + j in ub for j in range(aux)]
    assert np.array_equal(np.asarray(m.bit_vars), r1cs.bit_vars)
    assert m.key == pce.cache_key(r1cs.name, m.shapes) and m.key.startswith("random-1-pce")
    assert m.nbytes == sum(np.asarray(x).nbytes for x in pce._flat(m).values())


def test_cache_key_tracks_name_version_and_shapes():
    k = pce.cache_key("porep 32GiB/partition 3", (328, 10, 20))
    assert k.startswith(f"porep-32GiB-partition-3-pce{pce.VERSION}-")
    assert k == pce.cache_key("porep 32GiB/partition 3", (328, 10, 20))
    others = {pce.cache_key("porep 32GiB/partition 3", (328, 10, 21)),
              pce.cache_key("porep 32GiB/partition 4", (328, 10, 20)),
              pce.cache_key("porep 32GiB/partition 3")}
    assert k not in others and len(others) == 3


def _broken(r1cs, what):
    k = r1cs.num_inputs
    if what == "coeff range":
        return r1cs._replace(coeffs=r1cs.coeffs[:-1] + (R,))
    if what == "duplicate coeffs":
        return r1cs._replace(coeffs=r1cs.coeffs[:-1] + (r1cs.coeffs[0],))
    if what == "column range":
        cols = r1cs.b.cols.copy()
        cols[0] = k + r1cs.num_aux
        return r1cs._replace(b=r1cs.b._replace(cols=cols))
    if what == "indptr length":
        return r1cs._replace(c=r1cs.c._replace(indptr=r1cs.c.indptr[:-1]))
    if what == "input rows":
        return r1cs._replace(num_constraints=r1cs.num_constraints - 1, num_inputs=k + 1,
                             num_aux=r1cs.num_aux - 1)
    if what == "bit_vars":
        return r1cs._replace(bit_vars=r1cs.bit_vars[:-1])
    raise AssertionError(what)


@pytest.mark.parametrize("what, message", [
    ("coeff range", "coefficient"), ("duplicate coeffs", "duplicates"), ("column range", "b.cols"),
    ("indptr length", "c.indptr"), ("input rows", "input rows"), ("bit_vars", "bit_vars")])
def test_extract_rejects_bad_input(small, what, message):
    with pytest.raises(ValueError, match=message):
        pce.extract(_broken(small[0], what))


# ---------------------------------------------------------------- evaluation
def test_evaluate_matches_python_ints(small):
    r1cs, m = small
    rows = [row for mat in (r1cs.a, r1cs.b, r1cs.c) for row in rows_of(mat, r1cs.coeffs)]
    assert any(len({c for c, _ in row}) < len(row) for row in rows)        # duplicate columns
    assert any(not row for row in rows) and max(map(len, rows)) > SMALL["slots"]
    assert {0, 1, 2, R - 1} <= {x for row in rows for _, x in row}
    rng = random.Random(2)
    ws = random_witnesses(rng, 6, m.num_vars)
    a, b, c = pce.evaluate(m, to_device(ws, (2, 3)))
    assert a.shape == b.shape == c.shape == (8, 2, 3, m.rows)
    want = reference(r1cs, ws)
    for got, exp in zip((a, b, c), want):
        assert Fr.to_int(got).reshape(6, m.rows).tolist() == exp


def test_evaluate_larger_circuit_default_sizing():
    """A few thousand rows with the automatic sizing (ELL widths from the
    row-length histogram, ``target`` entries per overflow chunk) instead of
    SMALL; every row checked."""
    r1cs = random_r1cs(7, num_inputs=5, num_aux=1500, num_constraints=3000)
    m = pce.extract(r1cs, target=2048)
    assert all(min(x.ell_width) > 0 and x.pieces > x.long_rows.shape[0] > 0
               for x in (m.a, m.b, m.c))                   # some long row of several pieces
    ws = random_witnesses(random.Random(8), 2, m.num_vars)
    outs = pce.evaluate(m, to_device(ws, (2,)))
    for got, exp in zip(outs, reference(r1cs, ws)):
        assert Fr.to_int(got).tolist() == exp


def test_evaluate_rejects_bad_witness(small):
    _, m = small
    with pytest.raises(ValueError, match="witness"):
        pce.evaluate(m, jnp.zeros((8, 2, m.num_vars + 1), jnp.uint32))
    with pytest.raises(ValueError, match="witness"):
        pce.evaluate(m, jnp.zeros((8, 2, m.num_vars), jnp.int32))


def test_lazy_sums_at_the_headroom_limit():
    """Rows of exactly MAX_TERMS terms near r (r−1, r−2, 5·(r−1) = r−5)
    under +1, under −1, and under a general coefficient mixed with +1 (the
    most terms one accumulator may take), and a longer row (cut into pieces
    and carried across chunks); default chunk sizes, every entry in the
    chunks (no ELL part)."""
    n = 3
    big = spmv.MAX_TERMS
    rows = [[(1, 1)] * big, [(1, R - 1)] * big, [(1, 1), (2, R - 1)] * (big // 2 + 700),
            [(1, 5)] * (big // 2) + [(2, 1)] * (big // 2)]
    r1cs = make_r1cs("headroom", 1, n - 1, (rows, [[]] * 4, [[]] * 4))
    m = pce.extract(r1cs, ell_width=(0, 0))
    assert m.a.chunks == 2 and np.asarray(m.a.cont).tolist() == [False, True]
    ws = [[1, R - 1, R - 2]]
    a, _, _ = pce.evaluate(m, to_device(ws, (1,)))
    assert Fr.to_int(a).reshape(-1).tolist() == reference(r1cs, ws)[0][0]


@pytest.mark.parametrize("interpret", [False, True], ids=["default", "pallas-interpret"])
def test_row_reduction_kernel(interpret):
    """The per-row kernel, on the default path and as the Pallas (GPU) kernel
    body in interpret mode: raw limbs (xp + tp·2^254) − (xn + tn·2^254) mod r
    for canonical xp, xn (< r) and t < 2^18, against Python ints."""
    from ops.elementwise import KernelConfig, elementwise
    from ops.limbs import to_limbs
    rng = random.Random(6)
    n = 64
    xs = [[rng.randrange(1 << 254) for _ in range(n)] for _ in range(2)]
    ts = [[rng.randrange(1 << 18) for _ in range(n)] for _ in range(2)]
    for v in xs:
        v[:3] = [0, (1 << 254) - 1, R - 1]
    for v in ts:
        v[:3] = [0, (1 << 18) - 1, 1]
    raw = lambda v: jnp.asarray(np.array([to_limbs(x, 8) for x in v], np.uint32).T)
    cfg = KernelConfig(interpret=True) if interpret else Fr.config
    kernel = elementwise(spmv._reduce_formula, [(8,)] * 4, [((8,), jnp.uint32)], Fr.arith, cfg)
    got = Fr._raw_int(np.asarray(kernel(raw(xs[0]), raw(ts[0]), raw(xs[1]), raw(ts[1]))))
    want = [(xp + tp * 2**254 - xn - tn * 2**254) % R
            for xp, tp, xn, tn in zip(xs[0], ts[0], xs[1], ts[1])]
    assert got.tolist() == want


# ---------------------------------------------------------------- satisfaction
def satisfiable(seed, num_inputs=2, free=12, num_constraints=30):
    """Row i: (random A row)·(random B row) = 3·z_i − (random terms), over
    free variables x and one dedicated aux variable z_i per row; returns the
    R1CS and a function witness(rng) that satisfies it."""
    rng = random.Random(seed)
    k = num_inputs
    nx = k + free                               # ONE, inputs, free aux
    A = [random_rows(rng, 1, nx)[0] for _ in range(num_constraints)]
    B = [random_rows(rng, 1, nx)[0] for _ in range(num_constraints)]
    extra = [random_rows(rng, 1, nx)[0][:3] for _ in range(num_constraints)]
    C = [[(nx + i, 3)] + [(col, (R - x) % R) for col, x in e] for i, e in enumerate(extra)]
    r1cs = make_r1cs(f"sat/{seed}", k, free + num_constraints, (A, B, C))

    def witness(rng):
        w = [1] + [rng.randrange(R) for _ in range(nx - 1)]
        ev = lambda row: sum(x * w[c] for c, x in row) % R
        inv3 = pow(3, -1, R)
        return w + [(ev(a) * ev(b) + ev(e)) * inv3 % R for a, b, e in zip(A, B, extra)]

    return r1cs, witness, nx


def test_is_satisfied_finds_the_first_broken_row():
    r1cs, witness, nx = satisfiable(3)
    m = pce.extract(r1cs, **SMALL)
    rng = random.Random(4)
    ws = [witness(rng) for _ in range(3)]
    ws[1][nx + 17] = (ws[1][nx + 17] + 1) % R           # breaks row 17 only
    ws[2][nx + 21] = (ws[2][nx + 21] + 5) % R           # rows 9 and 21
    ws[2][nx + 9] = 0
    ok, first = pce.is_satisfied(m, to_device(ws, (3,)))
    assert np.asarray(ok).tolist() == [True, False, False]
    assert np.asarray(first).tolist() == [-1, 17, 9]
    a, b, c = reference(r1cs, ws)
    bad = [[r for r in range(m.rows) if a[i][r] * b[i][r] % R != c[i][r]] for i in range(3)]
    assert bad == [[], [17], [9, 21]]


NBITS = 8


def cubic_and_bits(c, inputs):
    """A small circuits.cs circuit: y = x³ + x + 5 (y public), and NBITS
    boolean-constrained bits packed into one variable (coefficients 2^i,
    and 1 − b in B)."""
    x = c.alloc((), lambda: inputs[0])
    x2 = c.alloc((), lambda: Fr.mul(x, x))
    x3 = c.alloc((), lambda: Fr.mul(x2, x))
    y = c.alloc_input((), lambda: Fr.add(Fr.add(x3, x), Fr.constant(5)))
    c.enforce(lambda: (c.lc(x), c.lc(x), c.lc(x2)))
    c.enforce(lambda: (c.lc(x2), c.lc(x), c.lc(x3)))
    c.enforce(lambda: (c.lc(x3) + c.lc(x) + c.lc(cs.ONE, 5), c.lc(cs.ONE), c.lc(y)))
    bits = c.alloc((NBITS,), lambda: inputs[1], bit=True)
    c.enforce(lambda: (c.lc(bits), c.lc(cs.ONE) - c.lc(bits), c.zero_lc((NBITS,))))
    weights = [1 << i for i in range(NBITS)]

    def packed_value():
        fr = cs.bits_to_fr(bits)
        acc = fr[:, 0]
        for i in range(1, NBITS):
            acc = Fr.add(acc, Fr.mul(fr[:, i], Fr.constant(weights[i])))
        return acc

    packed = c.alloc((), packed_value)
    c.enforce(lambda: (c.lc(bits, weights).sum(), c.lc(cs.ONE), c.lc(packed)))


def test_recorded_circuit_and_its_witness():
    """circuits.cs record + witness against cs's own Python-int checker."""
    r1cs = cs.record(cubic_and_bits)
    m = pce.extract(r1cs, **SMALL)
    rng = random.Random(5)
    xs = [rng.randrange(R) for _ in range(3)]
    bits = np.array([[rng.randrange(2) for _ in range(NBITS)] for _ in range(3)], np.uint32)
    w = cs.witness(cubic_and_bits, (jnp.asarray(Fr.from_int(xs)), jnp.asarray(bits)),
                   in_axes=(1, 0))
    bad = w.at[:, 2, m.num_inputs + 2].set(jnp.asarray(Fr.from_int(7)))   # x3 := 7 in instance 2
    ok, first = pce.is_satisfied(m, bad)
    assert np.asarray(ok).tolist() == [True, True, False]
    want = [cs.is_satisfied(r1cs, np.asarray(bad[:, i])) for i in range(3)]
    assert [r[0] for r in want] == [True, True, False]
    assert int(first[2]) == want[2][1] == 1
    a, b, c = pce.evaluate(m, w[:, 0])                     # one instance, no batch axes
    assert a.shape == (8, m.rows)
    assert [Fr.to_int(x).tolist() for x in (a, b, c)] == [r[0] for r in reference(r1cs, [
        Fr.to_int(np.asarray(w[:, 0])).tolist()])]
    assert np.asarray(m.bit_vars).sum() == NBITS


# ---------------------------------------------------------------- persistence
def assert_same(m1, m2):
    f1, f2 = pce._flat(m1), pce._flat(m2)
    assert f1.keys() == f2.keys()
    for k in f1:
        assert f1[k].dtype == f2[k].dtype and f1[k].shape == f2[k].shape, k
        assert np.array_equal(np.asarray(f1[k]), np.asarray(f2[k])), k
    assert pce._static(m1) == pce._static(m2)


def test_save_load_round_trip(small, tmp_path):
    _, m = small
    path = pce.save(m, str(tmp_path))
    assert os.path.basename(path) == m.key
    got = pce.load(str(tmp_path), m.key)
    assert got is not None
    assert_same(m, got)
    assert isinstance(got.a.cols, jax.Array) and got.a.cols.devices() == {jax.devices()[0]}
    assert pce.load(str(tmp_path), "no-such-key") is None


class Counter:
    def __init__(self, r1cs):
        self.r1cs, self.calls = r1cs, 0

    def __call__(self):
        self.calls += 1
        return self.r1cs


def _edit_meta(path, fn):
    with open(os.path.join(path, store.META)) as f:
        meta = json.load(f)
    fn(meta)
    with open(os.path.join(path, store.META), "w") as f:
        json.dump(meta, f)


def _flip_checksum(meta):
    c = meta["arrays"]["a__cols"]["checksum"]
    meta["arrays"]["a__cols"]["checksum"] = c[:-1] + ("0" if c[-1] != "0" else "1")


def _bump_version(meta):
    meta["version"] = pce.VERSION + 1


@pytest.mark.parametrize("damage", [_flip_checksum, _bump_version], ids=["checksum", "version"])
def test_damaged_entry_is_detected_and_re_extracted(small, tmp_path, damage):
    r1cs, _ = small
    fn = Counter(r1cs)
    key = "circuit-under-test"
    m1 = pce.get_or_extract(fn, key, str(tmp_path), **SMALL)
    m2 = pce.get_or_extract(fn, key, str(tmp_path), **SMALL)       # cache hit
    assert fn.calls == 1
    assert_same(m1, m2)
    _edit_meta(str(tmp_path / key), damage)
    assert pce.load(str(tmp_path), key) is None
    m3 = pce.get_or_extract(fn, key, str(tmp_path), **SMALL)
    assert fn.calls == 2
    assert_same(m1, m3)
    assert pce.load(str(tmp_path), key) is not None               # the entry was rewritten
    assert sorted(os.listdir(tmp_path)) == [key]


def test_changed_array_content_is_detected(small, tmp_path):
    """Arrays of another circuit with identical shapes under this entry's
    metadata: only the checksums can tell."""
    r1cs, m = small
    coeffs = list(r1cs.coeffs)
    i = coeffs.index(2)
    coeffs[i] = 7 if 7 not in coeffs else 11
    other = pce.extract(r1cs._replace(coeffs=tuple(coeffs)), **SMALL)
    pce.save(m, str(tmp_path), "x")
    pce.save(other, str(tmp_path), "y")
    assert pce.load(str(tmp_path), "y") is not None
    os.rename(tmp_path / "x" / store.ARRAYS, tmp_path / "x-arrays")
    os.rename(tmp_path / "y" / store.ARRAYS, tmp_path / "x" / store.ARRAYS)
    assert pce.load(str(tmp_path), "x") is None


def assert_same_r1cs(x, y):
    assert (x.name, x.num_inputs, x.num_aux, x.num_constraints, x.coeffs) == \
        (y.name, y.num_inputs, y.num_aux, y.num_constraints, y.coeffs)
    for mat in ("a", "b", "c"):
        for f in cs.CSR._fields:
            u, v = getattr(getattr(x, mat), f), getattr(getattr(y, mat), f)
            assert isinstance(v, np.ndarray) and v.dtype == np.asarray(u).dtype
            np.testing.assert_array_equal(u, v)
    assert y.bit_vars.dtype == bool
    np.testing.assert_array_equal(x.bit_vars, y.bit_vars)


def test_r1cs_round_trip_and_damage(tmp_path):
    """A recorded circuit (int64 CSR arrays, coefficients up to r − 1) comes
    back identical, as host arrays; a damaged entry is recorded again."""
    r1cs = random_r1cs(3)
    assert r1cs.a.cols.dtype == np.int64 and max(r1cs.coeffs) > 2 ** 64
    if R - 1 not in r1cs.coeffs:
        r1cs = r1cs._replace(coeffs=r1cs.coeffs + (R - 1,))
    fn = Counter(r1cs)
    got = pce.get_or_record(fn, "rec", str(tmp_path))
    again = pce.get_or_record(fn, "rec", str(tmp_path))               # stored: not recorded
    assert fn.calls == 1
    assert_same_r1cs(r1cs, got)
    assert_same_r1cs(r1cs, again)
    assert pce.load_r1cs(str(tmp_path), "other") is None
    # one byte of the stored column ids changed, the metadata left alone
    npy = tmp_path / "rec" / store.HOST / "b__cols.npy"
    raw = bytearray(npy.read_bytes())
    raw[-3] ^= 0x40
    npy.write_bytes(bytes(raw))
    assert pce.load_r1cs(str(tmp_path), "rec") is None
    assert_same_r1cs(r1cs, pce.get_or_record(fn, "rec", str(tmp_path)))
    assert fn.calls == 2
    # an entry of the matrices' format under the circuit's key is not a circuit
    pce.save(pce.extract(r1cs, **SMALL), str(tmp_path), "m")
    assert pce.load_r1cs(str(tmp_path), "m") is None


def test_interrupted_save_leaves_nothing_partial(small, tmp_path, monkeypatch):
    _, m = small
    pce.save(m, str(tmp_path), "kept")
    real = store._write_arrays

    def failing(path, arrays):
        real(path, arrays)                      # the arrays are on disk, the metadata is not
        raise KeyboardInterrupt("simulated interruption")

    monkeypatch.setattr(store, "_write_arrays", failing)
    with pytest.raises(KeyboardInterrupt):
        pce.save(m, str(tmp_path), "new")
    with pytest.raises(KeyboardInterrupt):
        pce.save(m, str(tmp_path), "kept")     # replacing an entry fails: the old one stays
    assert sorted(os.listdir(tmp_path)) == ["kept"]
    monkeypatch.undo()
    assert pce.load(str(tmp_path), "kept") is not None


# ---------------------------------------------------------------- the ELL layout (ops.spmv)
def ell_rows(rng, n_vars):
    """Rows of every short length 0..5 in every ±1/general mix, rows with
    exactly Kp = 3 ±1 and Kg = 2 general terms, −1 in each slot position,
    long rows (20 terms), and duplicate columns."""
    kinds = {"p": lambda: 1, "m": lambda: R - 1, "g": lambda: rng.choice([2, 3, R - 2, 0,
                                                                        rng.randrange(R)])}
    patterns = ["", "p", "m", "g", "pm", "mp", "gg", "pmg", "ppm", "mmm", "pmpg", "gpgm",
                "mpmgg", "pppgg", "ppmmgg", "ggg", "pppp", "p" * 20, "pmg" * 7, "g" * 20]
    rows = []
    for pat in patterns * 2:
        rows.append([(rng.randrange(n_vars), kinds[k]()) for k in pat])
    rows[3] = [(5, 1), (5, R - 1), (5, 7), (5, 7)]               # one column, cancelling
    return rows


def ell_case(seed=11, n_vars=37):
    rng = random.Random(seed)
    table = {}
    rows = ell_rows(rng, n_vars)
    csr = csr_from_rows(rows, table)
    coeffs = tuple(sorted(table, key=table.get))
    return rows, csr, coeffs, n_vars


def test_block_splits_rows_into_ell_and_overflow():
    """ELL arrays against the rows: the first Kp ±1 and Kg general entries
    of each row in entry order (signs in ell_neg); the rest of exactly the
    rows that spill in pieces of Qp ±1 and Qg general entries, in order;
    piece_start gives each long row's run of pieces (to_csr covers
    everything)."""
    rows, csr, coeffs, n = ell_case()
    classes = spmv.coefficient_classes(coeffs)
    m = spmv.block(csr.indptr, csr.cols, csr.coeff_ids, classes, n, ell_width=(3, 2),
                   piece_width=(2, 1), slots=16, gen_slots=8, block_rows=4, max_terms=6)
    assert m.ell_width == (3, 2) and m.piece_width == (2, 1) and m.chunks == 0

    def fixed(entries, kp, kg):
        pm = [(c, x) for c, x in entries if x in (1, R - 1)]
        gen = [(c, x) for c, x in entries if x not in (1, R - 1)]
        return ([c for c, _ in pm] + [n] * (kp - len(pm)),
                sum(1 << k for k, (_, x) in enumerate(pm) if x == R - 1),
                [c for c, _ in gen] + [n] * (kg - len(gen)), [x for _, x in gen])

    def check(got, want, i):
        cols, neg, gcols, gids = got
        assert (cols[i].tolist(), int(neg[i]) if len(neg) else 0, gcols[i].tolist(),
                [coeffs[j] for j in gids[i][:len(want[3])]]) == want

    long_rows, starts, piece = [], [], 0
    for r, row in enumerate(rows):
        pm = [(c, x) for c, x in row if x in (1, R - 1)]
        gen = [(c, x) for c, x in row if x not in (1, R - 1)]
        check((m.ell_cols, m.ell_neg, m.ell_gen_cols, m.ell_gen_coeff),
              fixed(pm[:3] + gen[:2], 3, 2), r)
        pm, gen = pm[3:], gen[2:]
        if pm or gen:
            long_rows.append(r)
            starts.append(piece)
        for j in range(max(-(-len(pm) // 2), len(gen))):
            check((m.piece_cols, m.piece_neg, m.piece_gen_cols, m.piece_gen_coeff),
                  fixed(pm[2 * j:2 * j + 2] + gen[j:j + 1], 2, 1), piece)
            piece += 1
    assert m.long_rows.tolist() == long_rows and m.overflow_rows == len(long_rows)
    assert m.pieces == piece and m.piece_start.tolist() == starts
    assert max(np.diff(starts)) > 3                       # runs of several pieces
    one, minus = coeffs.index(1), coeffs.index(R - 1)
    indptr, cols, ids = spmv.to_csr(m, one, minus)
    want = [sorted((c, coeffs.index(x)) for c, x in row) for row in rows]
    got = [list(zip(cols[indptr[r]:indptr[r + 1]].tolist(), ids[indptr[r]:indptr[r + 1]].tolist()))
           for r in range(len(rows))]
    assert got == want
    wide = spmv.block(csr.indptr, csr.cols, csr.coeff_ids, classes, n, ell_width=(3, 2),
                      piece_width=(32, 32))
    assert wide.pieces == wide.overflow_rows == len(long_rows) and wide.chunks == 0
    assert wide.piece_start.tolist() == list(range(len(long_rows)))      # one piece each
    indptr, cols, ids = spmv.to_csr(wide, one, minus)
    assert [list(zip(cols[indptr[r]:indptr[r + 1]].tolist(), ids[indptr[r]:indptr[r + 1]].tolist()))
            for r in range(len(rows))] == want


def test_ell_widths_rule():
    """Widths from the count histogram: k grows while the rows with more than
    k entries, times the overflow cost, outweigh one slot per row."""
    n_pm = np.array([0] * 50 + [1] * 30 + [2] * 14 + [3] * 5 + [9])     # 100 rows
    n_gen = np.array([0] * 80 + [1] * 15 + [2] * 5)
    # rows with count > k, k = 0, 1, ...: ±1 50, 20, 6, 1 (to k = 8), 0; general 20, 5, 0
    assert spmv.ell_widths(n_pm, n_gen, overflow_cost=16) == (2, 1)    # 6·16 <= 100; 5·16 <= 2·100
    assert spmv.ell_widths(n_pm, n_gen, overflow_cost=100) == (3, 2)   # >= 99% of rows fit
    assert spmv.ell_widths(n_pm, n_gen, overflow_cost=101) == (9, 2)   # nothing spills
    assert spmv.ell_widths(n_pm, n_gen, overflow_cost=4) == (1, 0)     # 20·4 <= 100; 20·4 <= 200
    assert spmv.ell_widths(n_pm, n_gen, overflow_cost=0) == (0, 0)
    assert spmv.ell_widths(np.array([40] * 3), np.zeros(3, int)) == (spmv.MAX_ELL_WIDTH, 0)
    assert spmv.ell_widths(np.zeros(0, int), np.zeros(0, int)) == (0, 0)


def test_piece_widths_rule():
    """Piece widths minimise long_rows·q·slot_cost + cost·Σ ceil(count/q)
    (slot cost 1 for ±1 with q ≤ MAX_ELL_WIDTH, GENERAL_SLOT_COST for
    general with q ≤ MAX_GEN_WIDTH), brute force."""
    def brute(counts, slot_cost, cost, most):
        total = lambda q: len(counts) * q * slot_cost + cost * sum(-(-c // q) for c in counts)
        return min(range(1, most + 1), key=lambda q: (total(q), q))

    o_pm = np.array([1, 1, 1, 2])                   # q = 1: 4 + 5c; q = 2: 8 + 4c
    o_gen = np.array([64, 64, 0, 0])
    assert spmv.piece_widths(o_pm, o_gen, overflow_cost=3)[0] == 1        # 19 < 20
    assert spmv.piece_widths(o_pm, o_gen, overflow_cost=5)[0] == 2        # 28 < 29
    g, most = spmv.GENERAL_SLOT_COST, spmv.MAX_GEN_WIDTH
    for cost in (0.5, 5, 24, 400):
        assert spmv.piece_widths(o_pm, o_gen, cost) == (
            brute(o_pm.tolist(), 1, cost, spmv.MAX_ELL_WIDTH), brute(o_gen.tolist(), g, cost, most))
    assert spmv.piece_widths(o_pm, o_gen, 400)[1] == most                 # capped
    assert spmv.piece_widths(np.zeros(3, int), np.array([0, 3, 0])) == (0, 3)


def ell_reference(rows, ws):
    return [[sum(x * w[c] for c, x in row) % R for row in rows] for w in ws]


@pytest.fixture(scope="module")
def ell_inputs():
    rows, csr, coeffs, n = ell_case()
    ws = random_witnesses(random.Random(12), 3, n)
    wt = spmv.element_major(to_device(ws, (3,)))                         # (n, 3, 8)
    return rows, csr, coeffs, n, ws, wt, jnp.asarray(Fr.from_int(list(coeffs)))


@pytest.mark.parametrize("width, pieces", [((3, 2), (2, 1)), ((2, 0), None), ((0, 1), (1, 4)),
                                           ((6, 3), (32, 32)), ((0, 0), None)],
                         ids=["mixed", "pm-only", "general-only", "wide", "all-csr"])
def test_ell_spmv_equals_python_ints_and_csr_path(ell_inputs, width, pieces):
    """spmv in each layout equals the per-row Python-int sums (and therefore
    the all-CSR layout) for a batch of 3, the ELL rows in several chunks
    (the last one clamped to end at the last row); long rows of several
    pieces, or of one piece each ("wide"), or every entry in chunks."""
    rows, csr, coeffs, n, ws, wt, table = ell_inputs
    m = spmv.block(csr.indptr, csr.cols, csr.coeff_ids, spmv.coefficient_classes(coeffs), n,
                   ell_width=width, piece_width=pieces, slots=16, gen_slots=8, block_rows=8,
                   max_terms=6)
    assert (m.chunks > 0) == (width == (0, 0))
    chunk = 3 * sum(width) * 16                                          # 16 rows per chunk
    if sum(width):
        C, starts = spmv.ell_row_chunks(len(rows), 3 * sum(width), chunk)
        assert C == 16 and starts.tolist() == [0, 16, len(rows) - 16]    # the last one clamped
    got = jax.jit(functools.partial(spmv.spmv, chunk_slots=chunk))(
        jax.tree.map(jnp.asarray, m), table, wt)
    assert got.shape == (8, 3, len(rows))
    assert Fr.to_int(got).tolist() == ell_reference(rows, ws)


def test_ell_without_overflow_and_empty_matrix():
    """Every row inside the ELL part (no overflow chunks at all), and a
    matrix without entries, with auto widths."""
    n = 9
    rows = [[(1, 1), (2, R - 1), (3, 5)], [], [(4, R - 1)], [(0, 1), (8, 1)]] * 3
    table = {}
    csr = csr_from_rows(rows, table)
    coeffs = tuple(sorted(table, key=table.get))
    classes = spmv.coefficient_classes(coeffs)
    ws = random_witnesses(random.Random(13), 1, n)
    wt = spmv.element_major(to_device(ws, (1,)))
    m = spmv.block(csr.indptr, csr.cols, csr.coeff_ids, classes, n)
    assert m.ell_width == (2, 1) and m.chunks == 0 and m.overflow_rows == 0
    got = spmv.spmv(jax.tree.map(jnp.asarray, m), jnp.asarray(Fr.from_int(list(coeffs))), wt)
    assert Fr.to_int(got).reshape(-1).tolist() == ell_reference(rows, ws)[0]
    empty = spmv.block(np.zeros(5, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                       classes, n)
    assert empty.ell_width == (0, 0)
    got = spmv.spmv(jax.tree.map(jnp.asarray, empty), jnp.zeros((8, 0), jnp.uint32), wt)
    assert got.shape == (8, 1, 4) and not np.asarray(got).any()


@pytest.mark.parametrize("kind", ["pm", "general"])
def test_auto_widths_never_choose_the_chunk_layout(kind):
    """A matrix whose rows are nearly all empty gets no slot from the width
    rule, yet is planned with one ELL slot of its commoner kind and its
    other entries in pieces, not in the all-CSR chunks (15x slower,
    hypothesis 66); equal to Python ints."""
    n, coeff = 40, (1 if kind == "pm" else 7)
    rows = [[] for _ in range(120)]
    rows[5] = [(c, coeff) for c in range(30)] + [(3, R - 1)]
    rows[77] = [(9, coeff), (11, 5)]
    table = {}
    csr = csr_from_rows(rows, table)
    coeffs = tuple(sorted(table, key=table.get))
    classes = spmv.coefficient_classes(coeffs)
    row = np.repeat(np.arange(120), np.diff(csr.indptr))
    general = classes[csr.coeff_ids] == spmv.GENERAL
    counts = [np.bincount(row[g], minlength=120) for g in (~general, general)]
    assert spmv.ell_widths(*counts) == (0, 0)                            # the rule alone
    m = spmv.block(csr.indptr, csr.cols, csr.coeff_ids, classes, n)
    assert m.ell_width == ((1, 0) if kind == "pm" else (0, 1)) and m.chunks == 0
    assert m.long_rows.tolist() == [5, 77]
    ws = random_witnesses(random.Random(14), 2, n)
    got = spmv.spmv(jax.tree.map(jnp.asarray, m), jnp.asarray(Fr.from_int(list(coeffs))),
                    spmv.element_major(to_device(ws, (2,))))
    assert Fr.to_int(got).tolist() == ell_reference(rows, ws)


@pytest.mark.parametrize("form, width, pieces", [("gather", (2, 1), None),
                                                  ("fused", (3, 2), (2, 1)),
                                                  ("fused", (0, 1), (1, 4))],
                         ids=["gather", "fused-mixed", "fused-general-only"])
def test_ell_kernels_pallas_interpret(ell_inputs, form, width, pieces):
    """The fixed-width rows' Pallas (GPU) kernels in interpret mode, through
    spmv, batch of 3: the row kernel over XLA-gathered terms ("gather",
    argument broadcasting over the batch included) and the kernel that
    gathers by index itself ("fused": 40 rows in blocks of 16, the last block
    overlapping its predecessor; the ELL rows and the 72 / 150 pieces fused,
    the pieces' runs summed by the lazy sums: fewer long rows than a block),
    equal to Python ints."""
    from ops.elementwise import KernelConfig
    rows, csr, coeffs, n, ws, wt, table = ell_inputs
    m = spmv.block(csr.indptr, csr.cols, csr.coeff_ids, spmv.coefficient_classes(coeffs), n,
                   ell_width=width, piece_width=pieces, slots=16, gen_slots=8, block_rows=8,
                   max_terms=6)
    assert len(rows) % 16 and m.pieces >= 16
    got = spmv.spmv(jax.tree.map(jnp.asarray, m), table, wt,
                    config=KernelConfig(interpret=True, bn=16), form=form)
    assert Fr.to_int(got).tolist() == ell_reference(rows, ws)


def test_fused_ell_lowers_for_cuda_with_wide_offsets():
    """The fused kernel lowers to Triton on a CPU-only host (no GPU needed),
    with PTX field operations, and takes 64-bit witness offsets once the
    element index n·B passes int32 (2^28 variables × 8 instances: the
    kernel's index product in 64 bits, not only Pallas' offsets) — and
    32-bit ones below it."""
    import contextlib
    import io
    import re
    from ops.elementwise import KernelConfig
    cfg = KernelConfig(debug=True)
    i32 = lambda *s: jax.ShapeDtypeStruct(s, jnp.int32)
    u32 = lambda *s: jax.ShapeDtypeStruct(s, jnp.uint32)

    def ir(n, B):
        rows = 1 << 10

        def f(c, ng, gc, gi, tab, wt):
            return spmv._spmv_ell_fused((c, ng, gc, gi), rows, tab, wt, cfg)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            jax.jit(f).trace(i32(rows, 2), u32(rows), i32(rows, 1), i32(rows, 1), u32(8, 3),
                             u32(n, B, 8)).lower(lowering_platforms=("cuda",))
        return buf.getvalue()

    def witness_offsets(text):
        return set(re.findall(r'tt\.addptr .*tensor<\d+xi(\d+)> "masked_load', text))

    def index_products(text):      # the kernel's own c·B + b (Pallas' offsets are "masked_load")
        return set(re.findall(r'arith\.muli .*tensor<\d+xi(\d+)> "mul:', text))

    small, wide = ir(1 << 10, 1), ir(1 << 28, 8)
    assert "elementwise_inline_asm" in small
    assert witness_offsets(small) == {"32"} and index_products(small) <= {"32"}
    assert witness_offsets(wide) == {"32", "64"} and index_products(wide) == {"64"}


def _runs_case(rng, n_long, B, runs):
    """Random piece values (8, B, P) (a quarter of them r − 1, r − 2: sums
    wrap mod r many times) and run starts for the run lengths ``runs``."""
    P = sum(runs)
    vals = [[rng.choice([R - 1, R - 2, rng.randrange(R), rng.randrange(R)]) for _ in range(P)]
            for _ in range(B)]
    starts = np.concatenate([[0], np.cumsum(runs)[:-1]]).astype(np.int32)
    want = [[sum(v[s:s + k]) % R for s, k in zip(starts.tolist(), runs)] for v in vals]
    values = jnp.asarray(Fr.from_int(vals))                              # (8, B, P)
    return jnp.asarray(starts), values, want


@pytest.mark.parametrize("interpret", [False, True], ids=["lazy", "pallas-interpret"])
def test_piece_sums_equal_python_ints(interpret):
    """``_piece_sums`` of runs of 0 (a padded block's empty runs), 1 and up
    to 70 pieces, for 37 long rows in blocks of 16 (the last block
    overlapping its predecessor) and 2 instances: the lazy half-limb sums
    and the Pallas kernel (interpret mode; each lane walking its run for
    the longest run of its block) equal Python ints mod r."""
    from ops.elementwise import KernelConfig
    rng = random.Random(21)
    runs = [rng.choice([0, 1, 1, 2, 5, 31, 70]) for _ in range(37)]
    runs[-1] = 3
    starts, values, want = _runs_case(rng, 37, 2, runs)
    cfg = KernelConfig(interpret=interpret, bn=16)
    got = (spmv._piece_sums(starts, values, cfg) if interpret
           else spmv._piece_sums_lazy(starts, values))
    assert got.shape == (8, 2, 37)
    assert Fr.to_int(got).tolist() == want


def test_piece_sums_skip_the_runs_of_rows_not_live():
    """``_piece_sums(..., live=)`` (the Pallas kernel, interpret mode): the
    live rows' sums are unchanged beside a dead row's run of 300 pieces
    (a padded row block's padding run), which ``run_counts`` gives as 0
    steps, so no lane walks it."""
    from ops.elementwise import KernelConfig
    rng = random.Random(22)
    runs = [rng.choice([0, 1, 2, 5]) for _ in range(20)] + [300]
    starts, values, want = _runs_case(rng, 21, 1, runs)
    live = jnp.arange(21) < 20
    assert np.asarray(spmv.run_counts(starts, sum(runs))).tolist() == runs
    assert np.asarray(spmv.run_counts(starts, sum(runs), live)).tolist() == runs[:20] + [0]
    got = spmv._piece_sums(starts, values, KernelConfig(interpret=True, bn=16), live=live)
    assert Fr.to_int(got)[0, :20].tolist() == want[0][:20]


def test_piece_sums_lower_for_cuda_with_wide_offsets():
    """The runs kernel lowers to Triton on a CPU-only host, its walk a loop
    of runtime length, and indexes the flat limb-major values in 64 bits
    once 8·B·P passes int32 (32-bit below; the starts always 32)."""
    import contextlib
    import io
    import re
    from ops.elementwise import KernelConfig
    cfg = KernelConfig(debug=True)

    def ir(P, B):
        def f(starts, values):
            return spmv._piece_sums_pallas(starts, values, cfg)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            jax.jit(f).trace(jax.ShapeDtypeStruct((1 << 10,), jnp.int32),
                             jax.ShapeDtypeStruct((8, B, P), jnp.uint32)
                             ).lower(lowering_platforms=("cuda",))
        return buf.getvalue()

    def offsets(text):
        return set(re.findall(r'tt\.addptr .*tensor<\d+xi(\d+)> "masked_load', text))

    small, wide = ir(1 << 12, 1), ir(1 << 26, 8)
    assert "Fr_spmv_piece_sums" in small and "scf.for" in small
    assert offsets(small) == {"32"} and offsets(wide) == {"32", "64"}   # starts 32, values 64


def test_block_refuses_a_run_past_the_lazy_bound():
    """A long row that would need more than MAX_TERMS pieces is refused by
    name when planned (its lazy sum could overflow), and fits with wider
    pieces."""
    n = spmv.MAX_TERMS + 2
    row = [(c, 3) for c in range(n)]
    csr = csr_from_rows([row, [(0, 1)]], {3: 0, 1: 1})
    classes = spmv.coefficient_classes([3, 1])
    with pytest.raises(ValueError, match="row 0 spills into 65537 pieces"):
        spmv.block(csr.indptr, csr.cols, csr.coeff_ids, classes, n, ell_width=(1, 1),
                   piece_width=(1, 1))
    m = spmv.block(csr.indptr, csr.cols, csr.coeff_ids, classes, n, ell_width=(1, 1),
                   piece_width=(1, 2))
    assert m.pieces == -(-(n - 1) // 2) and m.long_rows.tolist() == [0]


def test_spmv_rejects_unknown_form(ell_inputs):
    _, csr, coeffs, n, _, wt, table = ell_inputs
    m = jax.tree.map(jnp.asarray, spmv.block(csr.indptr, csr.cols, csr.coeff_ids,
                                             spmv.coefficient_classes(coeffs), n))
    with pytest.raises(ValueError, match="form"):
        spmv.spmv(m, table, wt, form="scatter")
    with pytest.raises(ValueError, match="form"):
        spmv.spmv(m, table, wt, form="fused+segments")


@pytest.mark.parametrize("width", [(1, 2, 3), (-1, 0), (spmv.MAX_ELL_WIDTH + 1, 0), (1.5, 0)])
def test_block_rejects_bad_ell_width(width):
    _, csr, coeffs, n = ell_case()
    for name in ("ell_width", "piece_width"):
        with pytest.raises(ValueError, match=name):
            spmv.block(csr.indptr, csr.cols, csr.coeff_ids, spmv.coefficient_classes(coeffs), n,
                       **{name: width})


def test_spmv_rejects_bad_shapes(ell_inputs):
    _, csr, coeffs, n, _, wt, table = ell_inputs
    m = jax.tree.map(jnp.asarray, spmv.block(csr.indptr, csr.cols, csr.coeff_ids,
                                             spmv.coefficient_classes(coeffs), n))
    with pytest.raises(ValueError, match="element-major"):
        spmv.spmv(m, table, wt[:-1])
    with pytest.raises(ValueError, match="element-major"):
        spmv.spmv(m, table, jnp.transpose(wt, (2, 1, 0)))
    with pytest.raises(ValueError, match="coefficient table"):
        spmv.spmv(m, table.T, wt)


@pytest.mark.slow   # CI time (session 21: see bench/NOTES.md)
def test_evaluate_bytes_bounds_what_xla_allocates(monkeypatch):
    """``evaluate_bytes`` (the SpMV stage of a proof's memory plan) is at
    least XLA's temporaries plus outputs for ``evaluate`` of a real circuit
    whose A has more pieces than rows (the 2KiB WindowPoSt: Poseidon rows,
    planned with general slots capped at 4 as before hypothesis 57, so that
    its pieces outnumber its rows)."""
    from bench import filecoin as F
    monkeypatch.setattr(spmv, "MAX_GEN_WIDTH", 4)
    m = pce.extract(F.spec_for("window-post", "2KiB").record())
    assert m.a.pieces > m.rows
    w = jnp.zeros((8, 1, m.num_vars), jnp.uint32)
    got = jax.jit(pce.evaluate).lower(m, w).compile().memory_analysis()
    xla = got.temp_size_in_bytes + got.output_size_in_bytes
    assert xla <= pce.evaluate_bytes(m) <= 1.5 * xla
    # evaluate_xla_bytes reads the same figure from abstract arguments (no data)
    assert pce.evaluate_xla_bytes(m) == xla
    assert pce.evaluate_xla_bytes(m, batch=2) > xla
