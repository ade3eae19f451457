"""Poseidon Merkle inclusion gadgets (circuits.gadgets.merkle) against:

* rust-fil-proofs' constraint counts: one level 314 / 387 / 530 (index bits +
  insert + hash, research/filecoin-circuits.md §2.1) and the PoR circuit over
  64×(sub·top) leaves asserted by storage-proofs-core tests/por_circuit.rs
  [T] (1,887 / 1,164 / 1,063 / 1,377 / 1,593 / 1,764 / 1,907);
* Python lists (insert at every position) and trees built with the plain
  Python-integer Poseidon of tests/test_poseidon.py: real paths satisfy every
  row, a wrong leaf or a wrong index leaves a failing row;
* filecoin-hashers' binary-tree vector (leaves [1, 0, 0, 1]) for the native
  tree builder.

Compile discipline: three small insert circuits, one PoR witness circuit
(a 8-4-2 tree: every arity's hash, and a scanned run of levels)."""
from __future__ import annotations

import math
import random

import jax.numpy as jnp
import numpy as np
import pytest

from circuits import cs as C
from circuits.gadgets import boolean as Bo
from circuits.gadgets import merkle as M
from circuits.gadgets.num import Num
from tests.conftest import R
from tests.test_poseidon import H_1_0, ROOT_1001, fr, ints, ref_poseidon


# ---------------------------------------------------------------- counts
def one_level(cs, _, arity):
    M.merkle_root(cs, Num.alloc(cs, ()), (arity,), None)


@pytest.mark.parametrize("arity, want", [(2, 314), (4, 387), (8, 530)])
def test_level_counts(arity, want):
    r1cs = C.record(one_level, arity)
    assert r1cs.num_constraints == want
    k = arity.bit_length() - 1
    assert r1cs.bit_vars.sum() == k + (2 if arity == 8 else 0)    # index bits, nor, and


def por_circuit(cs, inputs, arities, private):
    M.por(cs, inputs, arities, private)


@pytest.mark.parametrize("tree, want", [
    ((2, 0, 0, 64), 1887), ((4, 0, 0, 64), 1164), ((8, 0, 0, 64), 1063),
    ((8, 2, 0, 128), 1377), ((8, 8, 0, 512), 1593), ((8, 4, 2, 512), 1764),
    ((8, 8, 2, 1024), 1907)])
def test_por_counts(tree, want):
    arities = M.tree_arities(*tree)
    assert math.prod(arities) == tree[3]
    r1cs = C.record(por_circuit, arities, False)
    assert r1cs.num_constraints == want
    assert r1cs.num_inputs == 3                      # ONE, packed path bits, root
    private = C.record(por_circuit, arities, True)
    assert private.num_constraints == want - 1 and private.num_inputs == 2


def test_tree_arities():
    assert M.tree_arities(8, 0, 0, 64) == (8, 8)
    assert M.tree_arities(8, 8, 2, 1024) == (8, 8, 8, 2)
    assert M.tree_arities(2, 0, 0, 8) == (2, 2, 2)
    with pytest.raises(ValueError, match="leaves"):
        M.tree_arities(8, 0, 0, 100)
    with pytest.raises(ValueError, match="not supported"):
        M.tree_arities(16, 0, 0, 256)
    with pytest.raises(ValueError, match="sub level"):
        M.tree_arities(8, 0, 2, 128)


# ---------------------------------------------------------------- insert
def insert_circuit(cs, inp, arity):
    k = arity.bit_length() - 1
    w = not cs.recording
    x = Num.alloc(cs, (), (lambda: inp["x"]) if w else None)
    sib = Num.alloc(cs, (arity - 1,), (lambda: inp["sib"]) if w else None)
    bits = Bo.alloc_bits(cs, (k,), (lambda: inp["bits"]) if w else None)
    return M.insert(cs, x, bits, sib).value


@pytest.mark.parametrize("arity, rows", [(2, 2), (4, 8), (8, 22)])
def test_insert(arity, rows):
    """Every position: the children are the Python list with x inserted; a
    flipped index bit breaks a row."""
    k = arity.bit_length() - 1
    rng = random.Random(arity)
    r1cs = C.record(insert_circuit, arity)
    assert r1cs.num_constraints - k == rows
    xs = [rng.randrange(R) for _ in range(arity)]
    sibs = [[rng.randrange(R) for _ in range(arity - 1)] for _ in range(arity)]
    bits = np.asarray([[(p >> i) & 1 for i in range(k)] for p in range(arity)], np.uint32)
    inp = {"x": fr(xs), "sib": fr(sibs), "bits": jnp.asarray(bits)}
    w, out = C.witness_with_outputs(insert_circuit, inp, arity,
                                    in_axes={"x": 1, "sib": 1, "bits": 0})
    w = np.asarray(w)
    got = ints(np.moveaxis(np.asarray(out), 0, 1))
    for p in range(arity):
        assert list(got[p]) == sibs[p][:p] + [xs[p]] + sibs[p][p:], p
        assert C.is_satisfied(r1cs, w[:, p]) == (True, None)
    vals = ints(w)[1]
    bit_col = r1cs.num_inputs + 1 + (arity - 1)      # ONE, x, siblings, then the bits
    vals[bit_col] ^= 1
    assert not C.is_satisfied(r1cs, vals)[0]


# ---------------------------------------------------------------- PoR
def ref_tree(leaves, arities):
    layers = [list(leaves)]
    for a in arities:
        prev = layers[-1]
        layers.append([ref_poseidon(prev[i:i + a]) for i in range(0, len(prev), a)])
    return layers


def ref_path(layers, arities, index):
    sibs, idx = [], index
    for layer, a in zip(layers, arities):
        g, p = divmod(idx, a)
        group = layer[g * a:(g + 1) * a]
        sibs.append(group[:p] + group[p + 1:])
        idx = g
    return sibs


# 8-4-2 with 4096 leaves: three base levels (in witness mode the last two run
# as one scanned cs.loop step), then one level of arity 4 and one of arity 2
TREE = M.tree_arities(8, 4, 2, 4096)


def por_inputs(leaves, index, sibs, root):
    return M.PoRInputs(fr(leaves), M.MerklePath(jnp.asarray(np.asarray(index, np.uint32)),
                                                tuple(fr(s) for s in sibs)), fr(root))


@pytest.mark.slow   # CI time (session 21: see bench/NOTES.md)
def test_por_witness():
    """Real paths of a 4096-leaf 8-4-2 tree (two instances): every row holds and
    the public inputs are the packed index and the root; a wrong leaf or a
    wrong index (the siblings of another position) leaves a failing row."""
    rng = random.Random(7)
    leaves = [rng.randrange(R) for _ in range(math.prod(TREE))]
    layers = ref_tree(leaves, TREE)
    root = layers[-1][0]
    index = [3001, 6]
    paths = [ref_path(layers, TREE, i) for i in index]
    sibs = [[paths[b][lv] for b in range(2)] for lv in range(len(TREE))]
    r1cs = C.record(por_circuit, TREE, False)
    fn = C.witness_fn(por_circuit, TREE, False, in_axes=M.por_in_axes(len(TREE)))

    def run(lv, idx):
        w, _ = fn(por_inputs(lv, idx, sibs, [root, root]))
        return np.asarray(w)

    w = run([leaves[i] for i in index], index)
    vals = ints(w)
    for b in range(2):
        assert C.is_satisfied(r1cs, w[:, b]) == (True, None)
        assert list(vals[b, :3]) == [1, index[b], root]
    w = run([(leaves[index[0]] + 1) % R, leaves[index[1]]], index)
    assert not C.is_satisfied(r1cs, w[:, 0])[0]
    assert C.is_satisfied(r1cs, w[:, 1])[0]
    w = run([leaves[i] for i in index], [index[0], index[1] ^ 1])
    assert C.is_satisfied(r1cs, w[:, 0])[0]
    assert not C.is_satisfied(r1cs, w[:, 1])[0]


def test_native_tree_vector():
    """tree_layers over the leaves [1, 0, 0, 1] (filecoin-hashers
    test_poseidon_hasher) gives the note's root; tree_path gives the
    reference siblings."""
    layers = M.tree_layers(fr([1, 0, 0, 1]), (2, 2))
    assert ints(layers[1])[0] == H_1_0
    assert ints(layers[-1])[0] == ROOT_1001
    ref = ref_tree([1, 0, 0, 1], (2, 2))
    assert [list(ints(x)) for x in layers] == ref
    path = M.tree_path(layers, (2, 2), jnp.asarray([2, 1]))
    assert [ints(s).tolist() for s in path.siblings] == \
        [[[ref_path(ref, (2, 2), i)[lv][0]] for i in (2, 1)] for lv in range(2)]
    with pytest.raises(ValueError, match="leaves"):
        M.tree_layers(fr([1, 0, 0]), (2, 2))


def test_bad_path_input():
    def short(cs, inp):
        M.merkle_root(cs, Num.alloc(cs, (), lambda: inp), (2, 2), M.MerklePath(0, ()))
    with pytest.raises(ValueError, match="sibling levels"):
        C.witness(short, fr([1, 2]), in_axes=1)



def given_bits_circuit(cs, inputs, arities):
    """por_no_challenge_input's shape: the challenge bits allocated first,
    then the path without its own bits, then root equality."""
    w = not cs.recording
    n = sum(a.bit_length() - 1 for a in arities)
    shifts = jnp.arange(n, dtype=jnp.uint32)
    bits = Bo.alloc_bits(cs, (n,), None if not w else (
        lambda: (jnp.asarray(inputs.path.index, jnp.uint32) >> shifts) & 1))
    leaf = Num.alloc(cs, (), (lambda: inputs.leaf) if w else None)
    root, _ = M.merkle_root(cs, leaf, arities, inputs.path if w else None, index_bits=bits)
    rt = Num.alloc(cs, (), (lambda: inputs.root) if w else None)
    cs.enforce(lambda: (root.lc(cs), cs.lc(np.full((), C.ONE)), rt.lc(cs)))


@pytest.mark.parametrize("arity, want", [(2, 313), (4, 385), (8, 527)])
def test_level_counts_given_bits(arity, want):
    k = arity.bit_length() - 1
    r1cs = C.record(given_bits_circuit, (arity, arity))
    assert r1cs.num_constraints == 2 * k + 2 * want + 1


@pytest.mark.slow
def test_given_bits_witness():
    """Three binary levels with caller-allocated bits (two of them scanned):
    the right path satisfies every row, the wrong index does not."""
    rng = random.Random(9)
    tree = (2, 2, 2)
    leaves = [rng.randrange(R) for _ in range(8)]
    layers = ref_tree(leaves, tree)
    index = [5, 2]
    paths = [ref_path(layers, tree, i) for i in index]
    sibs = [[paths[b][lv] for b in range(2)] for lv in range(3)]
    r1cs = C.record(given_bits_circuit, tree)
    fn = C.witness_fn(given_bits_circuit, tree, in_axes=M.por_in_axes(3))
    w = np.asarray(fn(por_inputs([leaves[i] for i in index], index, sibs,
                                 [layers[-1][0]] * 2))[0])
    for b in range(2):
        assert C.is_satisfied(r1cs, w[:, b]) == (True, None)
    w = np.asarray(fn(por_inputs([leaves[i] for i in index], [4, 2], sibs,
                                 [layers[-1][0]] * 2))[0])
    assert not C.is_satisfied(r1cs, w[:, 0])[0]
    assert C.is_satisfied(r1cs, w[:, 1])[0]
