"""Binary SHA-256 Merkle inclusion (circuits.gadgets.sha_merkle: Filecoin's
tree D) and pick / select against:

* rust-fil-proofs' counts: hash2 45,379, one level 45,382 (45,381 with the
  caller's index bit), research/filecoin-circuits.md §2.1 [D]; the SHA PoR
  over 64 leaves with a public root, 272,295 rows, asserted by
  storage-proofs-core tests/por_circuit.rs [T]; insertion.rs test_select:
  2^k − 1 rows;
* hashlib: a tree built from SHA-256 of the 64-byte little-endian encodings
  with byte 31 masked by 0x3f (filecoin-hashers ``hash2``): the circuit's
  root equals it, real paths satisfy every row, a wrong leaf or a wrong
  index leaves a failing row.

Compile discipline: one PoR witness circuit (depth 3, a batch of 4), one
select circuit; the 6-level [T] recording (~7 s) and the separate hash2 /
level counts (~3 s; the fast tests check 45,382 a level through the PoR
counts) run with --runslow."""
from __future__ import annotations

import hashlib
import random

import jax.numpy as jnp
import numpy as np
import pytest

from circuits import cs as C
from circuits.gadgets import boolean as Bo
from circuits.gadgets import merkle as M
from circuits.gadgets import sha_merkle as SM
from circuits.gadgets.num import Num
from tests.conftest import R
from tests.test_poseidon import fr, ints


def ref_hash2(a: int, b: int) -> int:
    """filecoin-hashers hash2 on bytes: digest[31] &= 0b0011_1111."""
    d = bytearray(hashlib.sha256(a.to_bytes(32, "little") + b.to_bytes(32, "little")).digest())
    d[31] &= 0x3F
    return int.from_bytes(d, "little")


# ---------------------------------------------------------------- counts
@pytest.mark.slow
def test_hash2_and_level_counts():
    """One recording: hash2 of two Nums, then one level with its own index
    bit, then one level with the caller's bit (rows counted between calls)."""
    cs = C.Recorder()
    a, b = Num.alloc(cs, ()), Num.alloc(cs, ())
    rows = [cs.num_constraints]
    SM.hash2(cs, a, b)
    rows.append(cs.num_constraints)
    root, bits = SM.merkle_root(cs, a, 1, None)
    rows.append(cs.num_constraints)
    SM.merkle_root(cs, root, 1, None, bits)
    rows.append(cs.num_constraints)
    assert np.diff(rows).tolist() == [45_379, 45_382, 45_381]
    assert bits.shape == (1,) and (bits.kind == Bo.IS).all()


def test_comm_d_opening_count():
    """StackedCircuit's comm_d inclusion: the data leaf and comm_d are the
    caller's Nums, the root stays private: 45,382·depth + 2 (§2.2)."""
    def opening(cs, _, depth, shape):
        leaf, comm_d = Num.alloc(cs, shape), Num.alloc(cs, shape)
        SM.por(cs, None, depth, True, shape, leaf=leaf, root=comm_d)
    r1cs = C.record(opening, 1, (2,))
    assert r1cs.num_constraints == 2 * (45_382 + 2)
    assert r1cs.num_inputs == 1 + 2                  # ONE and the packed bits of each
    with pytest.raises(ValueError, match="leaf has shape"):
        C.record(lambda cs, _: SM.por(cs, None, 1, True, (2,), leaf=Num.alloc(cs, ())))


def por_circuit(cs, inputs, depth, private):
    return SM.por(cs, inputs, depth, private, shape=()).value


@pytest.mark.slow
def test_por_count():
    r1cs = C.record(por_circuit, 6, False)
    assert r1cs.num_constraints == 272_295        # [T] por_circuit.rs, SHA base 2
    assert r1cs.num_inputs == 3


# ---------------------------------------------------------------- values
DEPTH = 3


def test_por_real_and_wrong_paths():
    rng = random.Random(5)
    leaves = [rng.randrange(1 << 254) for _ in range(1 << DEPTH)]
    layers = SM.tree_layers_native(leaves)
    ref = [leaves]
    while len(ref[-1]) > 1:
        ref.append([ref_hash2(ref[-1][i], ref[-1][i + 1]) for i in range(0, len(ref[-1]), 2)])
    assert layers == ref
    root = ref[-1][0]
    # instances: two real paths, a wrong leaf, a wrong index (the path of 5 claimed for 4)
    index = [6, 1, 3, 4]
    path_of = [6, 1, 3, 5]
    leaf = [leaves[6], leaves[1], (leaves[3] + 1) % R, leaves[4]]
    paths = [SM.tree_path_native(layers, i) for i in path_of]
    sibs = tuple(fr([[p[lv]] for p in paths]) for lv in range(DEPTH))
    inputs = M.PoRInputs(fr(leaf), M.MerklePath(jnp.asarray(np.asarray(index, np.uint32)), sibs),
                         fr([root] * 4))
    r1cs = C.record(por_circuit, DEPTH, False)
    assert r1cs.num_constraints == 45_382 * DEPTH + 3
    w, out = C.witness_with_outputs(por_circuit, inputs, DEPTH, False,
                                    in_axes=M.por_in_axes(DEPTH))
    w = np.asarray(w)
    vals = ints(w)
    for b in (0, 1):
        assert C.is_satisfied(r1cs, w[:, b]) == (True, None)
        assert list(vals[b, :3]) == [1, index[b], root]
    eq_row = r1cs.num_constraints - 2                  # computed·1 = root
    for b in (2, 3):
        assert C.is_satisfied(r1cs, w[:, b]) == (False, eq_row)


# ---------------------------------------------------------------- pick / select
def select_circuit(cs, inp, k):
    w = not cs.recording
    values = Num.alloc(cs, (1 << k,), (lambda: inp["values"]) if w else None)
    bits = Bo.alloc_bits(cs, (k,), (lambda: inp["bits"]) if w else None)
    return SM.select(cs, values, bits).value


def test_select_every_index():
    k = 3
    r1cs = C.record(select_circuit, k)
    assert r1cs.num_constraints - k == (1 << k) - 1
    rng = random.Random(3)
    vals = [[rng.randrange(R) for _ in range(1 << k)] for _ in range(1 << k)]
    bits = np.asarray([[(i >> j) & 1 for j in range(k)] for i in range(1 << k)], np.uint32)
    w, out = C.witness_with_outputs(select_circuit, {"values": fr(vals), "bits": jnp.asarray(bits)},
                                    k, in_axes={"values": 1, "bits": 0})
    w = np.asarray(w)
    got = ints(np.asarray(out).T)
    for i in range(1 << k):
        assert got[i] == vals[i][i]
        assert C.is_satisfied(r1cs, w[:, i]) == (True, None)
    bad = ints(w)[5]
    bad[r1cs.num_vars - 1] = (bad[r1cs.num_vars - 1] + 1) % R    # the selected value
    assert C.is_satisfied(r1cs, bad) == (False, r1cs.num_constraints - 1)


def test_bad_inputs():
    cs = C.Recorder()
    with pytest.raises(ValueError, match="at least one level"):
        SM.merkle_root(cs, Num.alloc(cs, ()), 0, None)
    with pytest.raises(ValueError, match="index bits"):
        SM.select(cs, Num.alloc(cs, (4,)), Bo.alloc_bits(cs, (3,)))
    with pytest.raises(ValueError, match="allocated"):
        SM.pick(cs, Bo.constant(cs, np.ones(())), Num.alloc(cs, ()), Num.alloc(cs, ()))
    with pytest.raises(ValueError, match="power of two"):
        SM.tree_layers_native([1, 2, 3])
