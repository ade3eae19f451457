"""Filecoin PoSt / SnapDeals circuits (circuits.filecoin) against:

* rust-fil-proofs' constraint / public-input / aux counts as the research note
  tabulates them (research/filecoin-circuits.md §1, §2.3, §2.4, §5; [T] values
  are asserted by rust-fil-proofs' own tests or circuitinfo);
* the parameter table of §1 and storage-proofs-update constants.rs;
* independent host computations: Python-integer Poseidon
  (tests.test_poseidon.ref_poseidon), hashlib SHA-256 (vanilla.rs challenge
  derivation, tree D hash2), recomputing every synthetic path up to its root;
* ``circuits.cs.is_satisfied`` (every row with Python integers): synthetic
  inputs satisfy the circuits, a corrupted leaf / sibling / comm_r does not.

CPU discipline: one PoSt witness circuit in the fast set (the mini 3×5,
four instances in one batch: valid, bad leaf, bad sibling, bad comm_r); the
2 KiB witnesses and the large recordings are marked slow.
"""
from __future__ import annotations

import hashlib
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from circuits import cs as C
from circuits.filecoin import post as P
from circuits.filecoin import snap as SN
from circuits.filecoin import sizes as Z
from circuits.filecoin import synthetic as Y
from circuits.gadgets.sha_merkle import hash2_native
from ops.field import Fr
from tests.conftest import R
from tests.test_poseidon import ref_poseidon


# ---------------------------------------------------------------- helpers
def ref_root(leaf: int, index: int, siblings, arities, hash_fn) -> int:
    """Ascend a path with a reference hash (children as Python ints)."""
    cur = leaf
    for sib, a in zip(siblings, arities):
        sib = [int(x) for x in sib]
        p = index % a
        cur = hash_fn(sib[:p] + [cur] + sib[p:])
        index //= a
    return cur


def ref_challenge(randomness: bytes, sector_id: int, n: int, nodes: int) -> int:
    d = hashlib.sha256(randomness + sector_id.to_bytes(8, "little") + n.to_bytes(8, "little"))
    return int.from_bytes(d.digest()[:8], "little") % nodes


def batch1(tree, axes):
    """Add a leading instance axis of 1 to each leaf at its ``in_axes`` position."""
    return jax.tree_util.tree_map(lambda x, ax: jnp.expand_dims(jnp.asarray(x), ax), tree, axes)


def stack(trees, axes):
    return jax.tree_util.tree_map(lambda ax, *xs: jnp.stack([jnp.asarray(x) for x in xs], ax),
                                  axes, *trees)


# ---------------------------------------------------------------- parameters
def test_sizes_table():
    """§1 of the research note, row by row."""
    want = {  # nodes, tree R levels, tree D depth, layers, partitions, NI, chal, window, snap
        "2KiB": (1 << 6, (8,) * 2, 6, 2, 1, 13, 2, 2, (1, 10, 8, 1)),
        "8MiB": (1 << 18, (8,) * 6, 18, 2, 1, 13, 2, 2, (4, 10, 128, 10)),
        "512MiB": (1 << 24, (8,) * 8, 24, 2, 1, 13, 2, 2, (16, 86, 128, 10)),
        "32GiB": (1 << 30, (8,) * 10, 30, 11, 10, 126, 18, 2349, (16, 86, 128, 10)),
        "64GiB": (1 << 31, (8,) * 10 + (2,), 31, 11, 10, 126, 18, 2300, (16, 86, 128, 10)),
    }
    for name, w in want.items():
        p = Z.params(name)
        got = (p.nodes, p.tree_r_arities, p.tree_d_depth, p.porep_layers, p.porep_partitions,
               p.porep_partitions_ni, p.porep_challenges, p.window_sectors,
               (p.snap_partitions, p.snap_challenges, p.snap_apex_leaves, p.snap_h))
        assert got == w, name
        assert p.post("winning") == (66, 1) and p.post("window") == (w[7], 10)
        assert p.sector_bytes == p.nodes * 32
    assert Z.snap_params(32) == (1, 10, 8, (1,) * 6)
    with pytest.raises(ValueError, match="unknown sector size"):
        Z.params("4KiB")
    with pytest.raises(ValueError, match="kind"):
        Z.params("2KiB").post("spacetime")


# ---------------------------------------------------------------- PoSt counts
@pytest.mark.parametrize("tree, want", [("8-0-0", 16869), ("8-4-0", 22674), ("8-4-2", 27384)])
def test_post_counts_mini(tree, want):
    """storage-proofs-post tests/fallback_circuit.rs [T]: 3 sectors × 5
    challenges, 18 public inputs (+ ONE)."""
    m = Z.MINI_POST[tree]
    r1cs = C.record(P.fallback_post, m.tree_r_arities, m.sectors, m.challenges)
    assert (r1cs.num_constraints, r1cs.num_inputs) == (want, 19)
    assert P.constraint_count(m.tree_r_arities, m.sectors, m.challenges) == want


@pytest.mark.parametrize("size, kind, want", [
    ("2KiB", "winning", (90750, 132, 91674)), ("2KiB", "window", (21866, 22, 22128)),
    ("8MiB", "winning", (230670, 132, 233442)), ("8MiB", "window", (64266, 22, 65088)),
    ("32GiB", "winning", (370590, 132, None)), ("64GiB", "winning", (391314, 132, None))])
def test_post_counts_sizes(size, kind, want):
    """§1 / §5: constraints, public inputs (without ONE), aux (where tabulated)."""
    r1cs = P.record_post(size, kind)
    got = (r1cs.num_constraints, r1cs.num_inputs - 1, r1cs.num_aux)
    assert got[:2] == want[:2]
    if want[2] is not None:
        assert got[2] == want[2]


@pytest.mark.parametrize("size, want", [("32GiB", (125279217, 25839)),
                                        ("64GiB", (129887900, 25300))])
def test_post_window_large_by_formula(size, want):
    """Full 32/64 GiB WindowPoSt partitions are 125M rows (too big to record
    here): the circuit is recorded with 1 and 2 sectors at the real tree
    shape; its rows are exactly linear in S with the note's per-sector cost,
    which at S = 2349 / 2300 gives the [T] totals."""
    p = Z.params(size)
    rows = [C.record(P.fallback_post, p.tree_r_arities, s, 10) for s in (1, 2)]
    per = rows[0].num_constraints
    assert rows[1].num_constraints == 2 * per
    assert rows[1].num_inputs - 1 == 2 * 11
    assert (p.window_sectors * per, p.window_sectors * 11) == want
    assert P.constraint_count(p.tree_r_arities, p.window_sectors, 10) == want[0]


# ---------------------------------------------------------------- sparse trees
def test_sparse_tree_poseidon():
    """Two 8-8-4-2 trees (512 leaves), challenges that repeat, share a group
    and share upper subtrees: every path hashes (Python-integer Poseidon) to
    its tree's root, repeated leaves agree, given leaves are used."""
    arities = (8, 8, 4, 2)
    index = np.asarray([[5, 5, 6, 511, 64], [0, 7, 8, 256, 500]])
    rng = np.random.default_rng(3)
    sp = Y.sparse_tree(arities, index, Y.poseidon_hasher, rng)
    leaves = Y.ints(sp.leaves)
    assert leaves[0, 0] == leaves[0, 1]
    for t in range(2):
        root = int(Y.ints(sp.root[t]))
        for k in range(index.shape[1]):
            sibs = [Y.ints(s[t, k]) for s in sp.siblings]
            assert ref_root(int(leaves[t, k]), int(index[t, k]), sibs, arities,
                            ref_poseidon) == root
    # deterministic from the seed; given leaves
    again = Y.sparse_tree(arities, index, Y.poseidon_hasher, np.random.default_rng(3))
    assert (again.root == sp.root).all()
    given = Y.limbs([[1, 1, 2, 3, 4], [5, 6, 7, 8, 9]])
    sp2 = Y.sparse_tree(arities, index, Y.poseidon_hasher, rng, leaves=given)
    assert (sp2.leaves == given).all()
    sibs = [Y.ints(s[1, 3]) for s in sp2.siblings]
    assert ref_root(8, 256, sibs, arities, ref_poseidon) == int(Y.ints(sp2.root[1]))
    with pytest.raises(ValueError, match="different leaf values"):
        Y.sparse_tree(arities, index, Y.poseidon_hasher, rng, leaves=Y.limbs(np.arange(10)
                                                                            .reshape(2, 5)))
    with pytest.raises(ValueError, match="outside"):
        Y.sparse_tree(arities, index + 1, Y.poseidon_hasher, rng)


def test_sparse_tree_sha():
    """A 2^31-leaf binary SHA-256 tree (64 GiB tree D): paths checked with
    hashlib's hash2."""
    index = np.asarray([[0, 1, (1 << 31) - 1, 1 << 30, 12345]])
    sp = Y.sparse_tree((2,) * 31, index, Y.sha256_hasher, np.random.default_rng(5))
    root = int(Y.ints(sp.root[0]))
    assert root < 1 << 254
    for k in range(index.shape[1]):
        sibs = [Y.ints(s[0, k]) for s in sp.siblings]
        assert ref_root(int(Y.ints(sp.leaves[0, k])), int(index[0, k]), sibs, (2,) * 31,
                        lambda c: hash2_native(*c)) == root
    with pytest.raises(ValueError, match="binary"):
        Y.sha256_hasher(np.zeros((1, 4, 8), np.uint32))


def test_fr_conversions():
    xs = [0, 1, R - 1, (1 << 254) - 1, 12345678901234567890]
    v = Y.limbs(xs)
    assert list(Y.ints(v)) == xs
    assert list(Fr.to_int(np.asarray(Y.to_fr(v)))) == xs
    assert list(Y.ints(Y.from_fr(Y.to_fr(v)))) == xs


# ---------------------------------------------------------------- PoSt witness
def check_post_case(case, arities, S, K, kind, partition=0):
    """The public inputs of a synthetic partition against an independent
    computation: hashlib challenges, comm_r = Poseidon2(comm_c, root) and
    every path recomputed to the root; padding repeats the last sector."""
    nodes = math.prod(arities)
    n = len(case.sectors)
    want = []
    for i, sec in enumerate(case.sectors):
        chal = [ref_challenge(case.randomness, sec.id, (partition * S + i) * K + j, nodes)
                for j in range(K)]
        assert list(case.challenges[i]) == chal
        root = int(Y.ints(case.comm_r_last[i]))
        assert sec.comm_r == ref_poseidon([int(Y.ints(case.comm_c[i])), root])
        for j in range(K):
            sibs = [Y.ints(s[i, j]) for s in case.paths.siblings]
            assert ref_root(int(Y.ints(case.paths.leaves[i, j])), chal[j], sibs, arities,
                            ref_poseidon) == root
        want.append([sec.comm_r] + chal)
    want += [want[-1]] * (S - n)
    assert case.public == [x for b in want for x in b]
    if kind == "winning":
        assert len({s.id for s in case.sectors}) == 1
    return want


def corrupt(case, what):
    """The case's witness inputs with one value changed (+1)."""
    inp = case.inputs
    bump = lambda a, idx: a.at[idx].set(Fr.add(a[idx], Fr.constant(1, a[idx].shape[1:])))  # noqa
    if what == "leaf":
        return inp._replace(leaves=bump(inp.leaves, (slice(None), 1, 2)))
    if what == "sibling":
        sibs = list(inp.path.siblings)
        sibs[1] = bump(sibs[1], (slice(None), 0, 4, 3))
        return inp._replace(path=inp.path._replace(siblings=tuple(sibs)))
    if what == "comm_r":
        return inp._replace(comm_r=bump(inp.comm_r, (slice(None), 0)))
    raise AssertionError(what)


def test_post_mini_witness():
    """Mini PoSt (64-leaf base-8 trees, 3 sectors × 5 challenges), partition
    1 with 2 real sectors (padding repeats the second): the synthetic witness satisfies
    every row and its public inputs are the independent ones; a changed leaf,
    sibling or comm_r leaves a failing row."""
    m = Z.MINI_POST["8-0-0"]
    S, K, ar = m.sectors, m.challenges, m.tree_r_arities
    case = P.synthetic_post(ar, S, K, seed=11, real_sectors=2, partition=1)
    check_post_case(case, ar, S, K, "window", partition=1)
    # the whole proof's view: partition 1 of a 5-sector proof
    others = [P.PublicSector(i, i) for i in range(3)]
    assert P.public_inputs(case.randomness, others + case.sectors, 64, S, K, 1) == case.public
    r1cs = C.record(P.fallback_post, ar, S, K)
    axes = P.in_axes(len(ar))
    batch = stack([case.inputs] + [corrupt(case, x) for x in ("leaf", "sibling", "comm_r")], axes)
    w, pub = C.witness_with_outputs(P.fallback_post, batch, ar, S, K, in_axes=axes)
    w = np.asarray(w)
    assert C.is_satisfied(r1cs, w[:, 0]) == (True, None)
    assert list(Fr.to_int(w[:, 0, 1:r1cs.num_inputs])) == case.public
    assert list(Fr.to_int(np.moveaxis(np.asarray(pub), 0, 1)[:, 0]).reshape(-1)) == case.public
    for b, what in enumerate(("leaf", "sibling", "comm_r"), 1):
        assert not C.is_satisfied(r1cs, w[:, b])[0], what


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["window", "winning"])
def test_post_2kib_witness(kind):
    """2 KiB Window (2 × 10) and Winning (66 × 1, one sector repeated)
    partitions from the synthetic generator satisfy the recorded circuit."""
    p = Z.params("2KiB")
    S, K = p.post(kind)
    ar = p.tree_r_arities
    case = P.synthetic_post(ar, S, K, seed=2, kind=kind)
    check_post_case(case, ar, S, K, kind)
    r1cs = P.record_post("2KiB", kind)
    axes = P.in_axes(len(ar))
    w = np.asarray(C.witness(P.fallback_post, batch1(case.inputs, axes), ar, S, K, in_axes=axes))
    assert C.is_satisfied(r1cs, w[:, 0]) == (True, None)
    assert list(Fr.to_int(w[:, 0, 1:r1cs.num_inputs])) == case.public


def test_post_bad_input():
    m = Z.MINI_POST["8-0-0"]
    with pytest.raises(ValueError, match="real sectors"):
        P.synthetic_post(m.tree_r_arities, 3, 5, seed=0, real_sectors=4)
    with pytest.raises(ValueError, match="kind"):
        P.synthetic_post(m.tree_r_arities, 3, 5, seed=0, kind="daily")
    with pytest.raises(ValueError, match="at least one"):
        C.record(P.fallback_post, m.tree_r_arities, 0, 5)
    with pytest.raises(ValueError, match="randomness"):
        P.leaf_challenge(b"short", 1, 0, 64)


# ---------------------------------------------------------------- periodic trees
def test_periodic_tree():
    """A 64-leaf binary SHA tree with period 8 and two regions equals the
    hashlib tree over its explicit leaves, node by node; paths ascend to the
    root; bad tilings are refused."""
    from circuits.gadgets.sha_merkle import tree_layers_native
    rng = np.random.default_rng(8)
    blocks = Y.random_fr(rng, (2, 8))
    tree = Y.periodic_tree((2,) * 6, blocks, 32, Y.sha256_hasher)
    layers = tree_layers_native([int(Y.ints(blocks[i // 32][i % 8])) for i in range(64)])
    for lv, layer in enumerate(layers):
        assert list(Y.ints(Y.periodic_node(tree, lv, np.arange(len(layer))))) == layer
    sp = Y.periodic_paths(tree, np.asarray([[3, 40, 63]]))
    for k, c in enumerate((3, 40, 63)):
        sibs = [Y.ints(s[0, k]) for s in sp.siblings]
        assert ref_root(layers[0][c], c, sibs, (2,) * 6, lambda x: hash2_native(*x)) == \
            layers[-1][0]
    with pytest.raises(ValueError, match="tile"):
        Y.periodic_tree((2,) * 6, Y.random_fr(rng, (2, 3)), 32, Y.sha256_hasher)


# ---------------------------------------------------------------- SnapDeals
RANDOMNESS_TAG = 1 << 40          # HashType::Custom(Arbitrary(1)), research note §2.4


def test_snap_counts_mini():
    """storage-proofs-update tests/circuit.rs [T]: 32 nodes (8-4-0), 4 public
    inputs; the note's formula at every size (32 GiB [T])."""
    shape = SN.snap_shape(32, 8, 4, 0)
    r1cs = SN.record_snap(shape)
    assert (r1cs.num_constraints, r1cs.num_inputs) == (1248389, 5)
    for nodes, want in ((64, 1705039), (128, 2165109), (256, 2620359), (512, 6300021),
                        (1024, 6760091)):
        assert SN.constraint_count(SN.snap_shape(nodes, *Z.MINI_SNAP[nodes])) == want
    for size, want in (("2KiB", 1705039), ("8MiB", 10007503), ("512MiB", 57450479),
                       ("32GiB", 81049499), ("64GiB", 85006101)):
        assert SN.constraint_count(SN.size_shape(size)) == want, size


@pytest.mark.slow
@pytest.mark.parametrize("nodes, want", [(64, (1705039, 1703569)), (512, (6300021, None))])
def test_snap_counts_recorded(nodes, want):
    """2 KiB (aux 1,703,569 in the note) and 512 nodes (8-8-0, two
    partitions: the partition path) recorded."""
    r1cs = SN.record_snap(SN.snap_shape(nodes, *Z.MINI_SNAP[nodes]))
    assert (r1cs.num_constraints, r1cs.num_inputs) == (want[0], 5)
    if want[1] is not None:
        assert r1cs.num_aux == want[1]


def ref_snap_challenges(shape, comm_r_new, k):
    """challenges.rs with the Python-integer Poseidon."""
    cbl, pbl = shape.nodes.bit_length() - 1, shape.partitions.bit_length() - 1
    bpc = cbl - pbl
    cpd = 254 // bpc
    d = -(-shape.challenges // cpd)
    out = []
    for i in range(shape.challenges):
        dig = ref_poseidon([comm_r_new, k * d + i // cpd], RANDOMNESS_TAG)
        out.append((dig >> (i % cpd * bpc)) % (1 << bpc) | k << bpc)
    return out


@pytest.mark.parametrize("nodes, k", [(64, 0), (512, 1)])
def test_snap_synthetic_host(nodes, k):
    """The synthetic SnapDeals partition against an independent computation:
    comm_r = H(comm_c, root) for old and new, the challenges from comm_r_new,
    k_and_h_select, every opened tree R / tree D path ascends to its root,
    the apex leaves hash to the partition's node, and each new leaf is
    old + d·rho with rho = H_c(H_c(comm_d_new, comm_r_old), c >> (cbl − h))."""
    shape = SN.snap_shape(nodes, *Z.MINI_SNAP[nodes])
    case = SN.synthetic_snap(shape, seed=4, k=k)
    khs, comm_r_old, comm_d_new, comm_r_new = case.public
    h_index = shape.hs.index(shape.h)
    pbl = shape.partitions.bit_length() - 1
    assert khs == k + (1 << (pbl + h_index))
    assert comm_r_old == ref_poseidon([case.comm_c, case.root_r_old])
    assert comm_r_new == ref_poseidon([case.comm_c, case.root_r_new])
    assert list(case.challenges) == ref_snap_challenges(shape, comm_r_new, k)
    cbl = nodes.bit_length() - 1
    assert all(c >> (cbl - pbl) == k for c in case.challenges)
    inp = case.inputs
    val = lambda a: Fr.to_int(np.asarray(a))                       # noqa: E731
    phi = ref_poseidon([comm_d_new, comm_r_old], RANDOMNESS_TAG)
    hl, A = shape.hl, shape.apex_leaves
    apex = list(val(inp.apex_leaves))
    sha = lambda x: hash2_native(*x)                               # noqa: E731
    layer = apex
    while len(layer) > 1:
        layer = [hash2_native(layer[2 * i], layer[2 * i + 1]) for i in range(len(layer) // 2)]
    part_sibs = [val(s) for s in inp.partition_path]
    assert ref_root(layer[0], k, part_sibs, (2,) * pbl, sha) == comm_d_new
    for i, c in enumerate(case.challenges):
        c = int(c)
        old, d = int(val(inp.leaf_r_old)[i]), int(val(inp.leaf_d_new)[i])
        rho = ref_poseidon([phi, c >> (cbl - shape.h)], RANDOMNESS_TAG)
        new = (old + d * rho) % R
        for leaf, path, root in ((old, inp.path_r_old, case.root_r_old),
                                 (new, inp.path_r_new, case.root_r_new)):
            sibs = [val(s)[i] for s in path]
            assert ref_root(leaf, c, sibs, shape.arities, ref_poseidon) == root
        sibs = [val(s)[i] for s in inp.path_d]
        assert ref_root(d, c % (1 << hl), sibs, (2,) * hl, sha) == apex[(c >> hl) % A]
    with pytest.raises(ValueError, match="partition"):
        SN.k_and_h_select(shape, shape.partitions)
    with pytest.raises(ValueError, match="allowed"):
        SN.snap_shape(nodes, *Z.MINI_SNAP[nodes], h=5)


@pytest.mark.slow
def test_snap_mini_witness():
    """The 32-node (8-4-0) synthetic partition satisfies every row and its
    public inputs are the case's; a changed old leaf, apex leaf or tree D
    sibling leaves a failing row."""
    shape = SN.snap_shape(32, 8, 4, 0)
    case = SN.synthetic_snap(shape, seed=5)
    r1cs = SN.record_snap(shape)
    one = lambda a: Fr.add(a, Fr.constant(1, a.shape[1:]))          # noqa: E731
    inp = case.inputs
    bad_old = inp._replace(leaf_r_old=inp.leaf_r_old.at[:, 3].set(one(inp.leaf_r_old[:, 3])))
    bad_apex = inp._replace(apex_leaves=one(inp.apex_leaves))
    sib = inp.path_d[0]
    bad_sib = inp._replace(path_d=(sib.at[:, 0].set(one(sib[:, 0])),) + inp.path_d[1:])
    axes = SN.in_axes(shape)
    batch = stack([inp, bad_old, bad_apex, bad_sib], axes)
    w = np.asarray(C.witness(SN.empty_sector_update, batch, shape, in_axes=axes))
    assert C.is_satisfied(r1cs, w[:, 0]) == (True, None)
    assert list(Fr.to_int(w[:, 0, 1:5])) == case.public
    for b in (1, 2, 3):
        assert not C.is_satisfied(r1cs, w[:, b])[0], b
