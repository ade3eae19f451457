"""Winning and Window PoSt: rust-fil-proofs' ``FallbackPoStCircuit``
(storage-proofs-post src/fallback/{circuit,compound,vanilla}.rs), as tensor
gadgets over all S sectors × K challenges of a partition at once.

**The circuit** (research/filecoin-circuits.md §2.3), per sector:

* comm_r_last, comm_c, comm_r allocated (private), comm_r made public
  (``inputize``: input·1 = comm_r);
* comm_r = Poseidon2(comm_c, comm_r_last) (311 rows + the row comm_r·1 = h):
  313 rows in all;

per challenge (``PoRCircuit`` with ``Root::Val`` leaf, ``Root::Var``
comm_r_last, private): the leaf allocated, its tree R path (index bits
allocated level by level), the index bits packed into one public input and
computed·1 = comm_r_last: P = Σ levels + 2 rows (530 per arity-8 level).
A partition costs S·(313 + K·P) rows and has S·(1 + K) public inputs.

Winning PoSt is 66 "sectors" × 1 challenge: the one challenged sector
repeated (filecoin-proofs api/winning_post.rs); Window PoSt is S sectors ×
10 challenges.  The whole partition is one batch: each gadget runs once over
(S,) or (S, K) tensors (``circuits.cs``: the aux variables and rows are
numbered op by op over the batch, not sector by sector as bellperson's loop
does; the counts are the same).

**Public inputs, rust-fil-proofs' order** (``generate_public_inputs``): per
sector, comm_r, then its K challenged leaf indices.  The circuit allocates
them as one (S, 1 + K) block first, so their order is exactly that.

**Challenges** (vanilla.rs ``generate_leaf_challenge_inner``): challenge n
of sector i of partition j has the index c = (j·S + i)·K + n and the leaf
u64_le(SHA-256(randomness ‖ u64_le(sector_id) ‖ u64_le(c))[..8]) mod nodes.

**Padding**: a partition with fewer real sectors than S repeats its last
sector, in the circuit (its vanilla proof) and in the public inputs
(compound.rs ``circuit``, ``generate_public_inputs``): ``pad_sectors``.

**Synthetic inputs** (``synthetic_post``): seeded randomness, sector ids and
comm_c; each sector's tree R as a sparse tree holding the real paths of its
challenged leaves (``circuits.filecoin.synthetic``), comm_r_last its root,
comm_r = Poseidon2(comm_c, comm_r_last).  Works for any sector size (the
sparse tree costs only the challenged paths).

API: ``fallback_post(cs, inputs, arities, sectors, challenges)`` (the circuit
function for ``circuits.cs.record`` / ``witness``), ``PoStInputs``,
``in_axes(levels)``, ``constraint_count(arities, sectors, challenges)``,
``leaf_challenge``, ``partition_challenges``, ``public_inputs``,
``partition_public_inputs``, ``pad_sectors``, ``PublicSector``, ``PoStCase``, ``synthetic_post``,
``record_post(size, kind)``.

Recording cost: record mode is numpy over whole tensors, ~1–3 s for a
WinningPoSt partition on the CPU; a full 32 GiB WindowPoSt partition
(2349 sectors, 125,279,217 rows) needs tens of GB of host memory for its
CSR fragments, so the tests check it by linearity in S (see
``constraint_count``).
"""
from __future__ import annotations

import hashlib
import math
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from circuits import cs as C
from circuits.cs import ONE
from circuits.filecoin import sizes as Z
from circuits.filecoin import synthetic as Y
from circuits.gadgets import merkle as M
from circuits.gadgets.multipack import CAPACITY, pack_value
from circuits.gadgets.num import Num
from circuits.gadgets.poseidon import constraint_count as poseidon_rows
from circuits.gadgets.poseidon import poseidon_hash


class PoStInputs(NamedTuple):
    """Witness inputs of one partition (S sectors × K challenges), Fr
    Montgomery arrays: comm_r, comm_c, comm_r_last (8, S); leaves (8, S, K);
    path: the tree R paths, index uint32 (S, K) and per level the siblings
    (8, S, K, a − 1)."""
    comm_r: object
    comm_c: object
    comm_r_last: object
    leaves: object
    path: M.MerklePath


def in_axes(levels: int) -> PoStInputs:
    """``in_axes`` of a batch of partitions stacked in front (Fr arrays are
    limb-major: axis 1)."""
    return PoStInputs(1, 1, 1, 1, M.MerklePath(0, (1,) * levels))


def _stack(nums) -> Num:
    """Num tensors of one shape S -> Num (*S, n)."""
    s = nums[0].shape + (len(nums),)
    if nums[0].var is not None:
        return Num(s, np.stack([x.var for x in nums], -1), None)
    return Num(s, None, jnp.stack([x.value for x in nums], -1))


def _index_bits(index, nbits: int):
    """Leaf indices (…) -> their nbits little-endian bits (…, nbits)."""
    sh = jnp.arange(nbits, dtype=jnp.uint32)
    return (jnp.asarray(index).astype(jnp.uint32)[..., None] >> sh) & 1


def fallback_post(cs, inputs: PoStInputs | None, arities, sectors: int, challenges: int):
    """``FallbackPoStCircuit::synthesize`` of one partition: ``sectors`` (S)
    sectors × ``challenges`` (K) challenges over tree R of level ``arities``
    (leaves first).  Returns the public inputs Num (S, 1 + K)."""
    arities = tuple(arities)
    S, K = int(sectors), int(challenges)
    if S < 1 or K < 1:
        raise ValueError(f"fallback_post: need at least one sector and one challenge, got {S}×{K}")
    nbits = sum(a.bit_length() - 1 for a in arities)
    if nbits > CAPACITY:
        raise ValueError(f"fallback_post: {nbits} index bits do not fit one public input")
    w = not cs.recording
    if w:
        want = {"comm_r": (8, S), "comm_c": (8, S), "comm_r_last": (8, S),
                "leaves": (8, S, K)}
        for name, shape in want.items():
            got = tuple(jnp.shape(getattr(inputs, name)))
            if got != shape:
                raise ValueError(f"fallback_post: {name} has shape {got}, expected {shape}")
        if tuple(jnp.shape(inputs.path.index)) != (S, K):
            raise ValueError(f"fallback_post: path.index has shape "
                             f"{tuple(jnp.shape(inputs.path.index))}, expected {(S, K)}")

    def public():
        idx = pack_value(_index_bits(inputs.path.index, nbits))          # (8, S, K)
        return jnp.concatenate([jnp.asarray(inputs.comm_r)[..., None], idx], -1)

    inp = Num.alloc_input(cs, (S, 1 + K), public if w else None)
    val = (lambda name: (lambda: jnp.asarray(getattr(inputs, name)))) if w else (lambda _: None)
    comm_r_last = Num.alloc(cs, (S,), val("comm_r_last"))
    comm_c = Num.alloc(cs, (S,), val("comm_c"))
    comm_r = Num.alloc(cs, (S,), val("comm_r"))
    ones = lambda shape: cs.lc(np.full(shape, ONE))                     # noqa: E731
    cs.enforce(lambda: (inp[:, 0].lc(cs), ones((S,)), comm_r.lc(cs)))
    h = poseidon_hash(cs, _stack([comm_c, comm_r_last]))
    cs.enforce(lambda: (comm_r.lc(cs), ones((S,)), h.lc(cs)))

    leaves = Num.alloc(cs, (S, K), val("leaves"))
    computed, bits = M.merkle_root(cs, leaves, arities, inputs.path if w else None)
    pow2 = [1 << i for i in range(nbits)]
    cs.enforce(lambda: (bits.lc(cs, pow2).sum(-1), ones((S, K)), inp[:, 1:].lc(cs)))
    cs.enforce(lambda: (computed.lc(cs), ones((S, K)), cs.lc(comm_r_last.var[:, None])))
    return inp.value if w else inp


def constraint_count(arities, sectors: int, challenges: int) -> int:
    """S·(313 + K·P), P = Σ levels (index bits + insert + hash) + 2: the
    research note's formula, from the gadgets' per-level costs."""
    level = {2: 1 + 2, 4: 2 + 8, 8: 3 + 22}
    p = sum(level[a] + poseidon_rows(a) for a in arities) + 2
    return sectors * (2 + poseidon_rows(2) + challenges * p)


# ---------------------------------------------------------------- public inputs
class PublicSector(NamedTuple):
    """vanilla.rs ``PublicSector``: the sector id (u64) and comm_r (int)."""
    id: int
    comm_r: int


def leaf_challenge(randomness: bytes, sector_id: int, challenge_index: int, nodes: int) -> int:
    """vanilla.rs ``generate_leaf_challenge``: the challenged leaf of
    ``challenge_index`` in sector ``sector_id``."""
    if len(randomness) != 32:
        raise ValueError(f"leaf_challenge: randomness is {len(randomness)} bytes, expected 32")
    d = hashlib.sha256(bytes(randomness) + int(sector_id).to_bytes(8, "little")
                       + int(challenge_index).to_bytes(8, "little")).digest()
    return int.from_bytes(d[:8], "little") % nodes


def pad_sectors(sectors: list, count: int) -> list:
    """A partition's sectors padded to ``count`` by repeating the last."""
    if not 1 <= len(sectors) <= count:
        raise ValueError(f"pad_sectors: {len(sectors)} sectors for a partition of {count}")
    return list(sectors) + [sectors[-1]] * (count - len(sectors))


def partition_challenges(randomness: bytes, sector_ids, nodes: int, sectors: int,
                         challenges: int, partition: int = 0) -> np.ndarray:
    """The challenged leaves (n, K) of the n ≤ S real sectors of partition
    ``partition`` (``sector_ids`` are that partition's sectors)."""
    return np.asarray([[leaf_challenge(randomness, sid, (partition * sectors + i) * challenges + n,
                                       nodes) for n in range(challenges)]
                       for i, sid in enumerate(sector_ids)], np.int64).reshape(-1, challenges)


def public_inputs(randomness: bytes, sectors: list, nodes: int, sector_count: int,
                  challenges: int, partition: int = 0) -> list:
    """``FallbackPoStCircuit::generate_public_inputs`` for partition
    ``partition``: ``sectors`` are ALL PublicSectors of the proof (chunked
    into partitions of ``sector_count``); per sector comm_r and its K leaf
    indices, the last sector's block repeated to fill the partition."""
    chunk = list(sectors)[partition * sector_count:(partition + 1) * sector_count]
    if not chunk:
        raise ValueError(f"public_inputs: partition {partition} has no sectors")
    return partition_public_inputs(randomness, chunk, nodes, sector_count, challenges, partition)


def partition_public_inputs(randomness: bytes, chunk: list, nodes: int, sector_count: int,
                            challenges: int, partition: int) -> list:
    """``public_inputs`` given the partition's own sectors ``chunk``."""
    ch = partition_challenges(randomness, [s.id for s in chunk], nodes, sector_count,
                              challenges, partition)
    block = [[int(s.comm_r)] + [int(c) for c in row] for s, row in zip(chunk, ch)]
    return [x for b in pad_sectors(block, sector_count) for x in b]


# ---------------------------------------------------------------- synthetic inputs
class PoStCase(NamedTuple):
    """A synthetic partition: the circuit's witness inputs (padded to S), the
    public inputs, and the host values they come from."""
    inputs: PoStInputs
    public: list                 # rust-fil-proofs' order, S·(1 + K) ints
    randomness: bytes
    sectors: list                # PublicSector of the real sectors
    challenges: np.ndarray       # (n, K) challenged leaves of the real sectors
    comm_c: np.ndarray           # limbs (n, 8)
    comm_r_last: np.ndarray      # limbs (n, 8)
    paths: Y.SparsePaths         # trees (n,), K challenges each


def synthetic_post(arities, sectors: int, challenges: int, seed: int, kind: str = "window",
                   real_sectors: int | None = None, partition: int = 0) -> PoStCase:
    """A satisfying partition ``partition`` of ``sectors`` (S) ×
    ``challenges`` (K) over tree R ``arities``, deterministic from ``seed``.
    ``kind`` "window": the partition's ``real_sectors`` (default S) distinct
    sectors, padded to S; "winning": one sector repeated S times (its S·K
    challenges in one tree)."""
    arities = tuple(arities)
    nodes = math.prod(arities)
    n = sectors if real_sectors is None else int(real_sectors)
    if not 1 <= n <= sectors:
        raise ValueError(f"synthetic_post: {n} real sectors for a partition of {sectors}")
    rng = np.random.default_rng(seed)
    randomness = bytearray(rng.bytes(32))
    randomness[31] &= 0x3F                         # a field element (Fr32), as rust requires
    randomness = bytes(randomness)
    if kind == "winning":
        ids = [int(rng.integers(0, 1 << 62))] * n
        trees = 1
    elif kind == "window":
        ids = [int(x) for x in rng.choice(1 << 62, size=n, replace=False)]
        trees = n
    else:
        raise ValueError(f"synthetic_post: kind must be 'window' or 'winning', got {kind!r}")
    ch = partition_challenges(randomness, ids, nodes, sectors, challenges, partition)  # (n, K)
    paths = Y.sparse_tree(arities, ch.reshape(trees, -1), Y.poseidon_hasher, rng)
    comm_c = Y.random_fr(rng, (trees,))
    comm_r_last = paths.root
    comm_r = Y.poseidon_hasher(np.stack([comm_c, comm_r_last], 1))
    # per real sector: its tree (winning: tree 0 for all) and its K paths
    t = np.zeros(n, np.int64) if kind == "winning" else np.arange(n)
    leaves = paths.leaves.reshape(n, challenges, Y.LIMBS)
    sibs = [s.reshape((n, challenges) + s.shape[2:]) for s in paths.siblings]
    pad = np.asarray(pad_sectors(list(range(n)), sectors))
    public_sectors = [PublicSector(ids[i], int(Y.ints(comm_r[t[i]]))) for i in range(n)]
    inputs = PoStInputs(
        Y.to_fr(comm_r[t][pad]), Y.to_fr(comm_c[t][pad]), Y.to_fr(comm_r_last[t][pad]),
        Y.to_fr(leaves[pad]),
        M.MerklePath(jnp.asarray(ch[pad].astype(np.uint32)), tuple(Y.to_fr(s[pad]) for s in sibs)))
    public = partition_public_inputs(randomness, public_sectors, nodes, sectors, challenges,
                                     partition)
    return PoStCase(inputs, public, randomness, public_sectors, ch, comm_c[t], comm_r_last[t],
                    Y.SparsePaths(ch, leaves, tuple(sibs), comm_r_last[t]))


def record_post(size: str, kind: str) -> C.R1CS:
    """The recorded partition circuit of a production sector size (32/64 GiB
    Window: 125M rows, see the module docstring)."""
    p = Z.params(size)
    s, k = p.post(kind)
    return C.record(fallback_post, p.tree_r_arities, s, k, name=f"{kind}-post-{size}")
