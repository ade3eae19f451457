"""PoRep C2: one partition of rust-fil-proofs' ``StackedCircuit``
(storage-proofs-porep stacked/circuit/{proof,params,column,hash,create_label}.rs),
written as tensor gadgets over all challenges of the partition at once.

**Configuration** (``PoRepConfig``): N nodes, trees R and C of shape
base-sub-top (Poseidon), tree D a binary SHA-256 tree of depth k = log2 N,
L layers, C challenges per partition (research/filecoin-circuits.md §1;
``CONFIGS`` holds the production sizes and the mini circuits of
storage-proofs-porep tests/stacked_circuit.rs, "mini-8-0-0" etc., taken
from ``circuits.filecoin.sizes``).

**Structure** (research note §2.2), in this order:

* top level (571 rows): replica_id allocated and inputized, its bits
  (``to_bits_le``, 256 rows); comm_d and comm_r allocated and inputized;
  comm_r_last and comm_c allocated; comm_r = Poseidon2(comm_c, comm_r_last)
  (311 rows + the equality row comm_r·1 = H);
* then the 18·C public path inputs are allocated (see "Order" below);
* per challenge (all C at once, each step one batched gadget):
  1. the data leaf, its SHA-256 inclusion in tree D against comm_d (private
     root): 45,382·k + 2;
  2. the 14 parent columns (6 DRG, then 8 expander), L values each: the
     column hash (Poseidon of arity L) and its inclusion in tree C;
  3. the challenge as a UInt64 (64 bits) packed into a public input;
  4. for every layer l = 1..L: the parents' bits (6 DRG parents at layer l
     and, for l ≥ 2, the 8 expander parents at layer l − 1; 256 rows each),
     expanded to 37 parents, and the SDR label (``sdr.create_label``);
  5. encoding: replica = label_L + data leaf (1 row), its inclusion in tree
     R against comm_r_last;
  6. the column hash of the L labels and its inclusion in tree C.

Per challenge: 45,382k + 15h_c + 16P + 522,269L + 256(14L − 8) + 68 rows
(h_c the column hash, P = Σ levels + 2 a Poseidon PoR); a partition is
571 + C·that (``constraint_count``).

**Public inputs** (exactly rust-fil-proofs' ``generate_public_inputs``):
replica_id, comm_d, comm_r, then per challenge: the comm_d path index, the 6
DRG and 8 expander parent indices, the challenge, the comm_r_last path index,
the comm_c path index: 3 + 18·C (``public_inputs`` computes them on the host).

**Order.**  Public inputs are numbered exactly as bellperson numbers them:
the 18·C path inputs are allocated as one block (challenge-major) before the
first challenge, and each is tied to its bits by the packing row at the
place where bellperson emits it (inputs and aux are separate index spaces,
so this changes no aux index).  Rows and aux variables follow the step
order above, but each step runs over all challenges at once (and the
labeling over all layers at once: the labels depend only on allocated
column values, never on each other), so within a step the order is
challenge-major instead of bellperson's challenge-by-challenge loop: the same
rows and variables up to a permutation (``circuits.cs``).

**Witness inputs** (``StackedInputs``, one partition; Fr arrays limb-major
(8, ...)): replica_id, comm_d, comm_r, comm_r_last, comm_c (8,);
data_leaf (8, C); challenge uint32 (C, 2) (low, high 32 bits);
comm_d_path ``MerklePath`` (index (C,), k levels of siblings (8, C, 1));
parent_columns (8, C, 14, L); parent_paths (index (C, 14), siblings
(8, C, 14, a − 1) per level); comm_r_last_path and comm_c_path (index (C,),
siblings (8, C, a − 1)).  ``stacked_in_axes`` gives vmap's axes for a batch
of partitions.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from circuits.cs import ONE
from circuits.filecoin import sizes as SZ
from circuits.gadgets import merkle as M
from circuits.gadgets import poseidon as P
from circuits.gadgets import sdr
from circuits.gadgets import sha_merkle as SM
from circuits.gadgets.boolean import Bits
from circuits.gadgets.merkle import MerklePath
from circuits.gadgets.num import Num
from circuits.gadgets.uint32 import constant_words
from ops.field import Fr

N_PARENTS = sdr.BASE_DEGREE + sdr.EXP_DEGREE          # 14 columns per challenge
INPUTS_PER_CHALLENGE = 1 + N_PARENTS + 3              # 18
TOP_ROWS = 571
_POW2 = [1 << i for i in range(254)]


# ---------------------------------------------------------------- configuration
class PoRepConfig(NamedTuple):
    """One PoRep partition's shape: ``nodes`` (a power of two), tree R/C
    arities ``base-sub-top`` (0: no sub / top level), ``layers`` L and
    ``challenges`` C per partition."""
    name: str
    nodes: int
    base: int
    sub: int
    top: int
    layers: int
    challenges: int

    @property
    def arities(self) -> tuple:
        """Tree R / C level arities, leaves first."""
        return M.tree_arities(self.base, self.sub, self.top, self.nodes)

    @property
    def depth_d(self) -> int:
        """Tree D depth k."""
        return self.nodes.bit_length() - 1

    def with_challenges(self, c: int) -> "PoRepConfig":
        return self._replace(name=f"{self.name}-c{c}", challenges=c)


def _configs() -> dict:
    """The production sizes and the mini circuits (``circuits.filecoin.sizes``)."""
    out = {n: PoRepConfig(n, z.nodes, z.base, z.sub, z.top, z.porep_layers, z.porep_challenges)
           for n, z in SZ.SIZES.items()}
    for key, m in SZ.MINI_POREP.items():
        out[f"mini-{key}"] = PoRepConfig(f"mini-{key}", m.nodes, m.base, m.sub, m.top, m.layers,
                                         m.challenges)
    return out


CONFIGS = _configs()


def check_config(cfg: PoRepConfig):
    """Raise ValueError naming what is wrong with a configuration."""
    if cfg.nodes < 2 or cfg.nodes & (cfg.nodes - 1):
        raise ValueError(f"PoRep {cfg.name}: {cfg.nodes} nodes is not a power of two ≥ 2")
    if cfg.layers not in (2, 11):
        raise ValueError(f"PoRep {cfg.name}: {cfg.layers} layers; column hashes exist for "
                         f"2 and 11 layers (hash_single_column)")
    if cfg.challenges < 1:
        raise ValueError(f"PoRep {cfg.name}: needs at least one challenge")
    if cfg.nodes > 1 << 32:
        raise ValueError(f"PoRep {cfg.name}: node indices must fit in 32 bits")
    cfg.arities                                            # validates the tree shape


def constraint_count(cfg: PoRepConfig) -> int:
    """The research note's formula: 571 + C·(45,382k + 15h_c + 16P +
    522,269L + 256(14L − 8) + 68)."""
    _level = {2: 314, 4: 387, 8: 530}
    por = sum(_level[a] for a in cfg.arities) + 2
    h_c = P.constraint_count(cfg.layers)
    L = cfg.layers
    per = (45_382 * cfg.depth_d + 15 * h_c + 16 * por + 522_269 * L
           + 256 * (14 * L - 8) + 68)
    return TOP_ROWS + cfg.challenges * per


# ---------------------------------------------------------------- witness inputs
class StackedInputs(NamedTuple):
    """Witness inputs of one partition (shapes in the module docstring)."""
    replica_id: object
    comm_d: object
    comm_r: object
    comm_r_last: object
    comm_c: object
    data_leaf: object
    challenge: object
    comm_d_path: MerklePath
    parent_columns: object
    parent_paths: MerklePath
    comm_r_last_path: MerklePath
    comm_c_path: MerklePath


def stacked_in_axes(cfg: PoRepConfig) -> StackedInputs:
    """``in_axes`` for a batch of partitions stacked on a new leading
    instance axis (axis 1 of Fr arrays, 0 of index arrays)."""
    levels = len(cfg.arities)
    path = lambda n: MerklePath(0, (1,) * n)
    return StackedInputs(1, 1, 1, 1, 1, 1, 0, path(cfg.depth_d), 1, path(levels),
                         path(levels), path(levels))


# ---------------------------------------------------------------- helpers
def _stack(nums) -> Num:
    """Nums of one shape S -> Num (*S, n)."""
    var = None if nums[0].var is None else np.stack([n.var for n in nums], -1)
    val = None if nums[0].value is None else jnp.stack([n.value for n in nums], -1)
    return Num(tuple(nums[0].shape) + (len(nums),), var, val)


def _index_fr(lo, hi=None):
    """uint32 indices (*S) (and high halves) -> Fr (8, *S) of lo + 2^32·hi."""
    lo = jnp.asarray(lo).astype(jnp.uint32)
    hi = jnp.zeros_like(lo) if hi is None else jnp.asarray(hi).astype(jnp.uint32)
    zeros = [jnp.zeros_like(lo)] * (Fr.L - 2)
    return Fr.to_montgomery(jnp.stack([lo, hi] + zeros))


def _pack_into(cs, bits: Bits, inp: Num):
    """multipack::pack_into_inputs into an already allocated input (≤ 254
    bits): the row (Σ 2^i·bit_i)·1 = input."""
    n = bits.shape[-1]
    if n > 254 or bits.shape[:-1] != inp.shape:
        raise ValueError(f"pack: bits {bits.shape} do not fit the inputs {inp.shape}")
    cs.enforce(lambda: (bits.lc(cs, _POW2[:n]).sum(-1), cs.lc(np.full(inp.shape, ONE)),
                        inp.lc(cs)))


def _enforce_equal(cs, a: Num, b: Num):
    """constraint::equal: a·1 = b (b broadcast to a's shape)."""
    bvar = None if b.var is None else np.broadcast_to(b.var, a.shape)
    cs.enforce(lambda: (a.lc(cs), cs.lc(np.full(a.shape, ONE)), cs.lc(bvar)))


def _parent_order(layers: int):
    """The (parent, layer index) pairs whose bits the labeling allocates, in
    bellperson's order (layer by layer: the 6 DRG parents at layer l, then
    for l ≥ 2 the 8 expander parents at layer l − 1), and per layer the 37
    positions into that list of the expanded parents: (n,), (n,), (L, 37)."""
    pj, pl, table = [], [], []
    for layer in range(1, layers + 1):
        start = len(pj)
        for j in range(sdr.BASE_DEGREE):
            pj.append(j)
            pl.append(layer - 1)
        if layer > 1:
            for j in range(sdr.EXP_DEGREE):
                pj.append(sdr.BASE_DEGREE + j)
                pl.append(layer - 2)
        table.append([start + p for p in sdr.expand_parents(list(range(len(pj) - start)), layer)])
    return np.asarray(pj), np.asarray(pl), np.asarray(table)


# ---------------------------------------------------------------- the circuit
def stacked_circuit(cs, inp: StackedInputs | None, cfg: PoRepConfig):
    """``StackedCircuit::synthesize`` for one partition of ``cfg``.  Returns
    (witness mode) a dict with the public inputs Fr (8, 3 + 18·C) and the
    labels Fr (8, C, L); in record mode the same dict of variable ids."""
    check_config(cfg)
    w = not cs.recording
    val = (lambda f: f) if w else (lambda f: None)
    C, L, k, arities = cfg.challenges, cfg.layers, cfg.depth_d, cfg.arities

    # -- top level
    replica_id = Num.alloc(cs, (), val(lambda: inp.replica_id))
    rid_in = replica_id.inputize(cs)
    rid_bits = sdr.fr_bytes_bits(cs, replica_id)                        # (256,)
    comm_d = Num.alloc(cs, (), val(lambda: inp.comm_d))
    comm_d_in = comm_d.inputize(cs)
    comm_r = Num.alloc(cs, (), val(lambda: inp.comm_r))
    comm_r_in = comm_r.inputize(cs)
    comm_r_last = Num.alloc(cs, (), val(lambda: inp.comm_r_last))
    comm_c = Num.alloc(cs, (), val(lambda: inp.comm_c))
    _enforce_equal(cs, comm_r, P.poseidon_hash(cs, _stack([comm_c, comm_r_last])))

    # -- the per-challenge public inputs, in generate_public_inputs' order
    def pub_values():
        ch = jnp.asarray(inp.challenge)
        cols = [_index_fr(inp.comm_d_path.index)[..., None],
                _index_fr(inp.parent_paths.index),
                _index_fr(ch[..., 0], ch[..., 1])[..., None],
                _index_fr(inp.comm_r_last_path.index)[..., None],
                _index_fr(inp.comm_c_path.index)[..., None]]
        return jnp.concatenate(cols, -1)
    pub = Num.alloc_input(cs, (C, INPUTS_PER_CHALLENGE), val(pub_values))

    # 1. the data leaf in tree D
    data_leaf = Num.alloc(cs, (C,), val(lambda: inp.data_leaf))
    root_d, bits_d = SM.merkle_root(cs, data_leaf, k, inp.comm_d_path if w else None)
    _pack_into(cs, bits_d, pub[:, 0])
    _enforce_equal(cs, root_d, comm_d)

    # 2. the 14 parent columns: values, column hashes, inclusion in tree C
    columns = Num.alloc(cs, (C, N_PARENTS, L), val(lambda: inp.parent_columns))
    col_hash = P.poseidon_hash(cs, columns)                             # (C, 14)
    root_p, bits_p = M.merkle_root(cs, col_hash, arities, inp.parent_paths if w else None)
    _pack_into(cs, bits_p, pub[:, 1:1 + N_PARENTS])
    _enforce_equal(cs, root_p, comm_c)

    # 3. the challenge
    node = sdr.uint64_alloc(cs, (C,), val(lambda: inp.challenge))       # (C, 64)
    _pack_into(cs, node, pub[:, 1 + N_PARENTS])

    # 4. labeling, every layer at once
    pj, pl, table = _parent_order(L)
    parent_bits = sdr.fr_bytes_bits(cs, columns[:, pj, pl])            # (C, n, 256)
    expanded = parent_bits[:, table]                                    # (C, L, 37, 256)
    layer_words = constant_words(cs, np.broadcast_to(np.arange(1, L + 1), (C, L)))
    node_bits = node.reshape((C, 1, 64))
    labels = sdr.create_label(cs, rid_bits, layer_words, node_bits, expanded)   # (C, L)

    # 5. encoding and tree R
    replica = labels[:, L - 1].add(cs, data_leaf)
    root_r, bits_r = M.merkle_root(cs, replica, arities, inp.comm_r_last_path if w else None)
    _pack_into(cs, bits_r, pub[:, 2 + N_PARENTS])
    _enforce_equal(cs, root_r, comm_r_last)

    # 6. the challenge's own column in tree C
    own = P.poseidon_hash(cs, labels)
    root_c, bits_c = M.merkle_root(cs, own, arities, inp.comm_c_path if w else None)
    _pack_into(cs, bits_c, pub[:, 3 + N_PARENTS])
    _enforce_equal(cs, root_c, comm_c)

    if w:
        top = jnp.stack([rid_in.value, comm_d_in.value, comm_r_in.value], -1)
        return {"public": jnp.concatenate([top, pub.value.reshape(Fr.L, -1)], -1),
                "labels": labels.value}
    top = np.stack([rid_in.var, comm_d_in.var, comm_r_in.var], -1)
    return {"public": np.concatenate([top, pub.var.reshape(-1)]), "labels": labels.var}


# ---------------------------------------------------------------- host side
def public_inputs(cfg: PoRepConfig, replica_id: int, comm_d: int, comm_r: int,
                  challenges, drg_parents, exp_parents) -> list:
    """The partition's public inputs as canonical integers (rust-fil-proofs
    ``StackedCompound::generate_public_inputs``; a private-root PoR's only
    input is its leaf index): challenges (C,), drg_parents (C, 6),
    exp_parents (C, 8) node indices."""
    ch = [int(c) for c in challenges]
    drg = np.asarray(drg_parents, dtype=object).reshape(len(ch), sdr.BASE_DEGREE)
    exp = np.asarray(exp_parents, dtype=object).reshape(len(ch), sdr.EXP_DEGREE)
    if len(ch) != cfg.challenges:
        raise ValueError(f"public_inputs: {len(ch)} challenges, {cfg.name} has {cfg.challenges}")
    out = [int(replica_id), int(comm_d), int(comm_r)]
    for i, c in enumerate(ch):
        if not 0 <= c < cfg.nodes:
            raise ValueError(f"public_inputs: challenge {c} outside {cfg.nodes} nodes")
        out += [c] + [int(p) for p in drg[i]] + [int(p) for p in exp[i]] + [c, c, c]
    return out


def num_public_inputs(cfg: PoRepConfig) -> int:
    """3 + 18·C (without ONE)."""
    return 3 + INPUTS_PER_CHALLENGE * cfg.challenges


__all__ = ["PoRepConfig", "CONFIGS", "StackedInputs", "stacked_in_axes", "stacked_circuit",
           "constraint_count", "public_inputs", "num_public_inputs", "N_PARENTS",
           "INPUTS_PER_CHALLENGE"]
