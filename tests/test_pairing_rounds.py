"""Product rounds (ops.fq12.product_rounds): the pairing's GPU path, checked on the CPU.

On CUDA every Fq12 formula and Miller step runs as rounds of stacked Fq
products (one small Pallas kernel) between small-integer linear maps (XLA);
on the CPU the same formulas normally run as one interpreter program each.
``rounds="always"`` forces the rounds path here, and it is compared with
py_ecc's Fq12 arithmetic (through test_pairing's isomorphism) and, for the
Miller steps, with the single-kernel formulas that test_pairing checks end to
end.  The last test lowers the whole pairing for CUDA on this host and bounds
the size of every Triton kernel in it (Pallas compile time grows steeply with
that size).
"""
from __future__ import annotations

import dataclasses
import random

import jax.numpy as jnp
import numpy as np
import pytest

from conftest import P
from ops import pairing as pr
from ops.field import Fq, P_FQ
from ops.fq12 import Fq12, NotRoundFormula, product_rounds
from ops.tower import Fq2
from test_pairing import ONE12, ZERO12, as_tuples, dev, from_pe, rand12, to_pe

N = 3                                       # lanes (a shape of its own: one compile per op)
Fq12R = dataclasses.replace(Fq12, rounds="always")
KERNEL_OPS_BOUND = 8000                     # ~ one G1 mixed addition (~10 s of Triton compile)


@pytest.fixture(scope="module")
def vals():
    rng = random.Random(3131)
    rnd = rand12(rng, 2 * N)
    return [ZERO12] + rnd[:N - 1], [ONE12] + rnd[N:2 * N - 1]


def test_linear_map_reduction_with_large_coefficients():
    """37a − 50b + 12c (a sum of |coefficients| 99: seven reduction steps),
    and c·(a − b) through one product round, against Python integers."""
    rng = random.Random(5)
    xs = [[P - 1, 0, 1, rng.randrange(P)] for _ in range(3)]
    a, b, c = (jnp.asarray(Fq.from_int(v)) for v in xs)
    f = product_rounds(lambda ar, x, y, z: (ar.add(ar.mul_small(x, 37), ar.add(
        ar.neg(ar.mul_small(y, 50)), ar.mul_small(z, 12))), ar.mul(z, ar.sub(x, y))),
        [(12,)] * 3, [(12,)] * 2, P_FQ, Fq12.config)
    lin, prod = f(a, b, c)
    want_lin = [(37 * x - 50 * y + 12 * z) % P for x, y, z in zip(*xs)]
    want_prod = [z * (x - y) % P for x, y, z in zip(*xs)]
    assert [int(v) for v in Fq.to_int(lin)] == want_lin
    assert [int(v) for v in Fq.to_int(prod)] == want_prod


def test_rounds_reject_selects():
    f = product_rounds(lambda ar, x: ar.select(ar.is_zero(x), x, x), [(12,)], [(12,)], P_FQ,
                       Fq12.config)
    with pytest.raises(NotRoundFormula):
        f(jnp.asarray(Fq.from_int([1])))


@pytest.mark.slow   # CI time (session 21: see bench/NOTES.md)
def test_fq12_ops_as_rounds_match_py_ecc(vals):
    a, b = vals
    A, B = dev(Fq12, a), dev(Fq12, b)
    pa, pb = [to_pe(x) for x in a], [to_pe(x) for x in b]
    assert as_tuples(Fq12R.mul(A, B), Fq12) == [from_pe(x * y) for x, y in zip(pa, pb)]
    assert as_tuples(Fq12R.square(B), Fq12) == [from_pe(y * y) for y in pb]
    assert as_tuples(Fq12R.conjugate(B), Fq12) == [from_pe(y ** (P ** 6)) for y in pb]
    for k in (1, 2):
        assert as_tuples(Fq12R.frobenius(B, k), Fq12) == [from_pe(y ** (P ** k)) for y in pb]
    inv = as_tuples(Fq12R.inv(A), Fq12)
    assert inv[0] == ZERO12                                              # 0 -> 0
    assert [to_pe(x) * y for x, y in zip(inv[1:], pa[1:])] == [to_pe(ONE12)] * (N - 1)


def test_sparse_and_cyclotomic_as_rounds_match_py_ecc(vals):
    a, b = vals
    lines = [(y[0][0], y[0][1], y[1][1]) for y in b]
    sparse = [((l[0], l[1], (0, 0)), ((0, 0), l[2], (0, 0))) for l in lines]
    S = dev(Fq12, sparse)
    L = jnp.stack([S[0, 0], S[0, 1], S[1, 1]])                      # (c0, c1, c4)
    got = as_tuples(Fq12R.mul_by_014(dev(Fq12, a), L), Fq12)
    assert got == [from_pe(to_pe(x) * to_pe(s)) for x, s in zip(a, sparse)]
    easy = (P ** 6 - 1) * (P ** 2 + 1)
    cyc = [to_pe(x) ** easy for x in b]
    got = as_tuples(Fq12R.cyclotomic_square(dev(Fq12, [from_pe(g) for g in cyc])), Fq12)
    assert got == [from_pe(g * g) for g in cyc]


@pytest.mark.slow   # CI time (session 21: see bench/NOTES.md)
def test_miller_steps_as_rounds_match_kernels():
    """Doubling and addition steps with their lines, identity pairs included
    (keep = 0 must give the line 1), rounds path against the one-kernel path."""
    rng = random.Random(9)
    T = jnp.asarray(np.stack([Fq12.from_int(rand12(rng, N))[0, 0] for _ in range(3)]))
    Q = jnp.asarray(np.stack([Fq12.from_int(rand12(rng, N))[0, 1] for _ in range(2)]))
    Pt = jnp.asarray(np.stack([Fq.from_int([rng.randrange(P) for _ in range(N)]) for _ in range(2)]))
    keep = jnp.where(jnp.arange(N) == 1, Fq.zeros((N,)), Fq.ones((N,)))
    shapes = {"double_line": ([pr.G2_PROJ, pr.G1_AFF, pr.FQ], (T, Pt, keep)),
              "add_line": ([pr.G2_PROJ, pr.G2_AFF, pr.G1_AFF, pr.FQ], (T, Q, Pt, keep))}
    for method, (ins, args) in shapes.items():
        got = pr._rounds(method, ins, [pr.G2_PROJ, pr.LINE], "always")(*args)
        want = pr._rounds(method, ins, [pr.G2_PROJ, pr.LINE], "cuda")(*args)   # CPU: one kernel
        for g, w in zip(got, want):
            assert bool(jnp.all(g == w)), method
        one = jnp.stack([Fq2.ones(), Fq2.zeros(), Fq2.zeros()])
        assert bool(jnp.all(got[1][..., 1] == one)), f"{method}: identity pair's line is not 1"
        assert not bool(jnp.all(got[1][..., 0] == one))


def test_pairing_kernels_are_small():
    """Every Triton kernel of the CUDA lowering of ``pairing`` stays below the
    bound, and they are all the two product/inverse kernels."""
    kernel_size = pytest.importorskip("bench.kernel_size")
    counts = kernel_size.pairing_op_counts(lanes=5, programs=("pairing",))
    assert counts, "no Triton kernel found in the lowered pairing"
    assert max(counts.values()) <= KERNEL_OPS_BOUND, counts
    assert {k.split(":")[1] for k in counts} <= {"Fq_products", "Fq_inverses"}, counts


@pytest.mark.slow
def test_pairing_as_rounds_matches_py_ecc():
    """The whole GPU computation (every formula as product rounds) on the CPU,
    Groth16-shaped (4 pairs, one identity pair) and single pairings (~2 min
    of XLA:CPU compile)."""
    from test_pairing import g1_int, g2_int, pe_pairing
    from ops.curve import G1, G2
    rng = random.Random(44)
    a, b = rng.randrange(1, 1 << 64), rng.randrange(1, 1 << 64)
    Ps = jnp.asarray(G1.from_affine_ints([g1_int(a), g1_int(1)]))
    Qs = jnp.asarray(G2.from_affine_ints([g2_int(b), None]))
    got = as_tuples(pr.pairing(Ps, Qs, rounds="always"), Fq12)
    assert got[0] == from_pe(to_pe(ONE12) / pe_pairing(a, b) ** 3)
    assert got[1] == ONE12                                   # e(P, O) = 1
    g1 = lambda *ks: jnp.asarray(G1.from_affine_ints([g1_int(k) for k in ks]))
    g2 = lambda *ks: jnp.asarray(G2.from_affine_ints([g2_int(k) for k in ks]))
    # e(a·G1, b·G2)·e(−ab·G1, G2)·e(G1, O)·e(x·G1, 7·G2): 1 for x = 0 (lane 0), not for x = 3
    ok = pr.pairing_product_is_one([g1(a, a), g1(-a * b, -a * b), g1(1, 1), g1(0, 3)],
                                   [g2(b, b), g2(1, 1), g2(0, 0), g2(7, 7)], rounds="always")
    assert [bool(v) for v in ok] == [True, False]


def test_dispatch_is_chosen_per_lowering_platform(monkeypatch):
    """On a machine with CUDA, a formula computed on the host CPU (the
    engine's verification) must run the CPU form, not the rounds: the choice
    follows the platform the computation is lowered for, not whether the
    process has a GPU (session 12: the CPU verification ran the rounds' array
    code on the H200's host, 2.6 s per proof).  Here the rounds and the kernel
    are told apart by giving the kernel a different result."""
    import jax

    from ops import fq12 as F
    formula = lambda ar, x, y: ar.mul(x, y)                          # noqa: E731
    rng = random.Random(9)
    x, y = (jnp.asarray(Fq.from_int([rng.randrange(P) for _ in range(2)])) for _ in range(2))
    marker = lambda x, y: x                                           # noqa: E731: "the kernel"
    g = F.dispatch_rounds(formula, [(12,)] * 2, [(12,)], P_FQ, Fq12.config, marker)
    from ops import platform
    monkeypatch.setattr(platform, "has_cuda", lambda: True)          # "a GPU machine"
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    cpu = jax.devices("cpu")[0]
    with jax.default_device(cpu):
        got = jax.jit(g)(jax.device_put(x, cpu), jax.device_put(y, cpu))
    assert np.array_equal(np.asarray(got), np.asarray(x))             # the kernel ran
    forced = F.dispatch_rounds(formula, [(12,)] * 2, [(12,)], P_FQ, Fq12.config, marker,
                               rounds="always")
    want = [a * b % P for a, b in zip(Fq.to_int(x), Fq.to_int(y))]
    assert [int(v) for v in Fq.to_int(forced(x, y))] == want          # the rounds ran
