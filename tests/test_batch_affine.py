"""ops.batch_affine (pairwise affine additions sharing one inversion per lane
run, hypothesis 69) in Pallas interpret mode, against scalar arithmetic on
multiples of the generator (py_ecc gives the expected points)."""
from __future__ import annotations

import dataclasses
import random

import jax
import jax.numpy as jnp
import pytest

from conftest import R
from ops import batch_affine as BA
from ops import msm as M
from ops.curve import G1, G2
from ops.elementwise import KernelConfig
from test_msm import _g1

G1I = dataclasses.replace(G1, config=KernelConfig(interpret=True))


def test_add_pairs_equals_the_scalar_sums():
    """Random pairs, with the exceptional ones among them: a base added to
    itself (doubling), to its negation (the identity), and to an equal base
    stored at another index; negative signs; runs of 4 pairs in 2 lanes, 2
    programs (so the prefix products, the shared inversion and the
    backward walk each span several pairs of a lane)."""
    rng = random.Random(69)
    ks = [rng.randrange(1, R) for _ in range(7)]
    ks.append(ks[2])                                       # base 7 equals base 2
    bases = M.point_major(G1, G1.from_affine_ints([_g1(k) for k in ks]))
    run, lanes = 4, 2
    pairs = 2 * run * lanes
    entries = [(rng.randrange(len(ks)), rng.randrange(2)) for _ in range(2 * pairs)]
    entries[0:2] = [(3, 0), (3, 0)]                        # doubling
    entries[2:4] = [(4, 0), (4, 1)]                        # P + (−P)
    entries[6:8] = [(2, 1), (7, 1)]                        # −P + −P through another index
    entries[10:12] = [(5, 1), (5, 0)]                      # −P + P
    pay = jnp.asarray([i | (s << 31) for i, s in entries], jnp.uint32)
    for stored in (True, False):        # operands kept in scratch, or the bases loaded again
        out, ident = BA.add_pairs(G1I, bases, pay, run=run, bn=lanes, stored=stored)
        got = G1.to_affine_ints(out.T.reshape(G1.aff + (pairs,)), projective=False)
        for p in range(pairs):
            s = sum(-ks[i] if sgn else ks[i] for i, sgn in entries[2 * p:2 * p + 2]) % R
            assert bool(ident[p]) == (s == 0), (stored, p)
            if s:
                assert got[p] == _g1(s), (stored, p)


def test_add_pairs_refuses_bad_shapes_and_lowers_for_cuda():
    bases = jnp.zeros((8, 24), jnp.uint32)
    with pytest.raises(ValueError, match="not a multiple of run"):
        BA.add_pairs(G1I, bases, jnp.zeros((6,), jnp.uint32), run=4, bn=2)
    with pytest.raises(ValueError, match="an even length"):
        BA.add_pairs(G1I, bases, jnp.zeros((5,), jnp.uint32))
    with pytest.raises(ValueError, match=r"expected \(N, 24\)"):
        BA.add_pairs(G1I, jnp.zeros((8, 36), jnp.uint32), jnp.zeros((16,), jnp.uint32), run=4, bn=2)
    with pytest.raises(ValueError, match="split"):
        BA.add_pairs(G2, jnp.zeros((8, 48), jnp.uint32), jnp.zeros((16,), jnp.uint32))
    f = jax.jit(lambda b, p: BA.add_pairs(G1, b, p))
    text = f.trace(jax.ShapeDtypeStruct((64, 24), jnp.uint32),
                   jax.ShapeDtypeStruct((2 * BA.RUN * BA.LANES,), jnp.uint32)).lower(
        lowering_platforms=("cuda",)).as_text()
    assert text.count("__gpu$xla.gpu.triton") == 1
