"""The GPU kernel bodies, run by Pallas in interpret mode on any backend
(``KernelConfig(interpret=True)``): an independent check of the Pallas path
against Python ints / py_ecc and against the default path (the CPU
register-machine interpreter on the CPU, the real kernels on a GPU).

Small batches only (<= 128 lanes: interpret mode is slow to compile).  The
default block is bn = 128 lanes, so N_FIELD = 64 lanes also checks the
padding of a partial block; one case uses bn = 32 for a multi-program grid.
"""
from __future__ import annotations

import dataclasses
import random

import jax.numpy as jnp
import numpy as np
import pytest

from conftest import N_CURVE, N_FIELD, P, affine_array, f2mul, pe_add, projective_array, \
    read_projective
from ops.curve import G1, G2
from ops.elementwise import KernelConfig
from ops.field import Fq, Fr
from ops.limbs import Unroll
from ops.tower import Fq2

INTERP = KernelConfig(interpret=True)


def _variant(obj, **kw):
    return dataclasses.replace(obj, config=dataclasses.replace(INTERP, **kw))


def _edge_mix(p, n, rng):
    edges = [0, 1, p - 1, p - 2, (p - 1) // 2, 2 ** 32 - 1, 2 ** 32, 2 ** 64 - 1]
    return edges + [rng.randrange(p) for _ in range(n - len(edges))]


@pytest.mark.parametrize("F,op,ref", [
    pytest.param(Fq, "mul", lambda x, y, p: x * y % p, id="Fq.mul"),
    pytest.param(Fr, "mul", lambda x, y, p: x * y % p, id="Fr.mul"),
    pytest.param(Fq, "add", lambda x, y, p: (x + y) % p, id="Fq.add"),
    pytest.param(Fq, "sub", lambda x, y, p: (x - y) % p, id="Fq.sub"),
])
def test_field_kernels(F, op, ref):
    rng = random.Random(1)
    a = _edge_mix(F.p, N_FIELD, rng)
    b = list(reversed(_edge_mix(F.p, N_FIELD, rng)))
    A, B = jnp.asarray(F.from_int(a)), jnp.asarray(F.from_int(b))
    got = getattr(_variant(F), op)(A, B)
    assert got.shape == A.shape and got.dtype == jnp.uint32
    assert [int(v) for v in F.to_int(got)] == [ref(x, y, F.p) for x, y in zip(a, b)]
    np.testing.assert_array_equal(np.asarray(got), np.asarray(getattr(F, op)(A, B)))


@pytest.mark.parametrize("unroll", [Unroll(inner=False), Unroll(chains=True, mul=True, inner=False)],
                         ids=["inner-rolled", "unrolled-outer-and-chains"])
def test_fq_mul_unroll_variants(unroll):
    """The loop-emission variants (ops.limbs.Unroll) compute the same products."""
    rng = random.Random(9)
    a, b = _edge_mix(P, N_FIELD, rng), list(reversed(_edge_mix(P, N_FIELD, rng)))
    got = _variant(Fq, unroll=unroll).mul(jnp.asarray(Fq.from_int(a)), jnp.asarray(Fq.from_int(b)))
    assert [int(v) for v in Fq.to_int(got)] == [x * y % P for x, y in zip(a, b)]


def test_fq_mul_multi_program_grid():
    """bn = 32: the 64 lanes are two Pallas programs."""
    rng = random.Random(2)
    a, b = _edge_mix(P, N_FIELD, rng), [rng.randrange(P) for _ in range(N_FIELD)]
    got = _variant(Fq, bn=32).mul(jnp.asarray(Fq.from_int(a)), jnp.asarray(Fq.from_int(b)))
    assert [int(v) for v in Fq.to_int(got)] == [x * y % P for x, y in zip(a, b)]


@pytest.mark.parametrize("e", [2 ** 40 + 5, None], ids=["2^40+5", "inv"])
def test_fq_pow_and_inv(e):
    """Exponentiation by a constant: on the Pallas path the exponent bits are
    picked inside the kernel loop (FpArith.exp_bit), code the CPU interpreter
    never runs.  (Beyond the kernels the brief listed; < 1 s to compile here.)"""
    rng = random.Random(10)
    a = _edge_mix(P, N_FIELD, rng)
    A = jnp.asarray(Fq.from_int(a))
    F = _variant(Fq)
    got = F.inv(A) if e is None else F.pow(A, e)
    want = [pow(x, P - 2 if e is None else e, P) for x in a]
    assert [int(v) for v in Fq.to_int(got)] == want


@pytest.mark.parametrize("unroll", [Unroll(), G2.config.unroll], ids=["rolled", "g2-config"])
def test_fq2_mul(unroll):
    """Fq2.mul, also with G2's kernel settings (the 'table' product-group loop
    of FpArith.muls and rolled inner CIOS loops), which only the Pallas path uses."""
    rng = random.Random(3)
    n = 16
    xs = [(rng.randrange(P), rng.randrange(P)) for _ in range(n - 3)] + [(0, 0), (0, 1), (P - 1, P - 1)]
    ys = [(rng.randrange(P), rng.randrange(P)) for _ in range(n - 3)] + [(5, 6), (0, 1), (P - 1, 1)]
    X = jnp.asarray(Fq2.from_int(np.array(xs, dtype=object).reshape(n, 2)))
    Y = jnp.asarray(Fq2.from_int(np.array(ys, dtype=object).reshape(n, 2)))
    got = _variant(Fq2, unroll=unroll).mul(X, Y)
    assert [tuple(map(int, v)) for v in Fq2.to_int(got)] == [f2mul(x, y) for x, y in zip(xs, ys)]
    np.testing.assert_array_equal(np.asarray(got), np.asarray(Fq2.mul(X, Y)))


def test_g1_madd(curve_refs, rng):
    pts = curve_refs["G1"]["points"]
    proj = pts[:10] + [pts[10], pts[11], None, pts[12], None, pts[13]]
    aff = pts[6:16] + [pts[10], None, pts[2], (pts[12][0], (-pts[12][1]) % P), None, pts[13]]
    assert len(proj) == len(aff) == N_CURVE
    Pp, Aq = projective_array(G1, proj, rng), affine_array(G1, aff)
    got = _variant(G1).madd(Pp, Aq)
    assert read_projective(G1, got) == [pe_add(G1, x, y) for x, y in zip(proj, aff)]
    # same projective coordinates as the default path (same formula, same field ops)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(G1.madd(Pp, Aq)))
