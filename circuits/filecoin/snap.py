"""SnapDeals: rust-fil-proofs' ``EmptySectorUpdateCircuit``
(storage-proofs-update src/{circuit,gadgets,challenges,constants}.rs) as
tensor gadgets over all K challenges of a partition at once.

Notation: cbl = log2(nodes), pbl = log2(partitions), abl = log2(apex leaves
A), hl = cbl − pbl − abl (the tree D path from a leaf to its apex leaf),
bpc = cbl − pbl random bits per challenge, floor(254 / bpc) challenges per
digest, D = ceil(K / that) digests.  ``H_c`` is Poseidon of arity 2 with the
custom tag 1·2^40 (``POSEIDON_CONSTANTS_GEN_RANDOMNESS``), ``H_2`` the
MerkleTree-tagged one, ``hash2`` the trimmed SHA-256 of tree D.

**The circuit** (research/filecoin-circuits.md §2.4), in order:

* ``k_and_h_select`` allocated and made public; its pbl + 6 low bits
  allocated (1 row each) with (Σ 2^i·b_i)·1 = k_and_h_select; the first pbl
  bits (the partition k) packed (1 row); the other 6 are h_select (one-hot
  over the six allowed h);
* comm_r_old, comm_d_new, comm_r_new allocated and made public, in that
  order (the public inputs are [k_and_h_select, comm_r_old, comm_d_new,
  comm_r_new]);
* phi = H_c(comm_d_new, comm_r_old);
* comm_c, root_r_old, root_r_new, the A apex leaves, the pbl partition-path
  siblings allocated; comm_r_old = H_2(comm_c, root_r_old), the same for
  new (311 + 1 rows each): 947 + pbl rows so far;
* apex: the apex tree over the A leaves with hash2 (A − 1 hashes), its root
  opened with the partition bits up the pbl levels to comm_d_new
  (45,381 per level, + 1 row);
* challenge digests j < D: digest_index = k·D + j (1 row),
  digest = H_c(comm_r_new, digest_index), its 255 bits (1 row each) with
  (Σ 2^i·b_i)·1 = digest: 568 rows each; challenge i takes bits
  [(i mod cpd)·bpc, +bpc) of digest i div cpd, then the partition bits:
  c (little-endian, cbl bits);
* per challenge: for each of the six h, the h high bits of c packed
  (1 row) times the h_select bit (1 row), their sum (1 row): c_high
  (13 rows); rho = H_c(phi, c_high) (311); leaf_r_new = leaf_r_old +
  leaf_d_new·rho (2 rows); the tree R old and new paths driven by c's bits
  (no new bits: 527 / 385 / 313 per arity-8 / 4 / 2 level, + 1 row each);
  the apex leaf selected by c's bits [hl, hl + abl) (A − 1 picks); the
  tree D path of hl levels from leaf_d_new to it (45,381 each, + 1).

All rows count as the note's formula: 947 + pbl + (A − 1)·45,379 +
pbl·45,381 + 1 + 568·D + K·[326 + 2·(Σ levels + 1) + (A − 1) + hl·45,381 + 1]
(32 nodes 8-4-0: 1,248,389 [T]; 2 KiB: 1,705,039 [T]).  Each step is one
gadget call over the (K,) or (D,) batch, so aux variables and rows are
numbered op by op, not challenge by challenge as in bellperson.

API: ``SnapShape`` / ``snap_shape(nodes, base, sub, top, h=None)`` /
``size_shape(size, h=None)``,
``empty_sector_update(cs, inputs, shape)`` (the circuit function),
``SnapInputs``, ``in_axes(shape)``, ``constraint_count(shape)``,
``k_and_h_select(shape, k)``, ``challenges(shape, comm_r_new, k)``,
``record_snap(shape)``; the synthetic generator ``synthetic_snap``.

**Synthetic inputs.**  The challenges are derived from comm_r_new, so tree R
new (and with it tree R old and tree D, through phi and rho) must be fixed
before the challenges are known: sparse trees cannot be used.  The
generator uses ``synthetic.periodic_tree``: random blocks of P leaves for
tree R old and tree D (P a level width of both, dividing the h-region),
phi = H_c(comm_d_new, comm_r_old), rho_r = H_c(phi, r) for each of the 2^h
regions r = c >> (cbl − h), and tree R new's blocks per region
new = old + d·rho_r, which is vanilla's encoding at every node.  Roots cost
O(levels × (2^h + P)) hashes at any sector size.
"""
from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from circuits import cs as C
from circuits.cs import ONE
from circuits.filecoin import sizes as Z
from circuits.filecoin import synthetic as Y
from circuits.gadgets import boolean as Bo
from circuits.gadgets import merkle as M
from circuits.gadgets import sha_merkle as SM
from circuits.gadgets.multipack import CAPACITY, pack_bits
from circuits.gadgets.num import NUM_BITS, Num, canonical_bits
from circuits.gadgets.poseidon import constraint_count as poseidon_rows
from circuits.gadgets.poseidon import poseidon_hash
from ops import poseidon as native
from ops.field import R_FR, Fr

RANDOMNESS_TAG = native.custom_tag(1)          # HashType::Custom(CType::Arbitrary(1))
H_SELECT_BITS = 6
_POW2 = [1 << i for i in range(NUM_BITS)]


@dataclasses.dataclass(frozen=True)
class SnapShape:
    """The static shape of one SnapDeals partition circuit."""
    nodes: int
    arities: tuple          # tree R level arities, leaves first
    partitions: int
    challenges: int
    apex_leaves: int
    hs: tuple
    h: int

    @property
    def cbl(self) -> int:
        return self.nodes.bit_length() - 1

    @property
    def pbl(self) -> int:
        return self.partitions.bit_length() - 1

    @property
    def abl(self) -> int:
        return self.apex_leaves.bit_length() - 1

    @property
    def hl(self) -> int:
        """Tree D levels from a leaf to its apex leaf."""
        return self.cbl - self.pbl - self.abl

    @property
    def bits_per_challenge(self) -> int:
        return self.cbl - self.pbl

    @property
    def challenges_per_digest(self) -> int:
        return CAPACITY // self.bits_per_challenge

    @property
    def digests(self) -> int:
        return -(-self.challenges // self.challenges_per_digest)


def snap_shape(nodes: int, base: int, sub: int = 0, top: int = 0,
               h: int | None = None) -> SnapShape:
    """The shape of a sector of ``nodes`` nodes with tree R ``base-sub-top``
    (storage-proofs-update constants.rs); ``h`` defaults to hs[3]."""
    parts, chal, apex, hs = Z.snap_params(nodes)
    h = hs[3] if h is None else int(h)
    if h not in hs:
        raise ValueError(f"snap_shape: h = {h} is not one of the allowed {hs}")
    return SnapShape(nodes, M.tree_arities(base, sub, top, nodes), parts, chal, apex, hs, h)


def size_shape(size: str, h: int | None = None) -> SnapShape:
    """The shape of a production sector size ("2KiB", ..., "64GiB")."""
    p = Z.params(size)
    return snap_shape(p.nodes, p.base, p.sub, p.top, h)


class SnapInputs(NamedTuple):
    """Witness inputs of one partition, Fr Montgomery arrays:
    k_and_h_select, comm_r_old, comm_d_new, comm_r_new, comm_c, root_r_old,
    root_r_new (8,); apex_leaves (8, A); partition_path: per level above the
    apex root the tree D sibling (8, 1) (pbl levels); leaf_r_old, leaf_d_new
    (8, K); path_r_old, path_r_new: per tree R level (8, K, a − 1); path_d:
    per tree D level below the apex leaf (8, K, 1) (hl levels)."""
    k_and_h_select: object
    comm_r_old: object
    comm_d_new: object
    comm_r_new: object
    comm_c: object
    root_r_old: object
    root_r_new: object
    apex_leaves: object
    partition_path: tuple
    leaf_r_old: object
    leaf_d_new: object
    path_r_old: tuple
    path_r_new: tuple
    path_d: tuple


def in_axes(shape: SnapShape) -> SnapInputs:
    """``in_axes`` of a batch of partitions stacked in front (axis 1 of
    every Fr array)."""
    lv = len(shape.arities)
    return SnapInputs(*([1] * 8), (1,) * shape.pbl, 1, 1, (1,) * lv, (1,) * lv,
                      (1,) * shape.hl)


def _stack(nums) -> Num:
    s = nums[0].shape + (len(nums),)
    if nums[0].var is not None:
        return Num(s, np.stack([x.var for x in nums], -1), None)
    return Num(s, None, jnp.stack([x.value for x in nums], -1))


def _broadcast(x: Num, shape) -> Num:
    shape = tuple(shape)
    if x.var is not None:
        return Num(shape, np.broadcast_to(x.var, shape), None)
    v = x.value.reshape((Fr.L,) + (1,) * (len(shape) - len(x.shape)) + tuple(x.shape))
    return Num(shape, None, jnp.broadcast_to(v, (Fr.L,) + shape))


def _decompose(cs, x: Num, n: int) -> Bo.Bits:
    """``allocated_num_to_allocated_bits`` / the k_and_h_select split: the
    n low bits of x allocated (1 row each) and (Σ 2^i·b_i)·1 = x."""
    bits = Bo.alloc_bits(cs, x.shape + (n,),
                         None if cs.recording else (lambda: canonical_bits(x.value, n)))
    cs.enforce(lambda: (bits.lc(cs, _POW2[:n]).sum(-1), cs.lc(np.full(x.shape, ONE)),
                        x.lc(cs)))
    return bits


def _alloc(cs, shape, inputs, name):
    return Num.alloc(cs, shape, None if cs.recording else
                     (lambda: jnp.asarray(getattr(inputs, name))))


def _path(cs, inputs, name):
    """The MerklePath of given-bit PoRs (siblings only) or None (record)."""
    return None if cs.recording else M.MerklePath(None, tuple(getattr(inputs, name)))


def _equal(cs, a: Num, b: Num):
    """a·1 = b (``constraint::equal`` / the root checks), elementwise."""
    cs.enforce(lambda: (a.lc(cs), cs.lc(np.full(a.shape, ONE)), b.lc(cs)))


def empty_sector_update(cs, inputs: SnapInputs | None, shape: SnapShape):
    """``EmptySectorUpdateCircuit::synthesize`` of one partition (see the
    module docstring).  Returns the public inputs Num (4,)."""
    K, A, pbl, hl, cbl = shape.challenges, shape.apex_leaves, shape.pbl, shape.hl, shape.cbl
    if hl < 0:
        raise ValueError(f"empty_sector_update: {shape.nodes} nodes cannot hold {shape.partitions}"
                         f" partitions of {A} apex leaves")
    khs = _alloc(cs, (), inputs, "k_and_h_select")
    pub = [khs.inputize(cs)]
    kh_bits = _decompose(cs, khs, pbl + H_SELECT_BITS)
    part_bits, hsel = kh_bits[..., :pbl], kh_bits[..., pbl:]
    partition = pack_bits(cs, part_bits)
    commits = {}
    for name in ("comm_r_old", "comm_d_new", "comm_r_new"):
        commits[name] = _alloc(cs, (), inputs, name)
        pub.append(commits[name].inputize(cs))
    phi = poseidon_hash(cs, _stack([commits["comm_d_new"], commits["comm_r_old"]]), RANDOMNESS_TAG)

    comm_c = _alloc(cs, (), inputs, "comm_c")
    roots = _stack([_alloc(cs, (), inputs, "root_r_old"), _alloc(cs, (), inputs, "root_r_new")])
    apex = _alloc(cs, (A,), inputs, "apex_leaves")
    calc = poseidon_hash(cs, _stack([_broadcast(comm_c, (2,)), roots]))
    _equal(cs, calc, _stack([commits["comm_r_old"], commits["comm_r_new"]]))

    # apex tree and the partition path to comm_d_new
    row = apex
    while row.shape[-1] > 1:
        row = SM.hash2(cs, row[0::2], row[1::2])
    apex_root = row[0]
    if pbl:
        apex_root, _ = SM.merkle_root(cs, apex_root, pbl, _path(cs, inputs, "partition_path"),
                                      index_bits=part_bits)
    _equal(cs, apex_root, commits["comm_d_new"])

    # challenge bits from the digests of comm_r_new
    D, bpc, cpd = shape.digests, shape.bits_per_challenge, shape.challenges_per_digest
    j = np.arange(D)
    idx = Num.alloc(cs, (D,), None if cs.recording else (lambda: Fr.add(
        Fr.mul(_broadcast(partition, (D,)).value, Fr.constant(D, (D,))),
        jnp.asarray(Fr.from_int([int(x) for x in j])))))
    cs.enforce(lambda: (cs.lc(np.full((D,), partition.var), D) + cs.lc(np.full((D,), ONE),
                                                                     [int(x) for x in j]),
                        cs.lc(np.full((D,), ONE)), idx.lc(cs)))
    digest = poseidon_hash(cs, _stack([_broadcast(commits["comm_r_new"], (D,)), idx]),
                           RANDOMNESS_TAG)
    dbits = _decompose(cs, digest, NUM_BITS)                                 # (D, 255)
    i = np.arange(K)
    gen = dbits[i // cpd][np.arange(K)[:, None], (i % cpd)[:, None] * bpc + np.arange(bpc)]
    c_bits = Bo.concat([gen, part_bits[None].broadcast_to((K, pbl))], -1)   # (K, cbl)

    # per challenge: c_high via h_select, rho, the new label
    highs = []
    for t, h in enumerate(shape.hs):
        hi = pack_bits(cs, c_bits[..., cbl - h:])
        sel = hsel[..., t:t + 1].broadcast_to((K,))
        orz = Num.alloc(cs, (K,), None if cs.recording else (
            lambda hi=hi, sel=sel: jnp.where(sel.value[None] != 0, hi.value, 0).astype(jnp.uint32)))
        cs.enforce(lambda hi=hi, sel=sel, orz=orz: (hi.lc(cs), sel.lc(cs), orz.lc(cs)))
        highs.append(orz)
    c_high = Num.alloc(cs, (K,), None if cs.recording else (
        lambda: _sum([x.value for x in highs])))
    cs.enforce(lambda: (_stack(highs).lc(cs).sum(-1), cs.lc(np.full((K,), ONE)), c_high.lc(cs)))
    rho = poseidon_hash(cs, _stack([_broadcast(phi, (K,)), c_high]), RANDOMNESS_TAG)
    leaf_r_old = _alloc(cs, (K,), inputs, "leaf_r_old")
    leaf_d_new = _alloc(cs, (K,), inputs, "leaf_d_new")
    d_rho = leaf_d_new.mul(cs, rho)
    leaf_r_new = Num.alloc(cs, (K,), None if cs.recording else (
        lambda: Fr.add(leaf_r_old.value, d_rho.value)))
    cs.enforce(lambda: (leaf_r_old.lc(cs) + d_rho.lc(cs), cs.lc(np.full((K,), ONE)),
                        leaf_r_new.lc(cs)))

    # tree R old / new, the apex leaf, tree D up to it
    for leaf, name, k in ((leaf_r_old, "path_r_old", 0), (leaf_r_new, "path_r_new", 1)):
        root, _ = M.merkle_root(cs, leaf, shape.arities, _path(cs, inputs, name), index_bits=c_bits)
        _equal(cs, root, _broadcast(roots[k], (K,)))
    apex_leaf = SM.select(cs, _broadcast(apex, (K, A)), c_bits[..., hl:hl + shape.abl])
    top = leaf_d_new
    if hl:
        top, _ = SM.merkle_root(cs, leaf_d_new, hl, _path(cs, inputs, "path_d"),
                                index_bits=c_bits[..., :hl])
    _equal(cs, top, apex_leaf)
    return jnp.stack([x.value for x in pub], -1) if not cs.recording else pub


def _sum(values):
    """Σ of Fr arrays of one shape."""
    out = values[0]
    for v in values[1:]:
        out = Fr.add(out, v)
    return out


def constraint_count(shape: SnapShape) -> int:
    """The research note's formula (§5) from the gadgets' costs."""
    level = {2: 2 + poseidon_rows(2), 4: 8 + poseidon_rows(4), 8: 22 + poseidon_rows(8)}
    hash2, sha_level = 45379, 45381
    A, K = shape.apex_leaves, shape.challenges
    fixed = 947 + shape.pbl + (A - 1) * hash2 + shape.pbl * sha_level + 1
    per = (326 + 2 * (sum(level[a] for a in shape.arities) + 1) + (A - 1)
           + shape.hl * sha_level + 1)
    return fixed + 568 * shape.digests + K * per


def record_snap(shape: SnapShape) -> C.R1CS:
    """The recorded partition circuit of ``shape``."""
    return C.record(empty_sector_update, shape,
                    name=f"snap-{shape.nodes}-{'-'.join(map(str, shape.arities))}-h{shape.h}")


# ---------------------------------------------------------------- public values
def k_and_h_select(shape: SnapShape, k: int) -> int:
    """``PublicInputs::new``: k | (2^index(h) << pbl)."""
    if not 0 <= k < shape.partitions:
        raise ValueError(f"k_and_h_select: partition {k} outside [0, {shape.partitions})")
    return k | (1 << shape.hs.index(shape.h)) << shape.pbl


def _hash_c(a, b) -> np.ndarray:
    """H_c of limbs a, b (N, 8) -> (N, 8)."""
    return Y.poseidon_hasher(np.stack([a, b], 1), RANDOMNESS_TAG)


def challenges(shape: SnapShape, comm_r_new: int, k: int) -> np.ndarray:
    """challenges.rs ``Challenges::new(sector_nodes, comm_r_new, k)``: the
    K challenged nodes (int64) of partition k."""
    D, bpc, cpd = shape.digests, shape.bits_per_challenge, shape.challenges_per_digest
    digests = Y.ints(_hash_c(Y.limbs([comm_r_new] * D), Y.limbs([k * D + j for j in range(D)])))
    return np.asarray([(int(digests[i // cpd]) >> (i % cpd * bpc)) % (1 << bpc) | k << bpc
                       for i in range(shape.challenges)], np.int64)


class SnapCase(NamedTuple):
    """A synthetic partition: the witness inputs, the public inputs
    [k_and_h_select, comm_r_old, comm_d_new, comm_r_new], the challenges and
    the host values (ints) they come from."""
    inputs: SnapInputs
    public: list
    k: int
    challenges: np.ndarray
    comm_c: int
    root_r_old: int
    root_r_new: int
    trees: tuple            # (tree R old, tree D new, tree R new) PeriodicTrees


def _period(shape: SnapShape, limit: int = 64) -> int:
    """The block length: the largest tree R level width ≤ limit dividing
    the h-region (tree D's widths are all powers of two)."""
    region = shape.nodes >> shape.h
    widths = [math.prod(shape.arities[:lv]) for lv in range(len(shape.arities) + 1)]
    return max(w for w in widths if w <= min(limit, region) and region % w == 0)


def synthetic_snap(shape: SnapShape, seed: int, k: int = 0) -> SnapCase:
    """A satisfying partition k of ``shape``, deterministic from ``seed``
    (see the module docstring)."""
    rng = np.random.default_rng(seed)
    P, n, cbl = _period(shape), shape.nodes, shape.cbl
    old_block, d_block = Y.random_fr(rng, (1, P)), Y.random_fr(rng, (1, P))
    comm_c = Y.random_fr(rng, (1,))
    tree_old = Y.periodic_tree(shape.arities, old_block, n, Y.poseidon_hasher)
    tree_d = Y.periodic_tree((2,) * cbl, d_block, n, Y.sha256_hasher)
    comm_r_old = Y.poseidon_hasher(np.stack([comm_c, tree_old.root[None]], 1))
    comm_d = tree_d.root[None]
    phi = _hash_c(comm_d, comm_r_old)
    regions = 1 << shape.h
    rho = Y.ints(_hash_c(np.repeat(phi, regions, 0), Y.limbs(list(range(regions)))))
    old_i, d_i = Y.ints(old_block[0]), Y.ints(d_block[0])
    new_block = Y.limbs([[(int(o) + int(d) * int(r)) % R_FR for o, d in zip(old_i, d_i)]
                         for r in rho])
    tree_new = Y.periodic_tree(shape.arities, new_block, n >> shape.h, Y.poseidon_hasher)
    comm_r_new = Y.poseidon_hasher(np.stack([comm_c, tree_new.root[None]], 1))
    ints = lambda v: int(Y.ints(v.reshape(-1, Y.LIMBS)[0]))          # noqa: E731
    c = challenges(shape, ints(comm_r_new), k)
    p_old, p_new, p_d = (Y.periodic_paths(t, c[None]) for t in (tree_old, tree_new, tree_d))
    hl, A = shape.hl, shape.apex_leaves
    apex = Y.periodic_node(tree_d, hl, k * A + np.arange(A))
    khs = k_and_h_select(shape, k)
    scalar = lambda v: Y.to_fr(v.reshape(Y.LIMBS))                    # noqa: E731
    inputs = SnapInputs(
        jnp.asarray(Fr.from_int(khs)), scalar(comm_r_old), scalar(comm_d), scalar(comm_r_new),
        scalar(comm_c), scalar(tree_old.root), scalar(tree_new.root), Y.to_fr(apex),
        tuple(Y.to_fr(s[0, 0]) for s in p_d.siblings[hl + shape.abl:]),
        Y.to_fr(p_old.leaves[0]), Y.to_fr(p_d.leaves[0]),
        tuple(Y.to_fr(s[0]) for s in p_old.siblings), tuple(Y.to_fr(s[0]) for s in p_new.siblings),
        tuple(Y.to_fr(s[0]) for s in p_d.siblings[:hl]))
    public = [khs, ints(comm_r_old), ints(comm_d), ints(comm_r_new)]
    return SnapCase(inputs, public, k, c, ints(comm_c), ints(tree_old.root),
                    ints(tree_new.root), (tree_old, tree_d, tree_new))
