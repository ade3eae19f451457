"""Synthetic PoRep vanilla proofs: consistent inputs of ``porep.stacked_circuit``
for any sector size without sealing a sector.

For the partitions of one sector (``generate_sector(cfg, seed, partitions)``;
``generate(cfg, seed)`` is partition 0), deterministic from the seed:

* a random replica id, PoRep seed and ticket; each partition's C challenges
  derived from them as rust-fil-proofs derives interactive challenges
  (``derive_challenges``); per challenged node 6 DRG and 8 expander parents
  drawn at random from the unchallenged nodes (the circuit sees the parents
  only through the public inputs, so the DRG / expander graph itself is not
  needed);
* a column of L random labels (< 2^254) for every parent node, and for every
  challenged node its REAL SDR labels: layer l is ``sdr.label_native`` over
  the 37 expanded parents (the DRG parents' labels at layer l, the expander
  parents' at layer l − 1);
* a random data leaf per challenged node; the replica leaf
  label_L + data (mod r);
* sparse trees: D (binary SHA-256, ``sha_merkle.hash2_native``) over the
  data leaves, R (Poseidon, base-sub-top) over the replica leaves and C over
  the column hashes (Poseidon of arity L) of every parent and challenged
  node; every other node of a level a path passes through is random, so a
  path costs O(depth) hashes and a 2^30-node sector is never materialised;
* comm_d, comm_r_last, comm_c the roots, comm_r = Poseidon2(comm_c,
  comm_r_last); all partitions of a sector share the trees.

``VanillaPartition`` holds everything as Python integers (the C1 JSON of
``circuits.filecoin.c1`` maps onto it); ``to_inputs`` turns it into the
circuit's ``StackedInputs`` and ``stack_inputs`` stacks partitions for a
batched witness.  ``poseidon_native`` is the plain Python-integer Poseidon
(neptune's MerkleTree tag by default) used for the host-side trees.
"""
from __future__ import annotations

import hashlib
import random
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from circuits.filecoin import porep as PR
from circuits.gadgets import sdr
from circuits.gadgets.merkle import MerklePath
from circuits.gadgets.sha_merkle import hash2_native
from ops import poseidon as native
from ops.field import R_FR, Fr

LABEL_BOUND = 1 << 254


# ---------------------------------------------------------------- host hashes
def poseidon_native(preimage, tag: int | None = None) -> int:
    """Plain Poseidon of a list of ints (each round: add the t constants,
    x^5 on all elements in full rounds / element 0 in partial rounds, the
    MDS matrix); the hash is state[1].  Tag default: 2^arity − 1."""
    c = native.constants(len(preimage))
    t, rc, mds = c.width, c.round_constants, c.mds
    half = c.full_rounds // 2
    state = [native.merkle_tag(len(preimage)) if tag is None else tag] + [int(x) for x in preimage]
    for r in range(c.full_rounds + c.partial_rounds):
        state = [(x + rc[r * t + i]) % R_FR for i, x in enumerate(state)]
        if r < half or r >= half + c.partial_rounds:
            state = [pow(x, 5, R_FR) for x in state]
        else:
            state[0] = pow(state[0], 5, R_FR)
        state = [sum(m * x for m, x in zip(mds[i], state)) % R_FR for i in range(t)]
    return state[1]


def sparse_tree(leaves: dict, arities, hash_fn, rng: random.Random):
    """Root and paths of a tree whose only known leaves are ``leaves``
    ({index: value}); every other child of a group on a path is drawn from
    ``rng`` (< 2^254, in index order).  Returns (root, {index: [siblings of
    each level, leaves first, in child order without the path's child]})."""
    full_levels, cur = [], dict(leaves)
    for a in arities:
        groups = sorted({i // a for i in cur})
        full = dict(cur)
        for g in groups:
            for j in range(a):
                if g * a + j not in full:
                    full[g * a + j] = rng.randrange(LABEL_BOUND)
        full_levels.append(full)
        cur = {g: hash_fn([full[g * a + j] for j in range(a)]) for g in groups}
    if list(cur) != [0]:
        raise ValueError(f"sparse_tree: leaf indices {sorted(leaves)[:4]}... outside the tree")
    paths = {}
    for leaf in leaves:
        idx, sibs = leaf, []
        for full, a in zip(full_levels, arities):
            g, pos = divmod(idx, a)
            sibs.append([full[g * a + j] for j in range(a) if j != pos])
            idx = g
        paths[leaf] = sibs
    return cur[0], paths


# ---------------------------------------------------------------- the partition
class VanillaPartition(NamedTuple):
    """One partition's vanilla proofs as Python ints (C challenges, L layers,
    paths as per-level sibling lists, leaves first)."""
    cfg: PR.PoRepConfig
    k: int                      # the partition index
    replica_id: int
    seed: bytes                 # the PoRep challenge seed (32 bytes)
    ticket: bytes               # the sealing ticket (32 bytes; not in the circuit)
    comm_d: int
    comm_r: int
    comm_r_last: int
    comm_c: int
    challenges: list            # (C,)
    drg_parents: list           # (C, 6)
    exp_parents: list           # (C, 8)
    data_leaves: list           # (C,)
    comm_d_paths: list          # (C, k, 1)
    parent_columns: list        # (C, 14, L)
    parent_paths: list          # (C, 14, levels, a − 1)
    labels: list                # (C, L): the challenged node's column
    comm_r_last_paths: list     # (C, levels, a − 1)
    comm_c_paths: list          # (C, levels, a − 1)

    def public_inputs(self) -> list:
        return PR.public_inputs(self.cfg, self.replica_id, self.comm_d, self.comm_r,
                                self.challenges, self.drg_parents, self.exp_parents)


def _b32(x: int) -> bytes:
    return int(x).to_bytes(32, "little")


def challenge_labels(replica_id: int, node: int, drg_columns, exp_columns, layers: int) -> list:
    """The SDR labels of ``node`` on layers 1..L over its parents' columns
    (drg_columns (6, L), exp_columns (8, L)): layer l hashes the DRG
    parents' layer-l labels and (l ≥ 2) the expander parents' layer-(l − 1)
    labels, expanded to 37."""
    out = []
    for layer in range(1, layers + 1):
        parents = [col[layer - 1] for col in drg_columns]
        if layer > 1:
            parents += [col[layer - 2] for col in exp_columns]
        expanded = sdr.expand_parents(parents, layer)
        out.append(sdr.label_native(_b32(replica_id), layer, node, [_b32(p) for p in expanded]))
    return out


def derive_challenges(cfg: PR.PoRepConfig, replica_id: int, seed: bytes, k: int) -> list:
    """Interactive PoRep challenges of partition k (storage-proofs-porep
    challenges.rs ``derive_porep``): challenge i is
    SHA-256(replica_id (32 B LE) ‖ seed ‖ j as u32 LE), j = C·k + i, read as a
    little-endian integer, mod (N − 1), plus 1 (node 0 is never challenged)."""
    C = cfg.challenges
    out = []
    for i in range(C):
        h = hashlib.sha256(_b32(replica_id) + bytes(seed) + (C * k + i).to_bytes(4, "little"))
        out.append(int.from_bytes(h.digest(), "little") % (cfg.nodes - 1) + 1)
    return out


def generate_sector(cfg: PR.PoRepConfig, seed: int, partitions: int = 1) -> list:
    """The partitions 0..partitions − 1 of one synthetic sector (one replica
    id, one set of trees; module docstring), deterministic from ``seed``.
    The challenges are the real interactive ones for the sector's replica id
    and (random) PoRep seed; a node challenged twice has one column."""
    PR.check_config(cfg)
    L, N = cfg.layers, cfg.nodes
    rng = random.Random(seed)
    replica_id = rng.randrange(LABEL_BOUND)
    porep_seed, ticket = rng.randbytes(32), rng.randbytes(32)
    chal = [derive_challenges(cfg, replica_id, porep_seed, k) for k in range(partitions)]
    nodes = sorted({c for cs in chal for c in cs})
    chosen = set(nodes)                      # never node 0: a parent always exists

    def parent():
        while True:
            p = rng.randrange(N)
            if p not in chosen:
                return p
    drg = {c: [parent() for _ in range(sdr.BASE_DEGREE)] for c in nodes}
    exp = {c: [parent() for _ in range(sdr.EXP_DEGREE)] for c in nodes}
    columns = {p: [rng.randrange(LABEL_BOUND) for _ in range(L)]
               for p in sorted({p for c in nodes for p in drg[c] + exp[c]})}
    labels = {c: challenge_labels(replica_id, c, [columns[p] for p in drg[c]],
                                  [columns[p] for p in exp[c]], L) for c in nodes}
    data = {c: rng.randrange(LABEL_BOUND) for c in nodes}

    comm_d, d_paths = sparse_tree(data, (2,) * cfg.depth_d, lambda ch: hash2_native(*ch), rng)
    replica = {c: (labels[c][-1] + data[c]) % R_FR for c in nodes}
    comm_r_last, r_paths = sparse_tree(replica, cfg.arities, poseidon_native, rng)
    col_leaves = {p: poseidon_native(col) for p, col in columns.items()}
    col_leaves.update({c: poseidon_native(labels[c]) for c in nodes})
    comm_c, c_paths = sparse_tree(col_leaves, cfg.arities, poseidon_native, rng)
    comm_r = poseidon_native([comm_c, comm_r_last])
    out = []
    for k, cs in enumerate(chal):
        parents = [drg[c] + exp[c] for c in cs]
        out.append(VanillaPartition(
            cfg, k, replica_id, porep_seed, ticket, comm_d, comm_r, comm_r_last, comm_c, cs,
            [drg[c] for c in cs], [exp[c] for c in cs], [data[c] for c in cs],
            [d_paths[c] for c in cs],
            [[columns[p] for p in ps] for ps in parents],
            [[c_paths[p] for p in ps] for ps in parents],
            [labels[c] for c in cs],
            [r_paths[c] for c in cs],
            [c_paths[c] for c in cs]))
    return out


def generate(cfg: PR.PoRepConfig, seed: int) -> VanillaPartition:
    """Partition 0 of a synthetic sector (``generate_sector``)."""
    return generate_sector(cfg, seed, 1)[0]


# ---------------------------------------------------------------- circuit inputs
def _fr(ints):
    return jnp.asarray(Fr.from_int(np.asarray(ints, dtype=object)))


def _levels(paths, n_levels: int, nested: bool = False):
    """Paths (C, levels, a − 1) (``nested``: (C, 14, levels, a − 1)) -> per
    level Fr (8, C, a − 1) ((8, C, 14, a − 1))."""
    if nested:
        return tuple(_fr([[pp[lv] for pp in row] for row in paths]) for lv in range(n_levels))
    return tuple(_fr([p[lv] for p in paths]) for lv in range(n_levels))


def to_inputs(vp: VanillaPartition) -> PR.StackedInputs:
    """The circuit's witness inputs of one partition."""
    cfg = vp.cfg
    levels = len(cfg.arities)
    u32 = lambda xs: jnp.asarray(np.asarray(xs, np.uint32))
    ch = [[c & 0xFFFFFFFF, c >> 32] for c in vp.challenges]
    parents = [d + e for d, e in zip(vp.drg_parents, vp.exp_parents)]
    return PR.StackedInputs(
        replica_id=_fr(vp.replica_id), comm_d=_fr(vp.comm_d), comm_r=_fr(vp.comm_r),
        comm_r_last=_fr(vp.comm_r_last), comm_c=_fr(vp.comm_c),
        data_leaf=_fr(vp.data_leaves), challenge=u32(ch),
        comm_d_path=MerklePath(u32(vp.challenges), _levels(vp.comm_d_paths, cfg.depth_d)),
        parent_columns=_fr(vp.parent_columns),
        parent_paths=MerklePath(u32(parents), _levels(vp.parent_paths, levels, True)),
        comm_r_last_path=MerklePath(u32(vp.challenges), _levels(vp.comm_r_last_paths, levels)),
        comm_c_path=MerklePath(u32(vp.challenges), _levels(vp.comm_c_paths, levels)))


def stack_inputs(inputs, cfg: PR.PoRepConfig) -> PR.StackedInputs:
    """Stack partitions' ``StackedInputs`` on a new instance axis (the axes
    of ``porep.stacked_in_axes(cfg)``)."""
    axes = PR.stacked_in_axes(cfg)
    return jax.tree_util.tree_map(lambda ax, *xs: jnp.stack(xs, ax), axes, *inputs)
