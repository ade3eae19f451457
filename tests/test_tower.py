"""Fq2 = Fq[u]/(u^2 + 1) (ops.tower.Fq2) against py_ecc's FQ2 and hand
Python-int arithmetic; batches of N_EXT lanes."""
from __future__ import annotations

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import (N_EXT, P, f2_is_square, f2add, f2mul, f2neg, f2pow, f2sub, from_pe_fq2,
                      pad, pe_fq2, to_bool_list)
from ops.tower import Fq2

U = (0, 1)
E1 = [0, 1, 2, P - 1, P - 2, (P - 1) // 2, 2 ** 32 - 1, 2 ** 32, 2 ** 64 - 1, 2 ** 352,
      2 ** 352 - 1, P - 2 ** 32]


def run2(fn, *cols, n=N_EXT, out=None):
    """Fq2 analogue of conftest.lanes: host pair columns -> device -> host pairs."""
    m = len(cols[0])
    cols = [pad(list(c), n, (0, 0)) for c in cols]
    conv = out or Fq2.to_int
    res_all = None
    for s in range(0, len(cols[0]), n):
        args = [jnp.asarray(Fq2.from_int(np.array(c[s:s + n], dtype=object).reshape(n, 2)))
                for c in cols]
        res = fn(*args)
        multi = isinstance(res, tuple)
        res = res if multi else (res,)
        convs = conv if isinstance(conv, (list, tuple)) else [conv] * len(res)
        vals = []
        for cv, r in zip(convs, res):
            v = cv(r)
            if isinstance(v, np.ndarray) and v.dtype == object:
                vals.append([(int(x[0]), int(x[1])) for x in v])
            else:
                vals.append([bool(x) for x in np.asarray(v).reshape(-1)])
        if res_all is None:
            res_all, was_multi = [[] for _ in vals], multi
        for acc, v in zip(res_all, vals):
            acc.extend(v)
    res_all = [r[:m] for r in res_all]
    return tuple(res_all) if was_multi else res_all[0]


@pytest.fixture(scope="module")
def vals():
    rng = random.Random(2222)
    special = [(0, 0), (1, 0), U, (P - 1, 0), (0, P - 1), (1, 1), (P - 1, P - 1),
               ((P - 1) // 2, 2 ** 352), (2 ** 32, 2 ** 32 - 1), (2, P - 2)]
    edges = [(a, c) for a in E1 for c in E1[::2]] + special
    rand = [(rng.randrange(P), rng.randrange(P)) for _ in range(2 * N_EXT)]
    units = edges + rand
    a = [x for x in special for _ in special] + rand + edges[:N_EXT]
    b = [y for _ in special for y in special] + [(rng.randrange(P), rng.randrange(P))
                                                 for _ in rand] + edges[-N_EXT:]
    return dict(special=special, edges=edges, rand=rand, units=units, a=a, b=b)


def _check(name, xs, got, want):
    bad = [(x, g, w) for x, g, w in zip(xs, got, want) if g != w]
    assert not bad, f"Fq2.{name} wrong on {len(bad)} inputs, first {bad[0]}"


# ---------------------------------------------------------------- ring operations
@pytest.mark.parametrize("op,ref", [
    ("add", f2add),
    ("sub", f2sub),
    ("mul", lambda x, y: from_pe_fq2(pe_fq2(x) * pe_fq2(y))),
], ids=["add", "sub", "mul"])
def test_binary(op, ref, vals):
    got = run2(getattr(Fq2, op), vals["a"], vals["b"])
    _check(op, list(zip(vals["a"], vals["b"])), got, [ref(x, y) for x, y in zip(vals["a"], vals["b"])])


def test_mul_hand_reference(vals):
    """Cross-check the py_ecc reference with u^2 = -1 by hand (and u·u = -1 itself)."""
    got = run2(Fq2.mul, vals["a"], vals["b"])
    assert got == [f2mul(x, y) for x, y in zip(vals["a"], vals["b"])]
    assert run2(Fq2.mul, [U], [U]) == [(P - 1, 0)]


@pytest.mark.parametrize("op,ref", [
    ("neg", f2neg),
    ("double", lambda x: f2add(x, x)),
    ("square", lambda x: from_pe_fq2(pe_fq2(x) ** 2)),
    ("conjugate", lambda x: (x[0], (-x[1]) % P)),
    ("mul_by_nonresidue", lambda x: from_pe_fq2(pe_fq2(x) * pe_fq2((1, 1)))),
    ("inv", lambda x: (0, 0) if x == (0, 0) else from_pe_fq2(pe_fq2((1, 0)) / pe_fq2(x))),
], ids=["neg", "double", "square", "conjugate", "mul_by_nonresidue", "inv"])
def test_unary(op, ref, vals):
    xs = vals["units"]
    _check(op, xs, run2(getattr(Fq2, op), xs), [ref(x) for x in xs])


def test_frobenius_is_pth_power(vals):
    xs = vals["special"] + vals["rand"][:N_EXT - len(vals["special"]) + N_EXT]
    want = [from_pe_fq2(pe_fq2(x) ** P) for x in xs]
    _check("frobenius", xs, run2(Fq2.frobenius, xs), want)


def test_inverse_property(vals):
    xs = vals["units"]
    for x, y in zip(xs, run2(Fq2.inv, xs)):
        assert f2mul(x, y) == ((1, 0) if x != (0, 0) else (0, 0))


@pytest.mark.parametrize("e", [0, 5, P * P - 1], ids=["0", "5", "p^2-1"])
def test_pow(e, vals):
    xs = vals["special"] + vals["rand"][:N_EXT]
    want = [f2pow(x, e) for x in xs]                    # square-and-multiply by hand
    if e == 5:
        assert want == [from_pe_fq2(pe_fq2(x) ** e) for x in xs]
    _check(f"pow(., {e})", xs, run2(lambda a: Fq2.pow(a, e), xs), want)


def test_batch_inv(vals):
    xs = list(vals["units"])
    for i in range(0, len(xs), 5):
        xs[i] = (0, 0)
    xs = xs[:3 * N_EXT]
    arr = jnp.asarray(Fq2.from_int(np.array(xs, dtype=object).reshape(len(xs), 2)))
    got = [tuple(map(int, v)) for v in Fq2.to_int(Fq2.batch_inv(arr))]
    want = [(0, 0) if x == (0, 0) else from_pe_fq2(pe_fq2((1, 0)) / pe_fq2(x)) for x in xs]
    assert got == want


# ---------------------------------------------------------------- square roots
def test_sqrt(vals):
    rng = random.Random(31)
    squares = [f2mul(x, x) for x in vals["rand"]]
    nonsq = []
    while len(nonsq) < N_EXT:
        x = (rng.randrange(P), rng.randrange(P))
        if not f2_is_square(x):
            nonsq.append(x)
    xs = vals["special"] + [(P - 1, 0), (0, 2), (5, 0)] + vals["edges"][:20] + squares + nonsq
    roots, ok = run2(Fq2.sqrt, xs, out=[Fq2.to_int, lambda v: np.asarray(v)])
    for x, r, e in zip(xs, roots, ok):
        assert e == f2_is_square(x), f"existence flag wrong for {x}"
        if e:
            assert f2mul(r, r) == x, f"bad root for {x}"
    assert all(ok[-len(nonsq) - len(squares):-len(nonsq)])
    assert not any(ok[-len(nonsq):])


# ---------------------------------------------------------------- predicates, select
def test_eq_is_zero_select(vals):
    rng = random.Random(4)
    xs = vals["units"][:N_EXT]
    ys = [x if i % 3 == 0 else (x[0], (x[1] + 1) % P) if i % 3 == 1 else ((x[0] + 1) % P, x[1])
          for i, x in enumerate(xs)]
    a = jnp.asarray(Fq2.from_int(np.array(xs, dtype=object).reshape(N_EXT, 2)))
    b_ = jnp.asarray(Fq2.from_int(np.array(ys, dtype=object).reshape(N_EXT, 2)))
    assert to_bool_list(Fq2.eq(a, b_)) == [x == y for x, y in zip(xs, ys)]
    assert to_bool_list(Fq2.is_zero(a)) == [x == (0, 0) for x in xs]
    cond = [rng.random() < 0.5 for _ in xs]
    got = [tuple(map(int, v)) for v in Fq2.to_int(Fq2.select(jnp.asarray(cond), a, b_))]
    assert got == [x if c else y for c, x, y in zip(cond, xs, ys)]


# ---------------------------------------------------------------- host side
def test_int_round_trip_and_layout():
    rng = random.Random(8)
    xs = np.empty((3, 5, 2), dtype=object)
    for idx in np.ndindex(3, 5):
        xs[idx] = (rng.randrange(P), rng.randrange(P))
    arr = Fq2.from_int(xs)
    assert arr.shape == (2, 12, 3, 5) and arr.dtype == np.uint32
    assert (Fq2.to_int(arr) == xs).all()
    # axis 0 is (c0, c1), each a Montgomery Fq element
    from ops.field import Fq
    assert (Fq.to_int(arr[0]) == xs[..., 0]).all() and (Fq.to_int(arr[1]) == xs[..., 1]).all()
    one = Fq2.from_int((7, 9))
    assert one.shape == (2, 12) and Fq2.to_int(one) == (7, 9)
    with pytest.raises(ValueError):
        Fq2.from_int((P, 0))
    with pytest.raises(ValueError):
        Fq2.from_int([1, 2, 3])


def test_constants_and_random():
    assert {tuple(map(int, v)) for v in Fq2.to_int(Fq2.zeros((N_EXT,)))} == {(0, 0)}
    assert {tuple(map(int, v)) for v in Fq2.to_int(Fq2.ones((N_EXT,)))} == {(1, 0)}
    assert {tuple(map(int, v)) for v in Fq2.to_int(Fq2.constant((3, P + 4), (N_EXT,)))} == {(3, 4)}
    r = Fq2.random(jax.random.PRNGKey(0), (N_EXT,))
    assert r.shape == (2, 12, N_EXT)
    got = [tuple(map(int, v)) for v in Fq2.to_int(r)]
    assert len(set(got)) == N_EXT and all(0 <= c < P for v in got for c in v)
    assert all(v[0] != v[1] for v in got)              # the two halves are drawn independently
    ri = Fq2.random_ints(10, random.Random(3))
    assert ri == Fq2.random_ints(10, random.Random(3)) and all(0 <= c < P for v in ri for c in v)
