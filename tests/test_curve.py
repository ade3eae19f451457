"""G1 and G2 (ops.curve) against py_ecc.

Projective inputs get a random Z per point (built on the host by hand), so the
formulas are exercised on non-normalised coordinates; outputs are read back
with host arithmetic (``read_projective``), independent of ops' to_affine.
All device calls use batches of N_CURVE lanes.
"""
from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest
from py_ecc import bls12_381 as b

from conftest import (N_CURVE, P, R, affine_array, curve_b, f2add, from_pyecc, host_neg, is_g2,
                      on_curve_host, pe_add, pe_gen, pe_mul, pe_mul_raw, projective_array,
                      raw_projective_array, read_affine, read_projective, to_bool_list, to_pyecc)
from ops.curve import G1, G2
from ops.field import Fr

CURVES = [pytest.param(G1, id="G1"), pytest.param(G2, id="G2")]

# BLS12-381 parameter x (the curve's seed), for independent cofactors
X_BLS = -0xd201000000010000


def _pe_double(C, pt):
    return from_pyecc(C, b.double(to_pyecc(C, pt)))


def _check(name, inputs, got, want):
    bad = [(i, x) for i, (x, g, w) in enumerate(zip(inputs, got, want)) if g != w]
    assert not bad, f"{name} wrong in lanes {[i for i, _ in bad]}; first input {bad[0][1]}"


# ---------------------------------------------------------------- constants
@pytest.mark.parametrize("C", CURVES)
def test_generator_matches_py_ecc(C):
    assert C.generator == from_pyecc(C, pe_gen(C))
    assert C.to_affine_ints(C.generator_affine(), projective=False) == from_pyecc(C, pe_gen(C))
    assert C.b == curve_b(C)
    assert C.order == R


def test_cofactors_from_curve_parameter():
    x = X_BLS
    assert G1.cofactor == (x - 1) ** 2 // 3
    h2 = (x ** 8 - 4 * x ** 7 + 5 * x ** 6 - 4 * x ** 4 + 6 * x ** 3 - 4 * x ** 2 - 4 * x + 13) // 9
    assert G2.cofactor == h2


@pytest.mark.parametrize("C", CURVES)
def test_identity(C):
    ident = C.identity((N_CURVE,))
    assert read_projective(C, ident) == [None] * N_CURVE
    assert to_bool_list(C.is_identity(ident)) == [True] * N_CURVE
    assert C.to_affine_ints(ident) == [None] * N_CURVE


# ---------------------------------------------------------------- group law
@pytest.mark.parametrize("C", CURVES)
def test_add(C, curve_refs, rng):
    pts = curve_refs[C.name]["points"]
    two_p0 = _pe_double(C, pts[0])
    lhs = pts[:10] + [pts[3], pts[4], pts[5], None, None, pts[6]]
    rhs = pts[1:11] + [pts[3], host_neg(C, pts[4]), None, pts[5], None, two_p0]
    got = read_projective(C, C.add(projective_array(C, lhs, rng), projective_array(C, rhs, rng)))
    want = [pe_add(C, x, y) for x, y in zip(lhs, rhs)]
    assert want[11] is None and want[14] is None
    _check(f"{C.name}.add", list(zip(lhs, rhs)), got, want)


@pytest.mark.parametrize("C", CURVES)
def test_add_is_commutative_and_associative(C, curve_refs, rng):
    pts = curve_refs[C.name]["points"]
    a = projective_array(C, pts, rng)
    b_ = projective_array(C, pts[5:] + pts[:5], rng)
    c = projective_array(C, pts[9:] + pts[:9], rng)
    ab = C.add(a, b_)
    assert read_projective(C, ab) == read_projective(C, C.add(b_, a))
    assert read_projective(C, C.add(ab, c)) == read_projective(C, C.add(a, C.add(b_, c)))


@pytest.mark.parametrize("C", CURVES)
def test_madd(C, curve_refs, rng):
    pts = curve_refs[C.name]["points"]
    proj = pts[:8] + [pts[8], pts[9], pts[10], None, None, pts[11], pts[12], None]
    aff = pts[8:16] + [pts[8], host_neg(C, pts[9]), None, pts[11], None, pts[11],
                       host_neg(C, pts[12]), pts[0]]
    if not is_g2(C):
        # (0, ±2): on y^2 = x^3 + 4 (3-torsion, outside G1); x = 0 but not the (0, 0) identity.
        # The formulas are complete on the whole curve, so madd must handle it.
        aff[6], aff[7] = (0, 2), (0, P - 2)
    got = read_projective(C, C.madd(projective_array(C, proj, rng), affine_array(C, aff)))
    want = [pe_add(C, x, y) for x, y in zip(proj, aff)]
    _check(f"{C.name}.madd", list(zip(proj, aff)), got, want)


@pytest.mark.slow
@pytest.mark.parametrize("C", CURVES)
def test_other_split_setting(C, curve_refs, rng):
    """add/madd/double with the kernel split the default object does not use
    (G1 default: one kernel each; G2 default: products + tail kernels)."""
    Cv = dataclasses.replace(C, split=not C.split)
    pts = curve_refs[C.name]["points"]
    lhs = pts[:12] + [None, pts[12], pts[13], None]
    rhs = pts[4:16] + [pts[0], None, host_neg(C, pts[14]), None]
    a, q = projective_array(C, lhs, rng), affine_array(C, rhs)
    want = [pe_add(C, x, y) for x, y in zip(lhs, rhs)]
    assert read_projective(C, Cv.add(a, projective_array(C, rhs, rng))) == want
    assert read_projective(C, Cv.madd(a, q)) == want
    assert read_projective(C, Cv.double(a)) == [pe_add(C, x, x) for x in lhs]


@pytest.mark.parametrize("C", CURVES)
def test_double(C, curve_refs, rng):
    pts = curve_refs[C.name]["points"][:N_CURVE - 2] + [None, None]
    got = read_projective(C, C.double(projective_array(C, pts, rng)))
    _check(f"{C.name}.double", pts, got, [_pe_double(C, x) for x in pts])


@pytest.mark.parametrize("C", CURVES)
def test_neg(C, curve_refs, rng):
    pts = curve_refs[C.name]["points"][:N_CURVE - 1] + [None]
    got = read_projective(C, C.neg(projective_array(C, pts, rng)))
    _check(f"{C.name}.neg", pts, got, [from_pyecc(C, b.neg(to_pyecc(C, x))) for x in pts])


@pytest.mark.parametrize("C", CURVES)
def test_eq_and_is_identity(C, curve_refs, rng):
    pts = curve_refs[C.name]["points"]
    lhs = pts[:6] + [pts[6], pts[7], None, None, pts[8], pts[9], pts[10], pts[11], None, pts[12]]
    rhs = pts[:6] + [host_neg(C, pts[6]), pts[8], None, pts[0], None, pts[9], pts[11],
                     _pe_double(C, pts[11]), None, pts[12]]
    want = [x == y for x, y in zip(lhs, rhs)]
    assert want.count(True) >= 6 and want.count(False) >= 5
    a, b_ = projective_array(C, lhs, rng), projective_array(C, rhs, rng)   # different Zs
    assert to_bool_list(C.eq(a, b_)) == want
    assert to_bool_list(C.is_identity(a)) == [x is None for x in lhs]


# ---------------------------------------------------------------- scalar multiplication
def _scalars(rng):
    ks = [0, 1, 2, 3, R - 1, R - 2, 2 ** 254, 2 ** 32 - 1, (R - 1) // 2, 2 ** 255 - 1 - 2 ** 254]
    return ks + [rng.randrange(R) for _ in range(N_CURVE - len(ks))]


@pytest.mark.parametrize("C", CURVES)
def test_scalar_mul(C, curve_refs, rng):
    pts = list(curve_refs[C.name]["points"])
    pts[7] = None                                        # identity base
    ks = _scalars(rng)
    s = jnp.asarray(Fr.from_int(ks))
    got = read_projective(C, C.scalar_mul(projective_array(C, pts, rng), s))
    want = [pe_mul(C, pt, k) if pt is not None else None for pt, k in zip(pts, ks)]
    _check(f"{C.name}.scalar_mul", list(zip(pts, ks)), got, want)


def test_scalar_mul_int_small_bits(curve_refs, rng):
    """G1.scalar_mul_int with 2-limb (64-bit) integer scalars."""
    C = G1
    pts = curve_refs[C.name]["points"]
    ks = [0, 1, 2 ** 64 - 1, 2 ** 63] + [rng.randrange(2 ** 64) for _ in range(N_CURVE - 4)]
    k = np.array([[x & 0xFFFFFFFF for x in ks], [x >> 32 for x in ks]], dtype=np.uint32)
    got = read_projective(C, C.scalar_mul_int(projective_array(C, pts, rng), jnp.asarray(k), 64))
    _check("G1.scalar_mul_int", list(zip(pts, ks)), got, [pe_mul(C, pt, x) for pt, x in zip(pts, ks)])


@pytest.mark.parametrize("C,window", [
    # each case is 15-40 s of XLA:CPU compile: by default only G1 with the default window
    pytest.param(G1, 8, id="G1-w8"),
    pytest.param(G1, 4, id="G1-w4", marks=pytest.mark.slow),
    pytest.param(G2, 4, id="G2-w4", marks=pytest.mark.slow),
    pytest.param(G2, 8, id="G2-w8", marks=pytest.mark.slow),
    # 5 does not divide 32: digits straddle two scalar limbs
    pytest.param(G1, 5, id="G1-w5", marks=pytest.mark.slow),
])
def test_fixed_base_mul(C, window, curve_refs, rng):
    base = from_pyecc(C, pe_gen(C)) if window == 8 else curve_refs[C.name]["points"][3]
    ks = _scalars(rng)
    s = jnp.asarray(Fr.from_int(ks))
    out = C.fixed_base_mul(jnp.asarray(affine_array(C, [base])[..., 0]), s, window)
    assert out.shape == C.proj + (N_CURVE,)
    got = read_projective(C, out)
    _check(f"{C.name}.fixed_base_mul(w={window})", ks, got, [pe_mul(C, base, k) for k in ks])


# ---------------------------------------------------------------- coordinates
@pytest.mark.parametrize("C", CURVES)
def test_to_affine(C, curve_refs, rng):
    pts = list(curve_refs[C.name]["points"])
    pts[2] = pts[9] = None
    aff = C.to_affine(projective_array(C, pts, rng))
    assert aff.shape == C.aff + (N_CURVE,)
    want = affine_array(C, pts)                           # identity -> (0, 0)
    np.testing.assert_array_equal(np.asarray(aff), np.asarray(want))
    assert C.to_affine_ints(projective_array(C, pts, rng)) == pts


@pytest.mark.parametrize("C", CURVES)
def test_from_affine(C, curve_refs, rng):
    pts = list(curve_refs[C.name]["points"])
    pts[0] = pts[11] = None
    proj = C.from_affine(affine_array(C, pts))
    assert read_projective(C, proj) == pts
    assert to_bool_list(C.is_identity(proj)) == [x is None for x in pts]


@pytest.mark.parametrize("C", CURVES)
def test_host_point_conversions(C, curve_refs):
    pts = list(curve_refs[C.name]["points"][:4]) + [None]
    arr = C.from_affine_ints(pts)
    assert arr.shape == C.aff + (5,)
    assert read_affine(C, arr) == pts
    assert C.to_affine_ints(arr, projective=False) == pts
    one = C.from_affine_int(pts[1])
    assert one.shape == C.aff
    assert C.to_affine_ints(one, projective=False) == pts[1]
    x, y = pts[0]
    bad_y = f2add(y, (1, 0)) if is_g2(C) else (y + 1) % P
    with pytest.raises(ValueError):
        C.from_affine_ints([pts[1], (x, bad_y)])


# ---------------------------------------------------------------- membership
def _bad_y(C, pt):
    x, y = pt
    return (x, f2add(y, (1, 0)) if is_g2(C) else (y + 1) % P)


@pytest.mark.parametrize("C", CURVES)
def test_is_on_curve(C, curve_refs, rng):
    pts = curve_refs[C.name]["points"]
    good = pts[:6] + [None, None]
    offc = [_bad_y(C, pt) for pt in pts[6:12]]
    for pt in offc:
        assert not on_curve_host(C, pt)
    # projective: valid points with random Z, the identity; off-curve points; (0:0:0)
    zero = (0, 0) if is_g2(C) else 0
    one = (1, 0) if is_g2(C) else 1
    proj = np.concatenate([np.asarray(projective_array(C, good + offc, rng))[..., :14],
                           np.asarray(raw_projective_array(C, [(zero, zero, zero), (one, one, zero)]))],
                          axis=-1)
    want = [True] * 8 + [False] * 6 + [False, False]       # (0:0:0) and (1:1:0) are not points
    assert to_bool_list(C.is_on_curve(jnp.asarray(proj))) == want
    # affine, (0, 0) = identity accepted; (0, 1) and (1, 1) rejected
    aff_pts = good + offc + [(zero, one), (one, one)]
    want_aff = [True] * 8 + [False] * 8
    assert to_bool_list(C.is_on_curve_affine(affine_array(C, aff_pts))) == want_aff


@pytest.mark.parametrize("C", CURVES)
def test_non_subgroup_points_are_valid_references(C, curve_refs):
    """The reference points used below: on the curve, r·Q != O (py_ecc), and
    clearing the cofactor lands in the subgroup."""
    for q in curve_refs[C.name]["bad"]:
        assert on_curve_host(C, q)
        assert pe_mul_raw(C, q, R) is not None
        hq = pe_mul_raw(C, q, C.cofactor)
        assert hq is None or pe_mul_raw(C, hq, R) is None
    # at least one of them is not pure cofactor torsion (h·Q != O)
    assert any(pe_mul_raw(C, q, C.cofactor) is not None for q in curve_refs[C.name]["bad"])


@pytest.mark.parametrize("C", CURVES)
def test_in_subgroup(C, curve_refs, rng):
    refs = curve_refs[C.name]
    pts, bad = refs["points"], refs["bad"]
    cleared = [pe_mul_raw(C, q, C.cofactor) for q in bad]
    lanes_ = (pts[:3] + [None] + bad + [host_neg(C, bad[0])] + cleared
              + [pe_add(C, pts[0], bad[-1])])
    lanes_ += pts[8:8 + N_CURVE - len(lanes_)]
    # expectation from py_ecc: r·Q = O
    want = [q is None or pe_mul_raw(C, q, R) is None for q in lanes_]
    assert want[:-3].count(False) == len(bad) + 2 and len(lanes_) == N_CURVE
    proj = np.array(projective_array(C, lanes_, rng))
    # last lanes: not points of the curve, must be rejected too: (x : y+1 : 1), and
    # (0 : 0 : 0), (1 : 1 : 0) whose multiples keep Z = 0
    x, y = _bad_y(C, pts[7])
    zero, one = ((0, 0), (1, 0)) if is_g2(C) else (0, 1)
    proj[..., -3:] = np.asarray(raw_projective_array(C, [(x, y, one), (zero, zero, zero),
                                                         (one, one, zero)]))
    want[-3:] = [False] * 3
    assert to_bool_list(C.in_subgroup(jnp.asarray(proj))) == want
