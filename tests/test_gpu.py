"""On a CUDA machine: the real Pallas (Triton) kernels against the CPU path
(inputs committed to the CPU device run the register-machine interpreter,
``lax.platform_dependent``) and against Python ints / py_ecc.  Skipped where
the default device is not a GPU (see conftest)."""
from __future__ import annotations

import dataclasses
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import P, R, affine_array, f2_is_square, f2mul, pe_add, pe_mul, projective_array, \
    read_projective
from ops.curve import G1, G2
from ops.elementwise import KernelConfig
from ops.field import Fq, Fr
from ops.limbs import Unroll
from ops.tower import Fq2

pytestmark = pytest.mark.gpu

N = 1000                     # not a multiple of the 128-lane block
VARIANTS = {"rolled": Unroll(), "chains": Unroll(chains=True),
            "unrolled": Unroll(chains=True, mul=True), "table": Unroll(table=True)}


def _on(dev, *xs):
    return [jax.device_put(jnp.asarray(x), dev) for x in xs]


def _gpu_and_cpu(fn, *xs):
    """fn on the GPU and on the CPU; outputs as numpy, asserted equal."""
    gpu, cpu = jax.devices()[0], jax.devices("cpu")[0]
    assert gpu.platform == "gpu"
    g = fn(*_on(gpu, *xs))
    c = fn(*_on(cpu, *xs))
    g, c = (g, c) if isinstance(g, tuple) else ((g,), (c,))
    for a, b in zip(g, c):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    return [np.asarray(a) for a in g]


def _ints(p, n, rng):
    edges = [0, 1, p - 1, p - 2, (p - 1) // 2, 2 ** 32 - 1, 2 ** 32, 2 ** 64 - 1]
    return edges + [rng.randrange(p) for _ in range(n - len(edges))]


@pytest.mark.parametrize("F", [Fr, Fq], ids=["Fr", "Fq"])
@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_field_binary(F, op):
    rng = random.Random(1)
    a, b = _ints(F.p, N, rng), _ints(F.p, N, rng)[::-1]
    (got,) = _gpu_and_cpu(getattr(F, op), F.from_int(a), F.from_int(b))
    ref = {"add": lambda x, y: (x + y) % F.p, "sub": lambda x, y: (x - y) % F.p,
           "mul": lambda x, y: x * y % F.p}[op]
    assert [int(v) for v in F.to_int(got)] == [ref(x, y) for x, y in zip(a, b)]


@pytest.mark.parametrize("op", ["neg", "square", "inv", "batch_inv"])
def test_fq_unary(op):
    rng = random.Random(2)
    a = _ints(P, N, rng)
    (got,) = _gpu_and_cpu(getattr(Fq, op), Fq.from_int(a))
    ref = {"neg": lambda x: (-x) % P, "square": lambda x: x * x % P,
           "inv": lambda x: pow(x, P - 2, P), "batch_inv": lambda x: pow(x, P - 2, P)}[op]
    assert [int(v) for v in Fq.to_int(got)] == [ref(x) for x in a]


def test_fq_sqrt():
    rng = random.Random(3)
    a = _ints(P, N, rng)
    root, ok = _gpu_and_cpu(Fq.sqrt, Fq.from_int(a))
    for x, r, e in zip(a, Fq.to_int(root), ok):
        assert bool(e) == (x == 0 or pow(x, (P - 1) // 2, P) == 1)
        if e:
            assert int(r) * int(r) % P == x


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_fq_mul_unroll_variants(variant):
    F = dataclasses.replace(Fq, config=KernelConfig(unroll=VARIANTS[variant]))
    rng = random.Random(4)
    a, b = _ints(P, N, rng), _ints(P, N, rng)[::-1]
    (got,) = _gpu_and_cpu(F.mul, F.from_int(a), F.from_int(b))
    assert [int(v) for v in Fq.to_int(got)] == [x * y % P for x, y in zip(a, b)]


@pytest.mark.parametrize("op", ["mul", "square", "inv", "sqrt"])
def test_fq2(op):
    rng = random.Random(5)
    xs = [(rng.randrange(P), rng.randrange(P)) for _ in range(N - 3)] + [(0, 0), (0, 1), (P - 1, 0)]
    ys = xs[::-1]
    X = Fq2.from_int(np.array(xs, dtype=object).reshape(N, 2))
    Y = Fq2.from_int(np.array(ys, dtype=object).reshape(N, 2))
    if op == "mul":
        (got,) = _gpu_and_cpu(Fq2.mul, X, Y)
        want = [f2mul(x, y) for x, y in zip(xs, ys)]
    elif op == "square":
        (got,) = _gpu_and_cpu(Fq2.square, X)
        want = [f2mul(x, x) for x in xs]
    elif op == "inv":
        (got,) = _gpu_and_cpu(Fq2.inv, X)
        out = [tuple(map(int, v)) for v in Fq2.to_int(got)]
        assert all(f2mul(x, y) == ((1, 0) if x != (0, 0) else (0, 0)) for x, y in zip(xs, out))
        return
    else:
        root, ok = _gpu_and_cpu(Fq2.sqrt, X)
        for x, r, e in zip(xs, Fq2.to_int(root), ok):
            assert bool(e) == f2_is_square(x)
            if e:
                assert f2mul(tuple(map(int, r)), tuple(map(int, r))) == x
        return
    assert [tuple(map(int, v)) for v in Fq2.to_int(got)] == want


@pytest.fixture(scope="module")
def big_points():
    """N points per curve built from 16 py_ecc multiples (cycled)."""
    rng = random.Random(6)
    out = {}
    for C, g in ((G1, G1.generator), (G2, G2.generator)):
        base = [pe_mul(C, g, rng.randrange(1, R)) for _ in range(16)]
        out[C.name] = [base[i % 16] for i in range(N)]
    return out


@pytest.mark.parametrize("variant", ["rolled", "unrolled", "table"])
@pytest.mark.parametrize("C", [G1, G2], ids=["G1", "G2"])
def test_curve_ops(C, variant, big_points):
    Cv = dataclasses.replace(C, config=KernelConfig(unroll=VARIANTS[variant]))
    rng = random.Random(7)
    pts = list(big_points[C.name])
    qts = pts[7:] + pts[:7]
    pts[0] = None
    qts[1] = None
    qts[2] = pts[2]
    Pp, Qp, Qa = projective_array(C, pts, rng), projective_array(C, qts, rng), affine_array(C, qts)
    add, madd, dbl = _gpu_and_cpu(lambda p, q, a: (Cv.add(p, q), Cv.madd(p, a), Cv.double(p)),
                                  Pp, Qp, Qa)
    idx = list(range(8)) + [rng.randrange(N) for _ in range(8)]
    sub = lambda arr: arr[..., idx]
    want = [pe_add(C, pts[i], qts[i]) for i in idx]
    assert read_projective(C, sub(add)) == want
    assert read_projective(C, sub(madd)) == want
    assert read_projective(C, sub(dbl)) == [pe_add(C, pts[i], pts[i]) for i in idx]


@pytest.mark.parametrize("C", [G1, G2], ids=["G1", "G2"])
def test_scalar_mul_and_to_affine(C, big_points):
    rng = random.Random(8)
    n = 256
    pts = big_points[C.name][:n]
    ks = [0, 1, R - 1] + [rng.randrange(R) for _ in range(n - 3)]
    Pp = projective_array(C, pts, rng)
    out, aff = _gpu_and_cpu(lambda p, s: (C.scalar_mul(p, s), C.to_affine(p)), Pp, Fr.from_int(ks))
    idx = [0, 1, 2] + [rng.randrange(n) for _ in range(5)]
    assert read_projective(C, out[..., idx]) == [pe_mul(C, pts[i], ks[i]) for i in idx]
    np.testing.assert_array_equal(aff, np.asarray(affine_array(C, pts)))
