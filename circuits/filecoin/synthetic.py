"""Synthetic vanilla proofs: sparse Merkle trees with real inclusion paths.

A Filecoin vanilla proof opens a few challenged leaves of trees with up to
2^31 leaves.  A synthetic one needs only what the circuit sees: the
challenged leaves, their siblings level by level and the root.  ``sparse_tree``
builds exactly that for a batch of trees, level by level from the leaves:

* the challenged nodes of a level are the parents of the previous level's;
* a challenged node's group (its a children) holds the values of every
  challenged node in that group (paths that meet share their subtrees, so
  they agree from there up) and random field elements elsewhere, drawn once
  per group (all paths through a group see the same siblings);
* the parent is the hash of the group.

So the paths are the real paths of *a* tree (the one whose unopened subtrees
hash to the random siblings), all with one root, and the cost is
O(trees × challenges × levels) hashes, independent of the tree's size.

Values are canonical field elements as little-endian uint32 limbs, numpy
``(..., 8)`` on the host (``random_fr`` draws 254-bit values, the Fr32 nodes
Filecoin stores; ``to_fr`` / ``from_fr`` convert to and from the circuits'
Montgomery Fr arrays ``(8, ...)``; ``ints`` / ``limbs`` to and from Python
integers).  Hashers map groups ``(N, a, 8)`` to parents ``(N, 8)``:
``poseidon_hasher`` (MerkleTree-tagged Poseidon, tree R / C) and
``sha256_hasher`` (``hash2`` with ``trim_to_fr32``, tree D).  Everything is a
function of the seed: pass ``np.random.default_rng(seed)``.

**Periodic trees** (``periodic_tree``) are the other construction, for
proofs whose challenges are derived from the roots (SnapDeals: the
challenges come from comm_r_new, so tree R new must be fixed before they
are known).  Leaf i is ``blocks[i // region][i % period]``: a block of
``period`` leaves repeated, possibly different per region of ``region``
leaves.  Nodes whose subtrees hold the same leaves are equal, so a level
has few distinct nodes (keys: (region, offset in the block), (region,
whole blocks), or the node itself where a subtree straddles regions) and
the root costs O(levels × (regions + period)) hashes; ``periodic_paths``
opens any leaves, ``periodic_node`` reads any node.

API: ``sparse_tree(arities, index, hasher, rng, leaves=None) -> SparsePaths``,
``periodic_tree(arities, blocks, region, hasher) -> PeriodicTree``,
``periodic_paths(tree, index) -> SparsePaths``, ``periodic_node``,
``merkle_path(paths) -> circuits.gadgets.merkle.MerklePath``, ``random_fr``,
``to_fr``, ``from_fr``, ``ints``, ``limbs``, ``poseidon_hasher``,
``sha256_hasher``.
"""
from __future__ import annotations

import hashlib
import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from circuits.gadgets.merkle import MerklePath
from ops import poseidon as native
from ops.field import Fr

LIMBS = Fr.L
MAX_LEAVES = 1 << 31
_TOP_MASK = (1 << 30) - 1            # limb 7 of a 254-bit value
MIN_BUCKET = 128


# ---------------------------------------------------------------- values
def random_fr(rng: np.random.Generator, shape) -> np.ndarray:
    """Uniform 254-bit integers (< 2^254 < r: Fr32 nodes), uint32 limbs
    ``(*shape, 8)``."""
    v = rng.integers(0, 1 << 32, size=tuple(shape) + (LIMBS,), dtype=np.uint64).astype(np.uint32)
    v[..., -1] &= _TOP_MASK
    return v


def to_fr(v):
    """Canonical limbs ``(..., 8)`` -> Montgomery Fr ``(8, ...)`` (jax)."""
    return Fr.to_montgomery(jnp.moveaxis(jnp.asarray(v, jnp.uint32), -1, 0))


def from_fr(a) -> np.ndarray:
    """Montgomery Fr ``(8, ...)`` -> canonical limbs ``(..., 8)`` (numpy)."""
    return np.moveaxis(np.asarray(Fr.from_montgomery(jnp.asarray(a))), 0, -1)


def ints(v) -> np.ndarray:
    """Canonical limbs ``(..., 8)`` -> Python ints (object array ``(...)``)."""
    v = np.asarray(v, np.uint32)
    out = np.zeros(v.shape[:-1], dtype=object)
    for j in range(LIMBS):
        out = out + (v[..., j].astype(object) << (32 * j))
    return out


def limbs(xs) -> np.ndarray:
    """Python ints (any nesting) -> canonical limbs ``(..., 8)`` uint32."""
    obj = np.asarray(xs, dtype=object)
    out = np.zeros(obj.shape + (LIMBS,), np.uint32)
    for j in range(LIMBS):
        out[..., j] = np.vectorize(lambda x, j=j: (int(x) >> (32 * j)) & 0xFFFFFFFF,
                                   otypes=[np.uint32])(obj) if obj.size else 0
    return out


# ---------------------------------------------------------------- hashers
def poseidon_hasher(groups: np.ndarray, tag: int | None = None) -> np.ndarray:
    """Poseidon (``ops.poseidon.hash``; the MerkleTree tag unless ``tag``)
    of groups ``(N, a, 8)`` -> ``(N, 8)``.  N is padded to a power of two
    ≥ 128 (one compiled program per (arity, bucket); small trees share one).
    Runs on the host CPU: a generator hashes a few thousand nodes, and on a
    GPU each bucket's Pallas program took minutes to compile (bench/NOTES.md,
    Filecoin run 1)."""
    n = groups.shape[0]
    m = max(MIN_BUCKET, 1 << max(n - 1, 0).bit_length())
    pad = np.zeros((m - n,) + groups.shape[1:], np.uint32)
    with jax.default_device(jax.devices("cpu")[0]):
        out = native.hash(to_fr(np.concatenate([groups, pad])), tag)
        return from_fr(out)[:n]


def sha256_hasher(groups: np.ndarray) -> np.ndarray:
    """filecoin-hashers ``Sha256Function::hash2`` of pairs ``(N, 2, 8)``:
    SHA-256 of the two 32-byte little-endian encodings with the top two bits
    of the last byte cleared -> ``(N, 8)``."""
    if groups.shape[1] != 2:
        raise ValueError(f"sha256_hasher: SHA-256 trees are binary, got groups of "
                         f"{groups.shape[1]}")
    raw = np.ascontiguousarray(groups.astype("<u4")).view(np.uint8).reshape(groups.shape[0], 64)
    out = np.empty((groups.shape[0], 32), np.uint8)
    for i in range(groups.shape[0]):
        out[i] = np.frombuffer(hashlib.sha256(raw[i].tobytes()).digest(), np.uint8)
    out[:, 31] &= 0x3F
    return out.view("<u4").astype(np.uint32).reshape(groups.shape[0], LIMBS)


# ---------------------------------------------------------------- sparse trees
class SparsePaths(NamedTuple):
    """Real inclusion paths of challenged leaves in a batch of trees T.

    index:    int64 (*T, K) leaf indices
    leaves:   uint32 (*T, K, 8) the challenged leaves' values
    siblings: per level, leaves first, uint32 (*T, K, a − 1, 8) the other
              children of the path's group in child order
    root:     uint32 (*T, 8)
    """
    index: np.ndarray
    leaves: np.ndarray
    siblings: tuple
    root: np.ndarray


def _first_equal(keys: np.ndarray) -> np.ndarray:
    """(B, K) -> (B, K): for each k the first k' with keys[k'] == keys[k]."""
    return np.argmax(keys[:, :, None] == keys[:, None, :], axis=-1)


def sparse_tree(arities, index, hasher: Callable, rng: np.random.Generator,
                leaves=None) -> SparsePaths:
    """Paths of the challenged leaves ``index`` (*T, K) in trees of level
    arities ``arities`` (leaves first; Π arities ≤ 2^31 leaves) hashed with
    ``hasher``.  ``leaves`` (*T, K, 8) gives the challenged leaves' values
    (equal indices must have equal values); by default they are random.
    Everything else is random from ``rng`` (see the module docstring)."""
    arities = tuple(int(a) for a in arities)
    n = math.prod(arities)
    if not arities or any(a < 2 for a in arities) or n > MAX_LEAVES:
        raise ValueError(f"sparse_tree: arities {arities} must be ≥ 2 each with at most 2^31 "
                         f"leaves in all")
    index = np.asarray(index, np.int64)
    if index.ndim < 1 or index.shape[-1] < 1:
        raise ValueError(f"sparse_tree: index must be (*T, K) with K ≥ 1, got {index.shape}")
    if index.min() < 0 or index.max() >= n:
        raise ValueError(f"sparse_tree: a challenged index lies outside [0, {n})")
    T, K = index.shape[:-1], index.shape[-1]
    B = math.prod(T)
    idx = index.reshape(B, K)
    rows = np.arange(B)[:, None]
    first = _first_equal(idx)
    if leaves is None:
        val = random_fr(rng, (B, K))[rows, first]
    else:
        val = np.asarray(leaves, np.uint32)
        if val.shape != T + (K, LIMBS):
            raise ValueError(f"sparse_tree: leaves have shape {val.shape}, expected "
                             f"{T + (K, LIMBS)}")
        val = val.reshape(B, K, LIMBS)
        if not (val == val[rows, first]).all():
            raise ValueError("sparse_tree: two challenges of one leaf give different leaf values")
    leaf_vals = val.reshape(T + (K, LIMBS))
    sibs = []
    for a in arities:
        group, pos = idx // a, idx % a
        rep = _first_equal(group)
        children = random_fr(rng, (B, K, a))[rows, rep]            # (B, K, a, 8)
        same = group[:, :, None] == group[:, None, :]              # (B, K, K)
        for p in range(a):
            sel = same & (pos[:, None, :] == p)
            src = np.argmax(sel, axis=-1)
            children[:, :, p] = np.where(sel.any(-1)[..., None], val[rows, src],
                                         children[:, :, p])
        others = np.asarray([[j for j in range(a) if j != q] for q in range(a)])
        sibs.append(np.take_along_axis(children, others[pos][..., None], axis=2)
                    .reshape(T + (K, a - 1, LIMBS)))
        val = hasher(children.reshape(B * K, a, LIMBS)).reshape(B, K, LIMBS)
        idx = group
    assert (val == val[:, :1]).all(), "sparse_tree: paths disagree on the root"
    return SparsePaths(index, leaf_vals, tuple(sibs), val[:, 0].reshape(T + (LIMBS,)))


def merkle_path(paths: SparsePaths) -> MerklePath:
    """The circuit inputs of ``paths``: index uint32 (*T, K), siblings
    Montgomery Fr (8, *T, K, a − 1) per level."""
    return MerklePath(jnp.asarray(paths.index.astype(np.uint32)),
                      tuple(to_fr(s) for s in paths.siblings))


# ---------------------------------------------------------------- periodic trees
class PeriodicTree(NamedTuple):
    """A tree whose leaf i is blocks[i // region][i % period] (see the
    module docstring): per level, leaves first, a dict key -> row of
    ``values`` (uint32 (n_keys, 8)); ``widths`` the leaves under a node of
    each level."""
    arities: tuple
    widths: tuple
    period: int
    region: int
    keys: tuple
    values: tuple

    @property
    def root(self) -> np.ndarray:
        return self.values[-1][0]


def _node_key(width: int, j: int, period: int, region: int) -> tuple:
    start = j * width
    if period % width == 0:
        return (start // region, start % period)
    if start // region == (start + width - 1) // region:
        return (start // region, -1)
    return (-1, j)


def periodic_tree(arities, blocks, region: int, hasher: Callable) -> PeriodicTree:
    """Build the distinct nodes of the tree of level ``arities`` over the
    leaves ``blocks[i // region][i % period]`` (``blocks`` uint32 limbs
    (n / region, period, 8)); ``period`` must be the width of some level
    and divide ``region``.  One batched hash call per level."""
    arities = tuple(int(a) for a in arities)
    blocks = np.asarray(blocks, np.uint32)
    n = math.prod(arities)
    widths = tuple(math.prod(arities[:l]) for l in range(len(arities) + 1))
    regions, period = blocks.shape[:2]
    if (period not in widths or region % period or region * regions != n
            or blocks.shape[2:] != (LIMBS,)):
        raise ValueError(f"periodic_tree: blocks {blocks.shape} with regions of {region} do not "
                         f"tile {n} leaves at a level width ({widths})")
    # top-down: the distinct keys of each level with one representative node
    reps = [dict() for _ in widths]
    reps[-1][_node_key(n, 0, period, region)] = 0
    for lv in range(len(arities), 0, -1):
        a = arities[lv - 1]
        for j in reps[lv].values():
            for p in range(a):
                c = j * a + p
                reps[lv - 1].setdefault(_node_key(widths[lv - 1], c, period, region), c)
    keys = [{k: i for i, k in enumerate(r)} for r in reps]
    leaf = np.asarray([blocks[k[0], k[1]] for k in reps[0]], np.uint32)
    values = [leaf]
    for lv in range(1, len(widths)):
        a = arities[lv - 1]
        rows = [[keys[lv - 1][_node_key(widths[lv - 1], j * a + p, period, region)]
                 for p in range(a)] for j in reps[lv].values()]
        values.append(hasher(values[-1][np.asarray(rows)]))
    return PeriodicTree(arities, widths, period, region, tuple(keys), tuple(values))


def periodic_node(tree: PeriodicTree, level: int, j) -> np.ndarray:
    """Node values at ``level`` (0: leaves) of indices j (…) -> (…, 8)."""
    j = np.asarray(j, np.int64)
    w = tree.widths[level]
    rows = np.vectorize(lambda x: tree.keys[level][_node_key(w, int(x), tree.period,
                                                             tree.region)],
                        otypes=[np.int64])(j) if j.size else np.zeros(j.shape, np.int64)
    return tree.values[level][rows]


def periodic_paths(tree: PeriodicTree, index) -> SparsePaths:
    """The inclusion paths of leaves ``index`` (*T, K) (same layout as
    ``sparse_tree``'s, the root broadcast to (*T, 8))."""
    index = np.asarray(index, np.int64)
    if index.size and (index.min() < 0 or index.max() >= tree.widths[-1]):
        raise ValueError(f"periodic_paths: a challenged index lies outside [0, {tree.widths[-1]})")
    sibs, j = [], index
    for lv, a in enumerate(tree.arities):
        pos = j % a
        others = np.asarray([[q for q in range(a) if q != p] for p in range(a)])
        sibs.append(periodic_node(tree, lv, (j - pos)[..., None] + others[pos]))
        j = j // a
    root = np.broadcast_to(tree.root, index.shape[:-1] + (LIMBS,))
    return SparsePaths(index, periodic_node(tree, 0, index), tuple(sibs), np.array(root))
