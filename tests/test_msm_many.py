"""ops.msm.msm_many (several MSMs merged into one Pippenger pass) against
py_ecc: bases k_i·G with known k_i, so each output must equal
(Σ over its parts of Σ s_i·k_i mod r)·G."""
from __future__ import annotations

import random

import jax.numpy as jnp
import numpy as np
import pytest

from conftest import R
from ops import msm as M
from ops.curve import G1, G2
from ops.field import Fr
from test_msm import CFG, _g1, _g2


def _case(rng, n, bits_frac, batch):
    """(ks, scalars [batch][n] ints, bit positions)."""
    ks = [rng.randrange(1, R) for _ in range(n)]
    bits = [i for i in range(n) if rng.random() < bits_frac]
    sc = [[rng.randrange(2) if i in bits else rng.randrange(R) for i in range(n)]
          for _ in range(batch)]
    return ks, sc, bits


def _fr(sc):
    return jnp.asarray(Fr.from_int(np.array(sc, dtype=object)))      # (8, batch, n)


@pytest.mark.parametrize("curve,point,sizes", [(G1, _g1, (13, 7, 1, 9)), pytest.param(G2, _g2, (6, 1), marks=pytest.mark.slow)])
def test_msm_many_equals_sum_of_msms(curve, point, sizes):
    rng = random.Random(11 + len(sizes))
    batch = 2
    parts, want = [], {}
    for j, n in enumerate(sizes):
        ks, sc, bits = _case(rng, n, 0.6 if j % 2 == 0 else 0.0, batch)
        if j == 0:
            sc[0][0], sc[1][0] = 0, 1                 # a bit position holding 0 and 1
        out = j // 2 if curve is G1 else 0            # parts 0,1 -> out 0; 2,3 -> out 1
        bases = curve.from_affine_ints([point(k) for k in ks])
        pos = M.positions(n, bits) if j == 0 else bits or None    # resident and host forms
        parts.append(M.Part(bases, _fr(sc), out, pos))
        for g in range(batch):
            want[out, g] = (want.get((out, g), 0) + sum(k * s for k, s in zip(ks, sc[g]))) % R
    res = M.msm_many(curve, parts, CFG)
    n_out = max(p.out for p in parts) + 1
    assert res.shape == curve.proj + (n_out, batch)
    got = curve.to_affine_ints(res.reshape(curve.proj + (-1,)))
    assert got == [point(want[o, g]) for o in range(n_out) for g in range(batch)]


def test_msm_many_bad_input():
    b = G1.from_affine_ints([_g1(3), _g1(5)])
    s = _fr([[1, 2]])
    with pytest.raises(ValueError, match="batch"):
        M.msm_many(G1, [M.Part(b, s, 0), M.Part(b, _fr([[1, 2], [3, 4]]), 1)], CFG)
    with pytest.raises(ValueError, match="bit positions"):
        M.msm_many(G1, [M.Part(b, s, 0, [2])], CFG)
    with pytest.raises(ValueError, match="must not repeat"):
        M.msm_many(G1, [M.Part(b, s, 0, [1, 1])], CFG)
    with pytest.raises(ValueError, match="positions of 2 dense and 1 bit entries for 2 bases"):
        M.msm_many(G1, [M.Part(b, s, 0, M.positions(3, [0]))], CFG)
    with pytest.raises(ValueError, match="no parts"):
        M.msm_many(G1, [], CFG)
