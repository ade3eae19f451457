"""ops composes with jax transformations, and never turns on 64-bit types
globally."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import N_EXT, N_FIELD, P, ROOT, affine_array, f2add, f2mul, pe_add, \
    projective_array, read_projective
from ops.curve import G1
from ops.field import Fq, Fr
from ops.tower import Fq2


@pytest.fixture(scope="module")
def ab():
    rng = random.Random(77)
    a = [rng.randrange(P) for _ in range(N_FIELD)]
    b = [rng.randrange(P) for _ in range(N_FIELD)]
    return a, b, jnp.asarray(Fq.from_int(a)), jnp.asarray(Fq.from_int(b))


def test_jit_of_a_chain(ab):
    a, b, A, B = ab

    @jax.jit
    def f(x, y):
        s = Fq.add(x, y)
        t = Fq.mul(s, y)
        return Fq.sub(Fq.square(t), Fq.double(x)), Fq.eq(t, t)

    out, flag = f(A, B)
    want = [(((x + y) * y) ** 2 - 2 * x) % P for x, y in zip(a, b)]
    assert [int(v) for v in Fq.to_int(out)] == want
    assert bool(jnp.all(flag))
    # and it is the same as the eager composition
    np.testing.assert_array_equal(np.asarray(out),
                                  np.asarray(Fq.sub(Fq.square(Fq.mul(Fq.add(A, B), B)), Fq.double(A))))


def test_jit_mixed_fields_and_curve(curve_refs, rng):
    """A jitted function mixing Fr, Fq2 and G1 kernels."""
    pts = curve_refs["G1"]["points"]
    xs = [(rng.randrange(P), rng.randrange(P)) for _ in range(N_EXT)]
    X = jnp.asarray(Fq2.from_int(np.array(xs, dtype=object).reshape(N_EXT, 2)))
    Pp, Aq = projective_array(G1, pts, rng), affine_array(G1, pts[::-1])

    @jax.jit
    def f(x, p, q):
        return Fq2.add(Fq2.square(x), x), G1.double(G1.madd(p, q))

    y, R2 = f(X, Pp, Aq)
    assert [tuple(map(int, v)) for v in Fq2.to_int(y)] == [f2add(f2mul(x, x), x) for x in xs]
    want = [pe_add(G1, s, s) for s in (pe_add(G1, u, v) for u, v in zip(pts, pts[::-1]))]
    assert read_projective(G1, R2) == want


def test_vmap_over_batch_axis(ab):
    a, b, A, B = ab
    got = jax.vmap(Fq.mul, in_axes=1, out_axes=1)(A, B)
    assert got.shape == A.shape
    np.testing.assert_array_equal(np.asarray(got), np.asarray(Fq.mul(A, B)))
    assert [int(v) for v in Fq.to_int(got)] == [x * y % P for x, y in zip(a, b)]


def test_vmap_over_leading_stacked_axis(ab):
    a, b, A, B = ab
    nb = 4
    As = jnp.stack([jnp.roll(A, k, axis=1) for k in range(nb)])       # (B, 12, N)
    Bs = jnp.stack([B] * nb)
    got = jax.vmap(Fq.mul, in_axes=0)(As, Bs)
    assert got.shape == (nb, 12, N_FIELD)
    for k in range(nb):
        ak = a[-k:] + a[:-k] if k else a
        assert [int(v) for v in Fq.to_int(got[k])] == [x * y % P for x, y in zip(ak, b)]
    # one operand broadcast (in_axes None)
    got2 = jax.vmap(Fq.add, in_axes=(0, None))(As, B)
    np.testing.assert_array_equal(np.asarray(got2[2]), np.asarray(Fq.add(As[2], B)))


def test_vmap_of_jit_chain_and_bool_output(ab):
    a, b, A, B = ab
    f = jax.jit(jax.vmap(lambda x, y: (Fq.mul(Fq.add(x, y), y), Fq.is_zero(Fq.sub(x, x))),
                         in_axes=1, out_axes=(1, 0)))
    out, z = f(A, B)
    assert [int(v) for v in Fq.to_int(out)] == [(x + y) * y % P for x, y in zip(a, b)]
    assert z.shape == (N_FIELD,) and bool(jnp.all(z))


def test_vmap_fr_and_curve(curve_refs, rng):
    """vmap over a leading axis of G1 points and Fr elements."""
    pts = curve_refs["G1"]["points"]
    P1 = jnp.stack([projective_array(G1, pts, rng), projective_array(G1, pts[::-1], rng)])
    Q1 = jnp.stack([projective_array(G1, pts[1:] + pts[:1], rng)] * 2)
    got = jax.vmap(G1.add)(P1, Q1)
    for k, lhs in enumerate([pts, pts[::-1]]):
        assert read_projective(G1, got[k]) == [pe_add(G1, u, v) for u, v in
                                               zip(lhs, pts[1:] + pts[:1])]
    xs = [rng.randrange(Fr.p) for _ in range(N_FIELD)]
    X = jnp.asarray(Fr.from_int(xs))
    sq = jax.vmap(Fr.square, in_axes=0)(jnp.stack([X, X]))
    assert [int(v) for v in Fr.to_int(sq[1])] == [x * x % Fr.p for x in xs]


_X64_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    import jax, jax.numpy as jnp

    def report(tag):
        print(tag, bool(jax.config.jax_enable_x64), jnp.asarray(1.0).dtype, jnp.arange(3).dtype)

    report("START")
    from ops.field import Fq
    from ops.curve import G1

    def work():
        a = jnp.asarray(Fq.from_int([3, 5]))
        m = Fq.mul(a, a)
        assert [int(v) for v in Fq.to_int(m)] == [9, 25], Fq.to_int(m)
        assert m.dtype == jnp.uint32, m.dtype
        x, y = G1.generator
        D = G1.double(G1.from_affine(G1.generator_affine()))
        assert D.dtype == jnp.uint32, D.dtype
        X, Y, Z = (int(Fq.to_int(v)) for v in D)
        zi = pow(Z, -1, Fq.p)
        lam = 3 * x * x * pow(2 * y, -1, Fq.p) % Fq.p
        x3 = (lam * lam - 2 * x) % Fq.p
        assert (X * zi % Fq.p, Y * zi % Fq.p) == (x3, (lam * (x - x3) - y) % Fq.p)

    work()
    report("AFTER_OPS")                 # a clean interpreter: ops left x64 off
    jax.config.update("jax_enable_x64", True)
    work()                              # and they work when the user turns it on
    report("USER_X64")
""")


def test_x64_not_enabled_globally_and_user_x64_works():
    """In a clean interpreter: running ops leaves jax_enable_x64 off (and the
    default dtypes 32-bit); with x64 then enabled by the user, ops still work
    and leave the user's setting alone."""
    env = dict(os.environ)
    env.pop("JAX_ENABLE_X64", None)
    code = _X64_SCRIPT.format(root=str(ROOT))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=str(ROOT), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = {ln.split()[0]: ln.split()[1:] for ln in res.stdout.splitlines() if ln.strip()}
    assert lines["START"] == ["False", "float32", "int32"]
    assert lines["AFTER_OPS"] == ["False", "float32", "int32"]
    assert lines["USER_X64"] == ["True", "float64", "int64"]
