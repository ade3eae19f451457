"""Poseidon Merkle inclusion proofs as Filecoin proves them
(rust-fil-proofs storage-proofs-core: gadgets/por.rs ``SubPath::synthesize``,
gadgets/insertion.rs ``insert``; filecoin-hashers poseidon.rs
``hash_multi_leaf_circuit``).

A tree is described by its level arities, leaves first: a base tree of arity
b (levels = log_b(base leaves)) and optionally one sub-tree level and one
top-tree level (Filecoin's ``8-0-0``, ``8-2-0``, ``8-8-0``, ``8-8-2``, ...:
``tree_arities``).  A node at a level of arity a is the Poseidon hash of its
a children with the MerkleTree tag 2^a − 1.  The challenged leaf index,
little-endian, gives log2(a) index bits per level, lowest levels first.

Per level, per instance, in bellperson's order:

1. the index bits (``AllocatedBit::alloc``: one row each);
2. the a − 1 siblings (``AllocatedNum::alloc``: no row);
3. ``insert`` of the current node among the siblings at the position the bits
   give, as neptune's hand-optimised tables for a = 2 / 4 / 8 (picks
   c = cond ? x : y with the row (y − x)·cond = y − c; for a = 8 also
   nor(b0, b1) and and(b0, b1) first): 2 / 8 / 22 rows;
4. the Poseidon gadget over the inserted children: 311 / 377 / 505 rows.

So a level costs 314 / 387 / 530 rows for a = 2 / 4 / 8.  ``por`` is
``PoRCircuit``: the leaf and the root allocated, the path, the index bits
packed into public inputs, root equality, and the root made public unless
private (+3 rows: base 8 with 64 leaves is 1,063 rows).

Native companions: ``tree_layers`` (batched Poseidon per level) and
``tree_path`` (the siblings of a leaf index), giving ``MerklePath`` inputs.

Tensors: any leading batch shape S; the leaf and root are ``Num`` (*S,).
Witness inputs (``MerklePath``): ``index`` uint32 (*S,) and per level the
siblings Fr (8, *S, a − 1).  Each run of levels of one arity is one
``cs.loop`` (witness mode: the first level unrolled, the rest of the run one
``lax.scan`` step, so a 10-level base tree compiles two hash programs).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from circuits.cs import ONE
from circuits.gadgets import boolean as Bo
from circuits.gadgets.multipack import pack_into_inputs
from circuits.gadgets.num import Num
from circuits.gadgets.poseidon import poseidon_hash
from ops import poseidon as native

# insert tables (insertion.rs insert_2 / insert_4 / insert_8): each pick is
# (name, cond, if_true, if_false); sources: "x" the inserted node, "e<i>" the
# siblings, "b<i>" the index bits, "nor"/"and" of b0 and b1, earlier picks.
_INSERT = {
    2: [("p0", "b0", "e0", "x"), ("p1", "b0", "x", "e0")],
    4: [("p0_x0", "b0", "e0", "x"), ("p0", "b1", "e0", "p0_x0"),
        ("p1_x0", "b0", "x", "e0"), ("p1", "b1", "e1", "p1_x0"),
        ("p2_x1", "b0", "e2", "x"), ("p2", "b1", "p2_x1", "e1"),
        ("p3_x1", "b0", "x", "e2"), ("p3", "b1", "p3_x1", "e2")],
    8: [("p0_xx0", "nor", "x", "e0"), ("p0", "b2", "e0", "p0_xx0"),
        ("p1_x00", "b0", "x", "e0"), ("p1_xx0", "b1", "e1", "p1_x00"),
        ("p1", "b2", "e1", "p1_xx0"),
        ("p2_x10", "b0", "e2", "x"), ("p2_xx0", "b1", "p2_x10", "e1"),
        ("p2", "b2", "e2", "p2_xx0"),
        ("p3_xx0", "and", "x", "e2"), ("p3", "b2", "e3", "p3_xx0"),
        ("p4_xx1", "nor", "x", "e4"), ("p4", "b2", "p4_xx1", "e3"),
        ("p5_x01", "b0", "x", "e4"), ("p5_xx1", "b1", "e5", "p5_x01"),
        ("p5", "b2", "p5_xx1", "e4"),
        ("p6_x11", "b0", "e6", "x"), ("p6_xx1", "b1", "p6_x11", "e5"),
        ("p6", "b2", "p6_xx1", "e5"),
        ("p7_xx1", "and", "x", "e6"), ("p7", "b2", "p7_xx1", "e6")],
}
ARITIES = tuple(_INSERT)


def _check_arity(a: int):
    if a not in _INSERT:
        raise ValueError(f"merkle: arity {a} is not supported (Filecoin's tree arities are "
                         f"{ARITIES})")


def insert(cs, x: Num, bits: Bo.Bits, siblings: Num) -> Num:
    """insertion.rs ``insert``: the children (*S, a) with x at the position
    given by ``bits`` (*S, log2 a; allocated, little-endian) among
    ``siblings`` (*S, a − 1).  Rows: 2 / 8 / 22 for a = 2 / 4 / 8."""
    a = siblings.shape[-1] + 1
    _check_arity(a)
    k = a.bit_length() - 1
    S = tuple(x.shape)
    if bits.shape != S + (k,) or siblings.shape != S + (a - 1,):
        raise ValueError(f"insert: shapes x {S}, bits {bits.shape}, siblings {siblings.shape} "
                         f"do not fit arity {a}")
    if not (bits.kind == Bo.IS).all():
        raise ValueError("insert: the index bits must be allocated and unnegated")
    conds = {f"b{i}": bits[..., i] for i in range(k)}
    if a == 8:      # nor first, then and (Boolean::and of two Not / two Is bits)
        conds["nor"] = Bo.and_(cs, bits[..., 0].not_(), bits[..., 1].not_())
        conds["and"] = Bo.and_(cs, bits[..., 0], bits[..., 1])
    table = _INSERT[a]
    names = ["x"] + [f"e{i}" for i in range(a - 1)] + [p[0] for p in table]

    if not cs.recording:
        vals = {"x": x.value, **{f"e{i}": siblings.value[..., i] for i in range(a - 1)}}
        for name, cond, yes, no in table:
            vals[name] = jnp.where(conds[cond].value[None] != 0, vals[yes], vals[no])
        picks = jnp.stack([vals[p[0]] for p in table], -1)
        cs.alloc(S + (len(table),), lambda: picks)
        out = jnp.stack([vals[f"p{i}"] for i in range(a)], -1)
        return Num(S + (a,), None, out)

    r = cs.alloc(S + (len(table),))
    src = np.concatenate([x.var[..., None], siblings.var, r], -1)
    col = {n: i for i, n in enumerate(names)}
    yes = src[..., [col[p[2]] for p in table]]
    no = src[..., [col[p[3]] for p in table]]
    cond = np.stack([conds[p[1]].var for p in table], -1)
    cs.enforce(lambda: (cs.lc(no) - cs.lc(yes), cs.lc(cond), cs.lc(no) - cs.lc(r)))
    return Num(S + (a,), src[..., [col[f"p{i}"] for i in range(a)]], None)


class MerklePath(NamedTuple):
    """Witness inputs of an inclusion path: the leaf index (*S,) (uint32,
    little-endian bits consumed level by level) and per level the siblings
    Fr (8, *S, a − 1) in child order without the path's own child."""
    index: object
    siblings: tuple


def tree_arities(base: int, sub: int, top: int, leaves: int) -> tuple:
    """Level arities, leaves first, of Filecoin's tree ``base-sub-top`` (0 for
    no sub / top level) with ``leaves`` leaves in all (por.rs
    ``base_path_length``)."""
    for a in (base, sub, top):
        if a:
            _check_arity(a)
    if top and not sub:
        raise ValueError("tree_arities: a top level needs a sub level")
    base_leaves, rem = divmod(leaves, (sub or 1) * (top or 1))
    levels = round(math.log(base_leaves, base)) if base_leaves > 1 else 0
    if rem or base_leaves < 1 or base ** levels != base_leaves:
        raise ValueError(f"tree_arities: {leaves} leaves do not make a {base}-{sub}-{top} tree")
    return (base,) * levels + tuple(a for a in (sub, top) if a)


def _check_path(arities):
    arities = tuple(int(a) for a in arities)
    for a in arities:
        _check_arity(a)
    if not arities:
        raise ValueError("merkle: a path needs at least one level")
    return arities


def merkle_root(cs, leaf: Num, arities, path: MerklePath | None,
                index_bits: Bo.Bits | None = None):
    """Ascend an inclusion path from ``leaf`` (*S,) through levels of
    ``arities`` (leaves first).  The index bits are allocated level by level
    (``SubPath::synthesize``), or taken from ``index_bits`` (*S, Σ log2 a),
    allocated by the caller (``por_no_challenge_input``: 313 / 385 / 527 rows
    a level; ``path.index`` is then not used).  Returns (the computed root
    Num (*S,), the index bits Bits (*S, Σ log2 a), little-endian)."""
    arities = _check_path(arities)
    S = tuple(leaf.shape)
    nbits = sum(a.bit_length() - 1 for a in arities)
    given = index_bits is not None
    if given and (index_bits.shape != S + (nbits,) or not (index_bits.kind == Bo.IS).all()):
        raise ValueError(f"merkle_root: index_bits must be {S + (nbits,)} allocated bits, "
                         f"got shape {index_bits.shape}")
    if not cs.recording and len(path.siblings) != len(arities):
        raise ValueError(f"merkle_root: {len(path.siblings)} sibling levels for "
                         f"{len(arities)} arities")
    cur, all_bits, offset, level = leaf, [], 0, 0
    while level < len(arities):
        a = arities[level]
        run = 1
        while level + run < len(arities) and arities[level + run] == a:
            run += 1
        k = a.bit_length() - 1
        xs = []
        for j in range(run):
            lo = offset + j * k
            if given:
                bits = index_bits[..., lo:lo + k]
            elif not cs.recording:
                sh = jnp.arange(lo, lo + k, dtype=jnp.uint32)
                bits = (jnp.asarray(path.index).astype(jnp.uint32)[..., None] >> sh) & 1
            else:
                bits = None
            sib = None
            if not cs.recording:
                sib = jnp.asarray(path.siblings[level + j])
                if sib.shape != (8,) + S + (a - 1,):
                    raise ValueError(f"merkle_root: level {level + j} siblings have shape "
                                     f"{sib.shape}, expected {(8,) + S + (a - 1,)}")
            xs.append((bits, sib))

        def body(cs, cur, x, a=a, k=k):
            bits = x[0] if given else Bo.alloc_bits(
                cs, S + (k,), None if cs.recording else (lambda: x[0]))
            sib = Num.alloc(cs, S + (a - 1,), None if cs.recording else (lambda: x[1]))
            return poseidon_hash(cs, insert(cs, cur, bits, sib)), bits

        cur, bits = cs.loop(body, cur, xs)
        all_bits += bits
        offset += run * k
        level += run
    return cur, Bo.concat(all_bits, -1)


def tree_layers(leaves, arities) -> list:
    """Native tree building: leaves Fr (8, *S, n) with n = Π arities ->
    the layers [(8, *S, n), (8, *S, n / a_0), ..., (8, *S, 1)], each node the
    MerkleTree-tagged Poseidon hash of a consecutive group of children (one
    batched hash per level)."""
    arities = _check_path(arities)
    layer = jnp.asarray(leaves)
    if layer.shape[-1] != math.prod(arities):
        raise ValueError(f"tree_layers: {layer.shape[-1]} leaves for arities {arities}")
    layers = [layer]
    for a in arities:
        layer = native.hash(layer.reshape(layer.shape[:-1] + (layer.shape[-1] // a, a)))
        layers.append(layer)
    return layers


def tree_path(layers, arities, index) -> MerklePath:
    """The inclusion paths of leaves ``index`` in ``tree_layers``'s layers
    (the index shape broadcasts against the trees' batch shape: one tree,
    many challenges works): per level the siblings of the path's node in
    child order, Fr (8, *batch, a − 1)."""
    arities = _check_path(arities)
    index = jnp.asarray(index).astype(jnp.int32)
    sibs, idx = [], index
    for layer, a in zip(layers, arities):
        group, pos = idx // a, idx % a
        others = jnp.asarray([[j for j in range(a) if j != p] for p in range(a)], jnp.int32)
        batch = jnp.broadcast_shapes(layer.shape[1:-1], idx.shape)
        cols = jnp.broadcast_to(group[..., None] * a + others[pos], batch + (a - 1,))
        lead = (1,) * (len(batch) - (layer.ndim - 2))          # align the batch axes right
        layer = jnp.broadcast_to(layer.reshape(layer.shape[:1] + lead + layer.shape[1:]),
                                 layer.shape[:1] + batch + layer.shape[-1:])
        sibs.append(jnp.take_along_axis(layer, cols[None], axis=-1))
        idx = group
    return MerklePath(index.astype(jnp.uint32), tuple(sibs))


class PoRInputs(NamedTuple):
    """Witness inputs of ``por``: the leaf Fr (8, *S), the path, the root
    Fr (8, *S)."""
    leaf: object
    path: MerklePath
    root: object


def por_in_axes(levels: int) -> PoRInputs:
    """``in_axes`` of one instance axis in front of the batch (Fr arrays
    are limb-major: axis 1)."""
    return PoRInputs(1, MerklePath(0, (1,) * levels), 1)


def por(cs, inputs: PoRInputs | None, arities, private: bool = False, shape=()) -> Num:
    """``PoRCircuit::synthesize`` over a batch of shape ``shape``: the leaf
    allocated, its path to the root, the index bits packed into public
    inputs (one per 254 bits), the root allocated and enforced equal to the
    computed one (computed·1 = root) and, unless ``private``, made public.
    Returns the root Num."""
    shape = tuple(shape)
    w = not cs.recording
    leaf = Num.alloc(cs, shape, (lambda: jnp.asarray(inputs.leaf)) if w else None)
    computed, bits = merkle_root(cs, leaf, arities, inputs.path if w else None)
    pack_into_inputs(cs, bits)
    root = Num.alloc(cs, shape, (lambda: jnp.asarray(inputs.root)) if w else None)
    cs.enforce(lambda: (computed.lc(cs), cs.lc(np.full(shape, ONE)), root.lc(cs)))
    if not private:
        root.inputize(cs)
    return root
