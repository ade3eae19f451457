"""Poseidon (ops.poseidon, circuits.gadgets.poseidon) against independent
references:

* neptune's test vectors (research/filecoin-circuits.md §3: hashes of
  [0, .., arity−1], the first/last Grain constants; the binary-tree vector of
  filecoin-hashers is checked in test_merkle.py) and neptune's round-number
  table (round_numbers.rs);
* ``ref_poseidon`` below: the *plain* Poseidon (round constants before each
  S-box layer, the dense Cauchy matrix every round) with its own Grain LFSR,
  written from the paper's description in Python integers, sharing no code
  with the optimized-static implementation under test;
* the gadget's row counts of neptune's circuit.rs test (311/377/505/598 [T])
  and ``is_satisfied`` (every row with Python integers), which must find a row
  when a witness value is corrupted.

Compile discipline: one batch shape per arity for the native hash, two
witness circuits for the gadget.
"""
from __future__ import annotations

import random

import jax.numpy as jnp
import numpy as np
import pytest

from circuits import cs as C
from circuits.gadgets import poseidon as G
from circuits.gadgets.num import Num
from ops import poseidon as P
from ops.field import Fr
from tests.conftest import R

# neptune round_numbers.rs test_round_numbers_against_known_values: t -> R_P (R_F = 8)
NEPTUNE_RP = {2: 55, 3: 55, 4: 56, 5: 56, 6: 56, 7: 56, 8: 57, 9: 57, 10: 57, 11: 57, 12: 57,
              13: 57, 14: 57, 15: 57, 16: 59, 17: 59, 25: 59, 37: 60, 65: 61}

# research/filecoin-circuits.md §3 (neptune poseidon.rs hash_values, MerkleTree tag)
HASH_OF_RANGE = {
    2: 0x396508d75e76a56b739e0fd902efe161a6fba9339d05a69d2e203c369a02e7ff,
    4: 0x58a54b10a9e5848a00db3c6579229399fb6b4605bf1327ec019814ff6662075d,
    8: 0x2394611da3a5de5512010042116770774b682e9d9cc4aed92a9934f56d38a5e6,
    11: 0x0c0fc1b2e5227f286ca537e232ebe87a09f3dcd8ccb08fc1cee3bbc32b693163,
}
H_1_0 = 0x042f94ffbe786bc393c003cc74a24f26ec5907b3dc3094afb339ff6079800b5e
ROOT_1001 = 0x1effebb7b26ad9eb30eb6385ae6b74ae77cc72b8cb2b5ad2efbb8be3e291e671


# ---------------------------------------------------------------- the reference
def ref_grain(t: int, r_f: int, r_p: int) -> list[int]:
    """create_rcs_grain.sage, transliterated: an 80-bit shift register as a
    list, self-shrinking pairs, 255-bit MSB-first candidates below r."""
    bits = f"{1:02b}{1:04b}{255:012b}{t:012b}{r_f:010b}{r_p:010b}" + "1" * 30
    s = [int(c) for c in bits]

    def step():
        new = s[62] ^ s[51] ^ s[38] ^ s[23] ^ s[13] ^ s[0]
        s.pop(0)
        s.append(new)
        return new

    for _ in range(160):
        step()

    def bit():
        while True:
            first, second = step(), step()
            if first:
                return second

    out = []
    while len(out) < (r_f + r_p) * t:
        v = int("".join(str(bit()) for _ in range(255)), 2)
        if v < R:
            out.append(v)
    return out


_REF = {}


def ref_params(arity: int):
    t = arity + 1
    if t not in _REF:
        rp = NEPTUNE_RP[t]
        mds = [[pow(x + y, R - 2, R) for y in range(t, 2 * t)] for x in range(t)]
        _REF[t] = (rp, ref_grain(t, 8, rp), mds)
    return _REF[t]


def ref_poseidon(preimage: list[int], tag: int | None = None) -> int:
    """Plain Poseidon: for each of the 4 + R_P + 4 rounds, add the round's t
    constants, x^5 on every element (full rounds) or element 0 (partial),
    then multiply by the MDS matrix; the hash is state[1]."""
    arity = len(preimage)
    t = arity + 1
    rp, rc, mds = ref_params(arity)
    state = [((1 << arity) - 1) if tag is None else tag] + list(preimage)
    for r in range(8 + rp):
        state = [(x + rc[r * t + i]) % R for i, x in enumerate(state)]
        full = r < 4 or r >= 4 + rp
        state = [pow(x, 5, R) if (full or i == 0) else x for i, x in enumerate(state)]
        state = [sum(mds[i][j] * state[j] for j in range(t)) % R for i in range(t)]
    return state[1]


def fr(ints):
    return jnp.asarray(Fr.from_int(np.asarray(ints, dtype=object)))


def ints(a):
    return np.asarray(Fr.to_int(np.asarray(a)), dtype=object)


# ---------------------------------------------------------------- constants
def test_round_numbers_match_neptune():
    for t, rp in NEPTUNE_RP.items():
        assert P.round_numbers(t) == (8, rp), t


def test_grain_constants():
    """The note's first/last constants per width, and the whole sequences of
    the transliterated sage script (t = 3, 9)."""
    firsts = {3: (0x669f064b, 0x9d6ed3d8, 189), 5: (0x45c91973, 0xc7e215ca, 320),
              9: (0x6ce90d12, 0xf2f4c2f9, 585), 12: (0x1f6c9576, 0xd089bce4, 780)}
    for t, (hi, lo, n) in firsts.items():
        rc = P.constants(t - 1).round_constants
        assert len(rc) == n
        assert rc[0] >> 224 == hi and rc[0] & 0xFFFFFFFF == lo, t
    last = P.constants(8).round_constants[-1]
    assert last >> 224 == 0x3b3a75eb and last & 0xFFFFFFFF == 0x519d9a8c
    for arity in (2, 8):
        assert list(P.constants(arity).round_constants) == ref_params(arity)[1]


def test_matrices():
    """Cauchy MDS; the pre-sparse and sparse factors multiply back to M^(R_P+1)
    the way the optimized rounds use them (row vector times matrix)."""
    c = P.constants(4)
    t = c.width
    assert [list(r) for r in c.mds] == ref_params(4)[2]
    rng = random.Random(5)
    x = [rng.randrange(R) for _ in range(t)]
    vm = lambda v, m: [sum(v[i] * m[i][j] for i in range(t)) % R for j in range(t)]
    want, got = x, vm(x, c.pre_sparse)
    for _ in range(c.partial_rounds + 1):
        want = vm(want, c.mds)
    for w_hat, v_rest in c.sparse:
        y0 = sum(w * e for w, e in zip(w_hat, got)) % R
        got = [y0] + [(got[j] + v_rest[j - 1] * got[0]) % R for j in range(1, t)]
    assert got == want
    with pytest.raises(ValueError, match="arity"):
        P.constants(0)


# ---------------------------------------------------------------- native hash
@pytest.mark.parametrize("arity", [2, 4, 8, 11])
def test_native_hash(arity):
    """[0..arity−1] gives neptune's vector; random preimages (batch 2x2, one
    with a Custom tag) match the plain reference."""
    rng = random.Random(arity)
    pre = [[list(range(arity)), [rng.randrange(R) for _ in range(arity)]],
           [[R - 1 - i for i in range(arity)], [rng.randrange(R) for _ in range(arity)]]]
    x = fr(pre)                                              # (8, 2, 2, arity)
    out = ints(P.hash(x))
    assert out.shape == (2, 2)
    assert out[0, 0] == HASH_OF_RANGE[arity]
    for i in range(2):
        for j in range(2):
            assert out[i, j] == ref_poseidon(pre[i][j]), (i, j)
    custom = ints(P.hash(x, tag=P.custom_tag(3)))
    assert custom[1, 1] == ref_poseidon(pre[1][1], tag=3 << 40)
    assert custom[0, 0] != out[0, 0]


def test_bad_input():
    with pytest.raises(ValueError, match="Fr array"):
        P.hash(jnp.zeros((4, 2), jnp.uint32))
    with pytest.raises(ValueError, match="positive"):
        P.custom_tag(0)


# ---------------------------------------------------------------- the gadget
def hash_circuit(cs, x, arity, shape):
    pre = Num.alloc(cs, shape + (arity,), None if cs.recording else (lambda: x))
    return G.poseidon_hash(cs, pre).value


@pytest.mark.parametrize("arity, want", [(2, 311), (4, 377), (8, 505), (11, 598)])
def test_gadget_counts(arity, want):
    r1cs = C.record(hash_circuit, arity, ())
    c = P.constants(arity)
    t = arity + 1
    assert r1cs.num_constraints == want == G.constraint_count(arity)
    assert want == 4 * (8 * t + c.partial_rounds) - t - 2
    assert r1cs.num_aux == want + arity              # one variable per row, plus the preimage
    assert r1cs.num_inputs == 1
    two = C.record(hash_circuit, arity, (3,))
    assert two.num_constraints == 3 * want and two.num_aux == 3 * (want + arity)


@pytest.mark.parametrize("arity, shape", [(2, (2,)), (8, ())])
def test_gadget_witness(arity, shape):
    """Batch of 2 instances (each hashing ``shape`` preimages): every row
    holds, the output is the reference hash, the hash variable is the last
    one, and corrupting an S-box variable breaks a row."""
    rng = random.Random(10 + arity)
    B = 2
    pre = np.asarray([rng.randrange(R) for _ in range(B * int(np.prod(shape)) * arity)],
                     dtype=object).reshape((B,) + shape + (arity,))
    r1cs = C.record(hash_circuit, arity, shape)
    w, out = C.witness_with_outputs(hash_circuit, fr(pre), arity, shape, in_axes=1)
    w = np.asarray(w)
    assert w.shape == (8, B, r1cs.num_vars)
    got = ints(np.moveaxis(np.asarray(out), 0, 1))   # (B, 8, *shape) -> (B, *shape)
    vals = ints(w)
    for b in range(B):
        assert C.is_satisfied(r1cs, w[:, b]) == (True, None)
        for idx in np.ndindex(shape):
            want = ref_poseidon(list(pre[(b,) + idx]))
            assert got[(b,) + idx] == want
        assert vals[b, -1] == got[(b,) + (() if not shape else (shape[0] - 1,))]
    bad = vals[0].copy()
    col = r1cs.num_inputs + int(np.prod(shape)) * arity + 200
    bad[col] = (bad[col] + 1) % R
    ok, row = C.is_satisfied(r1cs, bad)
    assert not ok
    cols = lambda m: set(m.cols[m.indptr[row]:m.indptr[row + 1]])
    assert col in cols(r1cs.a) | cols(r1cs.b) | cols(r1cs.c)


def test_gadget_bad_input():
    with pytest.raises(ValueError, match="tag"):
        C.record(lambda cs, _: G.poseidon_hash(cs, Num.alloc(cs, (2,)), tag=R))


@pytest.mark.parametrize("arity", [2, pytest.param(8, marks=pytest.mark.slow)])
def test_round_kernels_pallas_interpret(arity):
    """The GPU kernel bodies of the rounds (rolled matrix loop with select
    chains), run by Pallas in interpret mode, equal the default path (the
    pre-sparse round is the same formula with other constants)."""
    from ops.elementwise import KernelConfig
    interp = KernelConfig(interpret=True)
    t = arity + 1
    rng = random.Random(3)
    x = jnp.moveaxis(fr([[rng.randrange(R) for _ in range(5)] for _ in range(t)]), 0, 1)
    _, post, keys, w_hat, v, _ = P._device_constants(arity)
    same = lambda a, b: all(np.array_equal(np.asarray(p), np.asarray(q)) for p, q in zip(a, b))
    assert same(P._full_round_kernel(arity, "mds", interp)(x, post[0]),
                P._full_round_kernel(arity, "mds")(x, post[0]))
    assert same(P._partial_round_kernel(arity, interp)(x, keys[0], w_hat[0], v[0]),
                P._partial_round_kernel(arity)(x, keys[0], w_hat[0], v[0]))
