"""Fq6/Fq12 (ops.fq12) and the optimal ate pairing (ops.pairing) against py_ecc.

py_ecc represents Fq12 as Fq[W]/(W¹² − 2W⁶ + 2).  Our tower is
Fq2[w]/(w⁶ − ξ), ξ = 1 + u, and w⁶ − 1 = u satisfies u² = −1 there too, so
W = w is an isomorphism: an Fq2 coefficient a + b·u of w^k becomes
(a − b)·W^k + b·W^(k+6).  ``to_pe``/``from_pe`` below implement it (checked to
be a ring map on v³ = ξ, w² = v and random products), and every tower
operation is compared with py_ecc's arithmetic through it.

GT values: py_ecc's pairing(Q, P) is f_{|x|,Q}(P)^((p¹²−1)/r); ours (like
arkworks and blst) is f_{x,Q}(P)^(3(p¹²−1)/r) with x < 0, i.e. py_ecc's
value to the power −3.  The tests check exactly that, plus bilinearity,
non-degeneracy, r-torsion and the identity conventions.

Shapes: Fq6/Fq12 batches of N lanes, pairing batches of N lanes (one
compile of the Miller loop per number of pairs, one of the final
exponentiation).
"""
from __future__ import annotations

import random

import jax.numpy as jnp
import numpy as np
import pytest
from py_ecc import optimized_bls12_381 as ob
from py_ecc.fields import optimized_bls12_381_FQ12 as PeFQ12

from conftest import P, R
from ops import pairing as pr
from ops.curve import G1, G2
from ops.fq12 import Fq6, Fq12

N = 4
X_ABS = 0xd201000000010000          # |x| of BLS12-381 (py_ecc's ate_loop_count)
FINAL_EXP = 3 * (P ** 12 - 1) // R   # arkworks' / blst's final exponent


# ---------------------------------------------------------------- representation change
def to_pe(x) -> PeFQ12:
    """Our Fq12 coefficients ((c00, c01, c02), (c10, c11, c12)), each an Fq2
    pair, -> py_ecc FQ12.  c_j.c_i multiplies w^(2i + j)."""
    co = [0] * 12
    for j in range(2):
        for i in range(3):
            a, b = x[j][i]
            k = 2 * i + j
            co[k] = (co[k] + a - b) % P
            co[k + 6] = (co[k + 6] + b) % P
    return PeFQ12(co)


def from_pe(f) -> tuple:
    co = [int(c) % P for c in f.coeffs]
    out = [[None] * 3 for _ in range(2)]
    for k in range(6):
        b = co[k + 6]
        out[k % 2][k // 2] = ((co[k] + b) % P, b)
    return tuple(tuple(r) for r in out)


def fq6_to_pe(x) -> PeFQ12:
    return to_pe((x, ((0, 0),) * 3))


def fq6_from_pe(f) -> tuple:
    c0, c1 = from_pe(f)
    assert c1 == ((0, 0),) * 3, "not an Fq6 element"
    return c0


def as_tuples(arr, F) -> list:
    """Device Fq6/Fq12 batch -> list of nested int tuples."""
    ints = F.to_int(arr)

    def nest(a):
        return tuple(nest(x) for x in a) if isinstance(a, np.ndarray) else int(a)
    return [nest(x) for x in ints]


def dev(F, xs):
    return jnp.asarray(F.from_int(np.array(xs, dtype=object)))


ONE12 = (((1, 0), (0, 0), (0, 0)), ((0, 0), (0, 0), (0, 0)))
ZERO12 = ((((0, 0),) * 3),) * 2


def rand12(rng, n):
    return [tuple(tuple((rng.randrange(P), rng.randrange(P)) for _ in range(3)) for _ in range(2))
            for _ in range(n)]


# ---------------------------------------------------------------- the reference map itself
def test_reference_map_is_a_ring_map():
    v = ((((0, 0)), (1, 0), (0, 0)), ((0, 0),) * 3)
    w = (((0, 0),) * 3, ((1, 0), (0, 0), (0, 0)))
    xi = (((1, 1), (0, 0), (0, 0)), ((0, 0),) * 3)
    assert to_pe(v) ** 3 == to_pe(xi)
    assert to_pe(w) ** 2 == to_pe(v)
    assert to_pe(w) ** 6 == to_pe(xi)
    rng = random.Random(7)
    a, b = rand12(rng, 2)
    assert from_pe(to_pe(a)) == a
    # (a + b)·w computed coefficient-wise must equal the image of a + b times w
    s = tuple(tuple(((x[0] + y[0]) % P, (x[1] + y[1]) % P) for x, y in zip(r1, r2))
              for r1, r2 in zip(a, b))
    assert to_pe(s) == to_pe(a) + to_pe(b)


# ---------------------------------------------------------------- Fq6
@pytest.fixture(scope="module")
def fq6_vals():
    rng = random.Random(66)
    zero, one = ((0, 0),) * 3, ((1, 0), (0, 0), (0, 0))
    edge = ((P - 1, P - 1), (0, 1), (P - 1, 0))
    rnd = [tuple((rng.randrange(P), rng.randrange(P)) for _ in range(3)) for _ in range(2 * N)]
    a = [zero, one, edge] + rnd[:N - 3]
    b = [rnd[N], edge, one] + rnd[N + 1:2 * N - 2]
    return a, b


def test_fq6_ring_ops(fq6_vals):
    a, b = fq6_vals
    A, B = dev(Fq6, a), dev(Fq6, b)
    pa, pb = [fq6_to_pe(x) for x in a], [fq6_to_pe(x) for x in b]
    assert as_tuples(Fq6.mul(A, B), Fq6) == [fq6_from_pe(x * y) for x, y in zip(pa, pb)]
    assert as_tuples(Fq6.square(A), Fq6) == [fq6_from_pe(x * x) for x in pa]
    assert as_tuples(Fq6.inv(B), Fq6) == [fq6_from_pe(PeFQ12.one() / y) for y in pb]
    assert as_tuples(Fq6.inv(A), Fq6)[0] == ((0, 0),) * 3            # 0 -> 0
    assert as_tuples(Fq6.frobenius(A, 1), Fq6) == [fq6_from_pe(x ** P) for x in pa]


def test_fq6_mul_by_01(fq6_vals):
    a, b = fq6_vals
    got = as_tuples(Fq6.mul_by_01(dev(Fq6, a), dev(Fq6, b)[0], dev(Fq6, b)[1]), Fq6)
    want = [fq6_from_pe(fq6_to_pe(x) * fq6_to_pe((y[0], y[1], (0, 0)))) for x, y in zip(a, b)]
    assert got == want


# ---------------------------------------------------------------- Fq12
@pytest.fixture(scope="module")
def fq12_vals():
    rng = random.Random(1212)
    rnd = rand12(rng, 2 * N)
    a = [ZERO12, ONE12] + rnd[:N - 2]
    b = rnd[N:]
    return a, b


def test_fq12_ring_ops(fq12_vals):
    a, b = fq12_vals
    A, B = dev(Fq12, a), dev(Fq12, b)
    pa, pb = [to_pe(x) for x in a], [to_pe(x) for x in b]
    assert as_tuples(Fq12.add(A, B), Fq12) == [from_pe(x + y) for x, y in zip(pa, pb)]
    assert as_tuples(Fq12.sub(A, B), Fq12) == [from_pe(x - y) for x, y in zip(pa, pb)]
    assert as_tuples(Fq12.mul(A, B), Fq12) == [from_pe(x * y) for x, y in zip(pa, pb)]
    assert as_tuples(Fq12.square(A), Fq12) == [from_pe(x * x) for x in pa]
    assert as_tuples(Fq12.inv(B), Fq12) == [from_pe(PeFQ12.one() / y) for y in pb]
    assert as_tuples(Fq12.inv(A), Fq12)[0] == ZERO12                    # 0 -> 0
    assert as_tuples(Fq12.conjugate(A), Fq12) == [from_pe(x ** (P ** 6)) for x in pa]
    assert as_tuples(Fq12.pow(B, 5), Fq12) == [from_pe(y ** 5) for y in pb]


@pytest.mark.parametrize("k", [1, 2])
def test_fq12_frobenius(fq12_vals, k):
    a, b = fq12_vals
    assert as_tuples(Fq12.frobenius(dev(Fq12, b), k), Fq12) == [
        from_pe(to_pe(x) ** (P ** k)) for x in b]


def test_fq12_mul_by_014(fq12_vals):
    a, b = fq12_vals
    lines = [(y[0][0], y[0][1], y[1][1]) for y in b]          # c0, c1·v, c4·vw
    L = dev(Fq6, lines)                                     # (3, 2, 12, N): the line layout
    sparse = [((l[0], l[1], (0, 0)), ((0, 0), l[2], (0, 0))) for l in lines]
    got = as_tuples(Fq12.mul_by_014(dev(Fq12, a), L), Fq12)
    assert got == [from_pe(to_pe(x) * to_pe(s)) for x, s in zip(a, sparse)]


def test_fq12_cyclotomic_square(fq12_vals):
    """On the cyclotomic subgroup (images of the easy part) the Granger–Scott
    square is the square; on a generic element it is not."""
    a, b = fq12_vals
    easy = (P ** 6 - 1) * (P ** 2 + 1)
    cyc = [to_pe(x) ** easy for x in b]
    got = as_tuples(Fq12.cyclotomic_square(dev(Fq12, [from_pe(g) for g in cyc])), Fq12)
    assert got == [from_pe(g * g) for g in cyc]
    generic = as_tuples(Fq12.cyclotomic_square(dev(Fq12, b)), Fq12)
    assert generic != [from_pe(to_pe(x) ** 2) for x in b]


def test_tower_host_side(fq12_vals):
    a, b = fq12_vals
    assert as_tuples(Fq12.ones((2,)), Fq12) == [ONE12] * 2
    assert as_tuples(Fq12.zeros((1,)), Fq12) == [ZERO12]
    assert as_tuples(Fq12.constant(b[0], (3,)), Fq12) == [b[0]] * 3
    assert Fq12.to_int(Fq12.from_int(b[1])) == b[1]                  # a single element
    xs = Fq6.random_ints(3, random.Random(3))
    assert as_tuples(Fq6.from_int(xs), Fq6) == xs
    assert all(0 <= c < P for x in xs for pair in x for c in pair)


def test_tower_host_conversion_rejects_bad_shapes():
    with pytest.raises(ValueError, match="coefficients of shape"):
        Fq12.from_int([(1, 2), (3, 4)])
    with pytest.raises(ValueError, match="outside"):
        Fq6.from_int([((P, 0), (0, 0), (0, 0))])
    with pytest.raises(ValueError, match="expected shape"):
        Fq12.to_int(np.zeros((3, 2, 12, 1), np.uint32))
    with pytest.raises(TypeError, match="Fq12 only"):
        Fq6.conjugate(jnp.zeros((3, 2, 12, 1), jnp.uint32))
    with pytest.raises(TypeError, match="Fq6 only"):
        Fq12.mul_by_nonresidue(jnp.zeros((2, 3, 2, 12, 1), jnp.uint32))


# ---------------------------------------------------------------- final exponentiation
def test_final_exponentiation_matches_exponent(fq12_vals):
    """For arbitrary f (not Miller-loop outputs): f^(3(p¹²−1)/r), 1 -> 1, 0 -> 0."""
    a, b = fq12_vals
    xs = [ONE12, ZERO12] + b[:N - 2]
    got = as_tuples(pr.final_exponentiation(dev(Fq12, xs)), Fq12)
    assert got[:2] == [ONE12, ZERO12]
    assert got[2:] == [from_pe(to_pe(x) ** FINAL_EXP) for x in xs[2:]]


# ---------------------------------------------------------------- pairings
def g1_int(k):
    pt = ob.normalize(ob.multiply(ob.G1, k % R)) if k % R else None
    return None if pt is None else (int(pt[0]), int(pt[1]))


def g2_int(k):
    if k % R == 0:
        return None
    x, y = ob.normalize(ob.multiply(ob.G2, k % R))
    return (tuple(int(c) for c in x.coeffs), tuple(int(c) for c in y.coeffs))


def pe_pairing(a, b) -> PeFQ12:
    """py_ecc's e(b·G2, a·G1) (its own convention)."""
    return ob.pairing(ob.multiply(ob.G2, b), ob.multiply(ob.G1, a))


@pytest.fixture(scope="module")
def scal():
    rng = random.Random(381)
    return [rng.randrange(2, R) for _ in range(4)]


@pytest.fixture(scope="module")
def pairings(scal):
    """Lanes (G1, G2), (aG1, bG2), (abG1, G2), (O, bG2), (aG1, O), (O, O),
    (cG1, dG2), (G1, abG2), in two calls of the same shape."""
    a, b, c, d = scal
    lanes = [(1, 1), (a, b), (a * b, 1), (0, b), (a, 0), (0, 0), (c, d), (1, a * b)]
    out = []
    for i in range(0, len(lanes), N):
        part = lanes[i:i + N]
        Ps = jnp.asarray(G1.from_affine_ints([g1_int(x) for x, _ in part]))
        Qs = jnp.asarray(G2.from_affine_ints([g2_int(y) for _, y in part]))
        out += as_tuples(pr.pairing(Ps, Qs), Fq12)
    return dict(zip(lanes, out))


def test_pairing_matches_py_ecc(pairings, scal):
    a, b, c, d = scal
    for x, y in [(1, 1), (c, d)]:
        want = PeFQ12.one() / pe_pairing(x, y) ** 3
        assert pairings[(x, y)] == from_pe(want), f"e({x}·G1, {y}·G2)"


def test_pairing_bilinear_and_nondegenerate(pairings, scal):
    a, b = scal[:2]
    g = to_pe(pairings[(1, 1)])
    assert g != PeFQ12.one()                                # non-degenerate
    assert g ** R == PeFQ12.one()                           # in GT (order r)
    ab = a * b % R
    assert pairings[(a, b)] == from_pe(g ** ab)
    assert pairings[(a * b, 1)] == pairings[(a, b)] == pairings[(1, a * b)]


def test_pairing_identity(pairings, scal):
    a, b = scal[:2]
    for lane in [(0, b), (a, 0), (0, 0)]:
        assert pairings[lane] == ONE12, f"lane {lane}"


def test_pairing_matches_arkworks(pairings, scal):
    """Byte-exact against arkworks' GT serialization (c0.c0.c0, c0.c0.c1, …
    little-endian) where py-arkworks-bls12381 is installed."""
    ark = pytest.importorskip("py_arkworks_bls12381")
    c, d = scal[2:]
    gt = ark.GT.pairing(ark.G1Point() * ark.Scalar(c), ark.G2Point() * ark.Scalar(d))
    raw = bytes.fromhex(str(gt))
    co = [int.from_bytes(raw[48 * j:48 * j + 48], "little") for j in range(12)]
    want = tuple(tuple((co[6 * j + 2 * i], co[6 * j + 2 * i + 1]) for i in range(3))
                 for j in range(2))
    assert pairings[(c, d)] == want


def test_pairing_product_is_one(scal, pairings):
    """Four pairs per lane (the shape of a Groth16 check
    e(−A, B)·e(α, β)·e(L, γ)·e(C, δ) = 1):
    lane 0 a valid Groth16-style relation, lane 1 the same with C perturbed,
    lane 2 e(aP, bQ)·e(−abP, Q) with two identity pairs, lane 3 the same with
    −(ab + 1)P.  The products' values are checked too."""
    rng = random.Random(16)
    a, b = scal[:2]
    ab = a * b % R
    al, be, l, ga, de = (rng.randrange(1, R) for _ in range(5))
    c = (ab - al * be - l * ga) * pow(de, -1, R) % R          # a·b = α·β + l·γ + c·δ
    lanes = [
        [(-a, b), (al, be), (l, ga), (c, de)],
        [(-a, b), (al, be), (l, ga), (c + 1, de)],
        [(a, b), (-ab, 1), (0, 5), (7, 0)],
        [(a, b), (-ab - 1, 1), (0, 0), (0, 0)],
    ]
    Ps = [jnp.asarray(G1.from_affine_ints([g1_int(lane[i][0]) for lane in lanes])) for i in range(4)]
    Qs = [jnp.asarray(G2.from_affine_ints([g2_int(lane[i][1]) for lane in lanes])) for i in range(4)]
    ok = [bool(v) for v in np.asarray(pr.pairing_product_is_one(Ps, Qs))]
    assert ok == [True, False, True, False]
    prod = as_tuples(pr.final_exponentiation(pr.multi_miller_loop(Ps, Qs)), Fq12)
    g = to_pe(pairings[(1, 1)])
    assert prod[0] == prod[2] == ONE12
    assert prod[1] == from_pe(g ** de)                      # e(G1, G2)^δ from the extra δ·G1
    assert prod[3] == from_pe(PeFQ12.one() / g)             # e(P, Q)^(ab − ab − 1)


def test_groth16_shaped_batch_with_shared_key():
    """Verifying-key points given once, unbatched ((2, 12) / (2, 2, 12)), against
    a batch of N proofs: e(−A_i, B_i)·e(α, β)·e(L_i, γ)·e(C_i, δ) = 1, with a
    wrong C in lane 1 (same compiled shapes as the test above)."""
    rng = random.Random(17)
    al, be, ga, de = (rng.randrange(1, R) for _ in range(4))
    A, B, L, C = [], [], [], []
    for i in range(N):
        a, b, l = (rng.randrange(1, R) for _ in range(3))
        c = (a * b - al * be - l * ga) * pow(de, -1, R) % R + (i == 1)
        A.append(-a), B.append(b), L.append(l), C.append(c)

    def g1s(ks):
        return jnp.asarray(G1.from_affine_ints([g1_int(k) for k in ks]))

    def g2s(ks):
        return jnp.asarray(G2.from_affine_ints([g2_int(k) for k in ks]))

    Ps = [g1s(A), g1s([al])[..., 0], g1s(L), g1s(C)]
    Qs = [g2s(B), g2s([be])[..., 0], g2s([ga])[..., 0], g2s([de])[..., 0]]
    assert Ps[1].shape == (2, 12) and Qs[1].shape == (2, 2, 12)
    ok = [bool(v) for v in np.asarray(pr.pairing_product_is_one(Ps, Qs))]
    assert ok == [True, False, True, True]


def test_pairing_rejects_bad_input():
    P1 = jnp.zeros((2, 12, N), jnp.uint32)
    Q1 = jnp.zeros((2, 2, 12, N), jnp.uint32)
    with pytest.raises(ValueError, match="as many G1 as G2"):
        pr.multi_miller_loop([P1, P1], [Q1])
    with pytest.raises(ValueError, match="G2 point must be affine"):
        pr.miller_loop(P1, P1)
    with pytest.raises(ValueError, match="G1 point must be affine"):
        pr.miller_loop(Q1, Q1)
    with pytest.raises(TypeError, match="sequences"):
        pr.multi_miller_loop(P1, Q1)
    with pytest.raises(ValueError, match="Fq12"):
        pr.final_exponentiation(P1)


@pytest.mark.slow
def test_miller_kernels_in_pallas_interpret_mode(scal):
    """The GPU path of the doubling and addition steps (product rounds with the
    Fq product kernel in Pallas interpret mode, ~30 s on the CPU)
    against the default path."""
    import dataclasses
    from ops.field import Fq, P_FQ
    from ops.fq12 import product_rounds
    from ops.tower import Fp2Arith

    cfg = dataclasses.replace(pr.CONFIG, interpret=True)

    def rounds(method, ins, outs):
        return product_rounds(lambda ar, *xs: getattr(pr.MillerArith(Fp2Arith(ar)), method)(*xs),
                              ins, outs, P_FQ, cfg)

    a, b, c, d = scal
    Ps = jnp.asarray(G1.from_affine_ints([g1_int(x) for x in (a, b, 0, c)]))
    Qs = jnp.asarray(G2.from_affine_ints([g2_int(x) for x in (c, d, a, 0)]))
    T = jnp.asarray(G2.from_affine(jnp.asarray(G2.from_affine_ints([g2_int(x) for x in (b, a, d, c)]))))
    keep = jnp.asarray(Fq.from_int([1, 1, 0, 0]))
    want = pr.double_line(T, Ps, keep)
    got = rounds("double_line", [pr.G2_PROJ, pr.G1_AFF, pr.FQ], [pr.G2_PROJ, pr.LINE])(T, Ps, keep)
    assert all(bool((g == w).all()) for g, w in zip(got, want))
    want = pr.add_line(T, Qs, Ps, keep)
    got = rounds("add_line", [pr.G2_PROJ, pr.G2_AFF, pr.G1_AFF, pr.FQ],
                 [pr.G2_PROJ, pr.LINE])(T, Qs, Ps, keep)
    assert all(bool((g == w).all()) for g, w in zip(got, want))
