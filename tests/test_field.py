"""Fr and Fq (ops.field.PrimeField) against Python integers.

Every device op runs on batches of N_FIELD lanes (one compiled shape per
kernel); inputs are edge values (0, 1, p-1, p-2, (p-1)/2, limb boundaries,
elements whose Montgomery form sits at limb boundaries), all their pairs, and
random values from a seeded ``random.Random``.
"""
from __future__ import annotations

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import N_FIELD, P, R, edge_values, lanes, pad, to_bool_list
from ops.field import Fq, Fr

FIELDS = [pytest.param(Fr, id="Fr"), pytest.param(Fq, id="Fq")]


def _legendre(x, p):
    return 0 if x % p == 0 else (1 if pow(x, (p - 1) // 2, p) == 1 else -1)


@pytest.fixture(scope="module")
def data():
    """Per field: edge values, random values, and the pair lists."""
    out = {}
    for F in (Fr, Fq):
        rng = random.Random({"Fr": 1001, "Fq": 1002}[F.name])
        p = F.p
        edges = edge_values(p)
        rand = [rng.randrange(p) for _ in range(3 * N_FIELD)]
        units = edges + rand
        a = [x for x in edges for _ in edges] + rand
        b = [y for _ in edges for y in edges] + [rng.randrange(p) for _ in rand]
        out[F.name] = dict(edges=edges, rand=rand, units=units, a=a, b=b)
    return out


# ---------------------------------------------------------------- constants
def test_moduli_match_py_ecc():
    assert Fq.p == P
    assert Fr.p == R
    assert (Fq.L, Fr.L) == (12, 8)
    assert (Fq.nbytes, Fr.nbytes) == (48, 32)


@pytest.mark.parametrize("F", FIELDS)
def test_from_int_is_montgomery_limbs(F):
    """Documented layout: (L, *batch) uint32, x·2^(32L) mod p, least significant limb first."""
    xs = [0, 1, 2, F.p - 1, 2 ** 32 + 7]
    arr = F.from_int(xs)
    assert arr.dtype == np.uint32 and arr.shape == (F.L, len(xs))
    for j, x in enumerate(xs):
        m = x * pow(2, 32 * F.L, F.p) % F.p
        assert [int(v) for v in arr[:, j]] == [(m >> (32 * i)) & 0xFFFFFFFF for i in range(F.L)]


# ---------------------------------------------------------------- ring operations
@pytest.mark.parametrize("F", FIELDS)
@pytest.mark.parametrize("op,ref", [
    ("add", lambda x, y, p: (x + y) % p),
    ("sub", lambda x, y, p: (x - y) % p),
    ("mul", lambda x, y, p: x * y % p),
], ids=["add", "sub", "mul"])
def test_binary_ops(F, op, ref, data):
    d = data[F.name]
    got = lanes(F, getattr(F, op), d["a"], d["b"])
    want = [ref(x, y, F.p) for x, y in zip(d["a"], d["b"])]
    bad = [(x, y) for x, y, g, w in zip(d["a"], d["b"], got, want) if g != w]
    assert not bad, f"{F.name}.{op} wrong on {len(bad)} pairs, first {bad[0]}"


@pytest.mark.parametrize("F", FIELDS)
@pytest.mark.parametrize("op,ref", [
    ("neg", lambda x, p: (-x) % p),
    ("double", lambda x, p: 2 * x % p),
    ("square", lambda x, p: x * x % p),
    ("inv", lambda x, p: pow(x, p - 2, p)),          # 0 -> 0
], ids=["neg", "double", "square", "inv"])
def test_unary_ops(F, op, ref, data):
    d = data[F.name]
    xs = d["units"]
    got = lanes(F, getattr(F, op), xs)
    want = [ref(x, F.p) for x in xs]
    bad = [x for x, g, w in zip(xs, got, want) if g != w]
    assert not bad, f"{F.name}.{op} wrong on {len(bad)} inputs, first {bad[0]}"


@pytest.mark.parametrize("F", FIELDS)
def test_inverse_properties(F, data):
    xs = data[F.name]["units"]
    inv = lanes(F, F.inv, xs)
    assert inv[xs.index(0)] == 0
    for x, y in zip(xs, inv):
        if x:
            assert x * y % F.p == 1


def _exponents(p):
    # p - 2 is covered by test_unary_ops[inv]
    return [0, 1, (p - 1) // 2, 2 ** 300 + 0x1234567890ABCDEF]


@pytest.mark.parametrize("F", FIELDS)
@pytest.mark.parametrize("which", range(4), ids=["0", "1", "(p-1)/2", "2^300+c"])
def test_pow(F, which, data):
    e = _exponents(F.p)[which]
    xs = data[F.name]["edges"] + data[F.name]["rand"][:N_FIELD]
    got = lanes(F, lambda a: F.pow(a, e), xs)
    want = [pow(x, e, F.p) for x in xs]               # Python: 0^0 = 1
    bad = [x for x, g, w in zip(xs, got, want) if g != w]
    assert not bad, f"{F.name}.pow(., {e:#x}) wrong on {len(bad)} inputs, first {bad[0]}"


@pytest.mark.parametrize("F", FIELDS)
def test_pow_negative_exponent_rejected(F):
    with pytest.raises(ValueError):
        F.pow(jnp.asarray(F.from_int([1] * N_FIELD)), -1)


# ---------------------------------------------------------------- batch inverse
@pytest.mark.parametrize("F,n", [(Fq, n) for n in (1, 31, 33, 100, 1025)] + [(Fr, n) for n in (1, 33, 100, 1025)],
                         ids=lambda v: v.name if hasattr(v, "name") else str(v))
def test_batch_inv(F, n, data):
    rng = random.Random(n)
    pool = data[F.name]["edges"]
    xs = [rng.choice(pool) if rng.random() < 0.3 else rng.randrange(F.p) for _ in range(n)]
    for i in range(0, n, 7):
        xs[i] = 0
    xs[-1] = 0
    got = F.to_int(F.batch_inv(jnp.asarray(F.from_int(xs))))
    assert got.shape == (n,)
    want = [pow(x, F.p - 2, F.p) for x in xs]
    assert [int(v) for v in got] == want


def test_batch_inv_multidim():
    F = Fq
    rng = random.Random(7)
    xs = np.array([rng.randrange(F.p) if rng.random() < 0.8 else 0 for _ in range(N_FIELD)],
                  dtype=object).reshape(4, N_FIELD // 4)
    want = np.vectorize(lambda x: pow(int(x), F.p - 2, F.p), otypes=[object])(xs)
    got = F.to_int(F.batch_inv(jnp.asarray(F.from_int(xs))))
    assert got.shape == xs.shape and (got == want).all()


def test_batch_inv_small_chunk():
    """chunk = 4: the recursion goes 64 -> 16 -> 4 -> Fermat."""
    F = Fr
    rng = random.Random(8)
    xs = [rng.randrange(F.p) if rng.random() < 0.8 else 0 for _ in range(N_FIELD)]
    got = F.to_int(F.batch_inv(jnp.asarray(F.from_int(xs)), 4))
    assert [int(v) for v in got] == [pow(x, F.p - 2, F.p) for x in xs]


@pytest.mark.parametrize("F", FIELDS)
def test_batch_inv_all_zero(F):
    got = F.to_int(F.batch_inv(jnp.asarray(F.from_int([0] * 100))))    # a length used above
    assert all(int(v) == 0 for v in got)


# ---------------------------------------------------------------- square roots (Fq)
def test_fq_sqrt(data):
    F, p = Fq, Fq.p
    rng = random.Random(99)
    d = data["Fq"]
    squares = [x * x % p for x in d["rand"][:N_FIELD]]
    nonsq = []
    while len(nonsq) < N_FIELD:
        x = rng.randrange(p)
        if _legendre(x, p) == -1:
            nonsq.append(x)
    xs = d["edges"] + squares + nonsq
    root, ok = lanes(F, F.sqrt, xs, out=[F.to_int, lambda v: np.asarray(v)])
    for x, r, e in zip(xs, root, ok):
        assert bool(e) == (_legendre(x, p) != -1), f"existence flag wrong for {x}"
        if e:
            assert r * r % p == x, f"bad root for {x}"
    assert not any(ok[len(d["edges"]) + N_FIELD:])        # non-squares all rejected
    assert all(ok[len(d["edges"]):len(d["edges"]) + N_FIELD])


# ---------------------------------------------------------------- predicates, select
@pytest.mark.parametrize("F", FIELDS)
def test_eq_is_zero_select(F, data):
    rng = random.Random(5)
    xs = data[F.name]["units"][:N_FIELD]
    ys = [x if rng.random() < 0.5 else rng.choice([(x + 1) % F.p, (x - 1) % F.p, x ^ 1 if (x ^ 1) < F.p else 0,
                                                    rng.randrange(F.p)]) for x in xs]
    a, b = jnp.asarray(F.from_int(xs)), jnp.asarray(F.from_int(ys))
    assert to_bool_list(F.eq(a, b)) == [x == y for x, y in zip(xs, ys)]
    assert to_bool_list(F.is_zero(a)) == [x == 0 for x in xs]
    assert to_bool_list(F.is_zero(F.sub(a, b))) == [x == y for x, y in zip(xs, ys)]
    cond = [rng.random() < 0.5 for _ in xs]
    sel = F.select(jnp.asarray(cond), a, b)
    assert [int(v) for v in F.to_int(sel)] == [x if c else y for c, x, y in zip(cond, xs, ys)]


# ---------------------------------------------------------------- representation
def _raw_limbs(xs, L):
    """Plain (non-Montgomery) integer limbs (L, k), built from the bytes."""
    buf = b"".join(int(x).to_bytes(4 * L, "little") for x in xs)
    return np.frombuffer(buf, dtype="<u4").reshape(len(xs), L).T.astype(np.uint32).copy()


@pytest.mark.parametrize("F", FIELDS)
def test_to_from_montgomery(F, data):
    xs = data[F.name]["units"][:N_FIELD]
    mont = F.to_montgomery(jnp.asarray(_raw_limbs(xs, F.L)))
    assert [int(v) for v in F.to_int(mont)] == xs
    raw = np.asarray(F.from_montgomery(jnp.asarray(F.from_int(xs))))
    np.testing.assert_array_equal(raw, _raw_limbs(xs, F.L))


@pytest.mark.parametrize("F", FIELDS)
def test_is_canonical(F, data):
    p, L = F.p, F.L
    good = data[F.name]["edges"]
    bad = [p, p + 1, p + 2 ** 32, 2 ** (32 * L) - 1, 2 ** (32 * L - 1), 2 ** p.bit_length(),
           2 * p - 1, p + 2 ** (32 * (L - 1))]
    vals = pad(good + bad, N_FIELD, 0)[:N_FIELD]
    want = [v < p for v in vals]
    got = to_bool_list(F.is_canonical(jnp.asarray(_raw_limbs(vals, L))))
    assert got == want


@pytest.mark.parametrize("F", FIELDS)
def test_zeros_ones_constant(F):
    assert all(int(v) == 0 for v in F.to_int(F.zeros((N_FIELD,))))
    assert all(int(v) == 1 for v in F.to_int(F.ones((N_FIELD,))))
    assert F.to_int(F.ones()) == 1 and F.to_int(F.zeros()) == 0
    for c in (0, 5, -1, F.p, F.p + 3, 2 ** 400):
        got = F.to_int(F.constant(c, (2, 3)))
        assert got.shape == (2, 3) and (got == c % F.p).all()


@pytest.mark.parametrize("F", FIELDS)
def test_unbatched_element(F):
    x, y = F.p - 5, 2 ** 64 + 3
    a, b = jnp.asarray(F.from_int(x)), jnp.asarray(F.from_int(y))
    assert a.shape == (F.L,)
    assert F.to_int(F.mul(a, b)) == x * y % F.p
    assert F.to_int(F.add(a, b)) == (x + y) % F.p
    assert isinstance(F.to_int(a), int)


@pytest.mark.parametrize("F", FIELDS)
def test_broadcast_same_rank(F, data):
    """Batch shapes (1,) and (N,) broadcast against each other."""
    xs = data[F.name]["rand"][:N_FIELD]
    c = F.p - 7
    got = F.to_int(F.mul(jnp.asarray(F.from_int(xs)), F.constant(c, (1,))))
    assert [int(v) for v in got] == [x * c % F.p for x in xs]


@pytest.mark.parametrize("F", FIELDS)
def test_broadcast_different_rank(F, data):
    """Batch shapes of different rank broadcast numpy-style (right-aligned):
    an unbatched (L,) element against (L, N), and (L, N) against (L, B, N).
    (Found failing by this test; fixed in ops/elementwise.py, b33973d.)"""
    xs = data[F.name]["rand"][:N_FIELD]
    c = F.p - 7
    A = jnp.asarray(F.from_int(xs))
    got = F.to_int(F.mul(A, F.constant(c)))
    assert [int(v) for v in got] == [x * c % F.p for x in xs]
    got = F.to_int(F.add(F.constant(c), A))
    assert [int(v) for v in got] == [(x + c) % F.p for x in xs]
    rng = random.Random(13)
    ys = [rng.randrange(F.p) for _ in range(4 * N_FIELD)]
    B = jnp.asarray(F.from_int(np.array(ys, dtype=object).reshape(4, N_FIELD)))
    got = F.to_int(F.mul(A, B))
    assert got.shape == (4, N_FIELD)
    assert [[int(v) for v in row] for row in got] == \
        [[x * y % F.p for x, y in zip(xs, ys[k * N_FIELD:(k + 1) * N_FIELD])] for k in range(4)]


# ---------------------------------------------------------------- random
@pytest.mark.parametrize("F", FIELDS)
def test_random(F):
    key = jax.random.PRNGKey(0)
    vals = []
    for k in jax.random.split(key, 4):
        arr = F.random(k, (N_FIELD,))
        assert arr.shape == (F.L, N_FIELD) and arr.dtype == jnp.uint32
        v = [int(x) for x in F.to_int(arr)]               # raises on non-canonical limbs
        assert all(0 <= x < F.p for x in v)
        vals += v
    assert len(set(vals)) == len(vals)                     # 256 draws, no repeats
    frac_high = sum(x > F.p // 2 for x in vals) / len(vals)
    assert 0.35 < frac_high < 0.65
    # the top limb is used (a masking bug would keep values small)
    assert max(vals) > F.p - F.p // 8
    # deterministic in the key; different keys differ
    a = np.asarray(F.random(key, (N_FIELD,)))
    np.testing.assert_array_equal(a, np.asarray(F.random(key, (N_FIELD,))))
    assert not np.array_equal(a, np.asarray(F.random(jax.random.PRNGKey(1), (N_FIELD,))))


@pytest.mark.parametrize("F", FIELDS)
def test_random_multidim_shape(F):
    arr = F.random(jax.random.PRNGKey(3), (3, 5))
    assert arr.shape == (F.L, 3, 5)
    v = F.to_int(arr)
    assert v.shape == (3, 5) and len({int(x) for x in v.reshape(-1)}) == 15


@pytest.mark.parametrize("F", FIELDS)
def test_random_ints(F):
    xs = F.random_ints(50, random.Random(1))
    assert xs == F.random_ints(50, random.Random(1))
    assert all(0 <= x < F.p for x in xs) and len(set(xs)) == 50
    ys = F.random_ints(20)                                 # CSPRNG
    assert all(0 <= y < F.p for y in ys) and len(set(ys)) == 20


# ---------------------------------------------------------------- host conversions
@pytest.mark.parametrize("F", FIELDS)
def test_int_round_trip_multidim(F):
    rng = random.Random(11)
    xs = np.array([rng.randrange(F.p) for _ in range(15)], dtype=object).reshape(3, 5)
    xs[0, 0], xs[2, 4], xs[1, 2] = 0, F.p - 1, 2 ** 32
    arr = F.from_int(xs)
    assert arr.shape == (F.L, 3, 5) and arr.dtype == np.uint32
    back = F.to_int(arr)
    assert back.shape == (3, 5) and (back == xs).all()
    nested = [[int(v) for v in row] for row in xs]
    np.testing.assert_array_equal(F.from_int(nested), arr)
    # element [i, j] of the batch is the same as converting it alone
    np.testing.assert_array_equal(arr[:, 1, 2], F.from_int(int(xs[1, 2])))
    # and the device round trip keeps the layout
    np.testing.assert_array_equal(np.asarray(jnp.asarray(arr)), arr)


@pytest.mark.parametrize("F", FIELDS)
@pytest.mark.parametrize("bad", ["p", "p+1", "-1", "2^400"])
def test_from_int_out_of_range(F, bad):
    v = {"p": F.p, "p+1": F.p + 1, "-1": -1, "2^400": 2 ** 400}[bad]
    with pytest.raises(ValueError):
        F.from_int(v)
    with pytest.raises(ValueError):
        F.from_int([1, 2, v, 3])


@pytest.mark.parametrize("F", FIELDS)
@pytest.mark.parametrize("bad", [1.0, True, "1", None])
def test_from_int_wrong_type(F, bad):
    with pytest.raises(TypeError):
        F.from_int([1, bad])


@pytest.mark.parametrize("F", FIELDS)
def test_to_int_rejects_non_canonical_and_bad_arrays(F):
    raw = _raw_limbs([F.p, 1], F.L)                        # limbs holding p itself
    with pytest.raises(ValueError):
        F.to_int(raw)
    with pytest.raises(ValueError):
        F.to_int(np.zeros((F.L + 1, 2), np.uint32))
    with pytest.raises(ValueError):
        F.to_int(np.zeros((F.L, 2), np.int64))


@pytest.mark.parametrize("F", FIELDS)
@pytest.mark.parametrize("order", ["little", "big"])
def test_bytes_round_trip(F, order, data):
    xs = data[F.name]["edges"][:20]
    n = F.nbytes
    # one element
    for x in xs:
        bx = x.to_bytes(n, order)
        arr = F.from_bytes(bx, order)
        assert arr.shape == (F.L,)
        assert F.to_int(arr) == x
        assert F.to_bytes(arr, order) == bx
    # concatenated elements -> (L, k)
    blob = b"".join(x.to_bytes(n, order) for x in xs)
    arr = F.from_bytes(blob, order)
    assert arr.shape == (F.L, len(xs))
    assert [int(v) for v in F.to_int(arr)] == xs
    out = F.to_bytes(arr, order)
    assert out.shape == (len(xs), n) and out.dtype == np.uint8
    assert out.tobytes() == blob
    # a uint8 array (*shape, nbytes) -> (L, *shape)
    u8 = np.frombuffer(b"".join(x.to_bytes(n, order) for x in xs[:15]), np.uint8).reshape(3, 5, n)
    arr = F.from_bytes(u8, order)
    assert arr.shape == (F.L, 3, 5)
    assert (F.to_int(arr) == np.array(xs[:15], dtype=object).reshape(3, 5)).all()
    np.testing.assert_array_equal(F.to_bytes(arr, order), u8)


@pytest.mark.parametrize("F", FIELDS)
def test_bytes_default_order_is_little(F):
    x = 0x0102030405
    assert F.to_bytes(F.from_int(x)) == x.to_bytes(F.nbytes, "little")
    assert F.to_int(F.from_bytes(x.to_bytes(F.nbytes, "little"))) == x


@pytest.mark.parametrize("F", FIELDS)
@pytest.mark.parametrize("order", ["little", "big"])
def test_from_bytes_rejects(F, order):
    n = F.nbytes
    for length in (0, 1, n - 1, n + 1, 2 * n - 1):
        with pytest.raises(ValueError):
            F.from_bytes(bytes(length), order)
    for v in (F.p, F.p + 1, 2 ** (8 * n) - 1):
        with pytest.raises(ValueError):
            F.from_bytes(v.to_bytes(n, order), order)
        with pytest.raises(ValueError):                    # non-canonical second element
            F.from_bytes((1).to_bytes(n, order) + v.to_bytes(n, order), order)
    with pytest.raises(ValueError):
        F.from_bytes(np.zeros((2, n + 1), np.uint8), order)
    with pytest.raises(ValueError):
        F.from_bytes(bytes(n), "middle")


def test_sqrt_needs_p_3_mod_4():
    """Fr's modulus is 1 mod 4: sqrt says so instead of failing deep inside."""
    assert Fr.p % 4 == 1
    with pytest.raises(ValueError, match="3 mod 4"):
        Fr.sqrt(Fr.ones((2,)))
