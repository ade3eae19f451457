"""Binary SHA-256 Merkle inclusion (Filecoin's tree D, comm_d) and the
``pick`` / ``select`` multiplexers (rust-fil-proofs storage-proofs-core
gadgets/por.rs, gadgets/insertion.rs; filecoin-hashers sha256.rs).

**Nodes** are ``Sha256Domain`` values: 32 bytes read as a little-endian
integer below 2^254.  A parent is

    hash2(a, b) = SHA-256(a (32 B LE) ‖ b (32 B LE)) with bytes[31] &= 0x3f

(``trim_to_fr32``: the top two bits cleared, so the digest is a field
element).  In the circuit (``hash2_circuit`` / ``hash_multi_leaf_circuit``)
each child is ``to_bits_le`` (255 bits, 256 rows), padded with a constant
zero and bit-reversed within each byte (its bytes' message bits), the 512
bits are hashed (44,866 rows: two compressions, the second over constant
padding) and the first 254 bits of the digest in little-endian byte/bit
order are packed into one Num (1 row): 45,379 rows.

**A level** (``SubPath::synthesize`` for arity 2), per instance: the index
bit (1 row), the sibling (no row), ``insert`` of the current node (2 picks:
2 rows), ``hash2``: 45,382 rows; 45,381 when the caller allocated the index
bits.  ``por`` (``PoRCircuit``) adds the leaf and root allocations, the
index bits packed into one public input, root equality and, unless private,
the root as a public input: 45,382·depth + 3 (64 leaves: 272,295 [T]).

**pick** (insertion.rs): c = cond ? a : b with the row (b − a)·cond = b − c
(1 row).  **select**: the element of ``from`` (*S, 2^k) at the index given by
k little-endian bits, as a binary tree of picks (most significant bit
first): 2^k − 1 rows (SnapDeals selects its apex leaf with it).

Native companions with hashlib: ``hash2_native``, ``tree_layers_native``,
``tree_path_native`` (Python ints, one tree).  Tensors: any leading batch
shape S; witness inputs are ``merkle.MerklePath`` (index uint32 (*S,),
per level the sibling Fr (8, *S, 1)) and ``merkle.PoRInputs``.
"""
from __future__ import annotations

import hashlib

import jax.numpy as jnp
import numpy as np

from circuits.cs import ONE
from circuits.gadgets import boolean as Bo
from circuits.gadgets.merkle import MerklePath, PoRInputs, insert
from circuits.gadgets.multipack import CAPACITY, pack_bits, pack_into_inputs
from circuits.gadgets.num import Num
from circuits.gadgets.sdr import fr_bytes_bits, reverse_bit_numbering
from circuits.gadgets.sha256 import sha256

TRIM = (1 << 254) - 1


# ---------------------------------------------------------------- hash2
def hash2(cs, a: Num, b: Num) -> Num:
    """``Sha256Function::hash2_circuit``: the trimmed SHA-256 of the two
    32-byte encodings, Num (*S,) (45,379 rows)."""
    if a.shape != b.shape:
        raise ValueError(f"hash2: operand shapes {a.shape} and {b.shape} differ")
    return hash_children(cs, Num(a.shape + (2,),
                                 None if a.var is None else np.stack([a.var, b.var], -1),
                                 None if a.value is None else jnp.stack([a.value, b.value], -1)))


def hash_children(cs, children: Num) -> Num:
    """``hash_multi_leaf_circuit`` over the last axis of ``children``
    (*S, n): to_bits_le of each child (in order), the bytes' message bits
    concatenated, SHA-256, the first 254 little-endian digest bits packed.
    Returns Num (*S,)."""
    S = children.shape[:-1]
    bits = fr_bytes_bits(cs, children)                         # (*S, n, 256)
    digest = sha256(cs, bits.reshape(S + (bits.shape[-2] * 256,)))
    return pack_bits(cs, reverse_bit_numbering(cs, digest)[..., :CAPACITY])


# ---------------------------------------------------------------- pick / select
def pick(cs, cond: Bo.Bits, a: Num, b: Num) -> Num:
    """insertion.rs ``pick``: cond ? a : b elementwise (*S,), one new
    variable and the row (b − a)·cond = b − c each."""
    S = tuple(np.broadcast_shapes(cond.shape, a.shape, b.shape))
    if a.shape != S or b.shape != S:
        raise ValueError(f"pick: a {a.shape} and b {b.shape} must have the result shape {S}")
    if (cond.is_constant).any():
        raise ValueError("pick: the condition must be allocated bits (bellperson would "
                         "enforce a constant condition too; use a plain choice instead)")
    cond = cond.broadcast_to(S)

    def value():
        return jnp.where(jnp.asarray(cond.value)[None] != 0, a.value, b.value)

    c = Num.alloc(cs, S, None if cs.recording else value)
    cs.enforce(lambda: (b.lc(cs) - a.lc(cs), cond.lc(cs), b.lc(cs) - c.lc(cs)))
    return c


def select(cs, values: Num, bits: Bo.Bits) -> Num:
    """insertion.rs ``select``: values (*S, 2^k), bits (*S, k) little-endian
    -> values[..., index] (*S,); per bit from the most significant, the
    state halves with picks state[j] = bit ? state[h + j] : state[j]
    (2^k − 1 rows)."""
    k = bits.shape[-1]
    if values.shape[-1] != 1 << k or values.shape[:-1] != bits.shape[:-1]:
        raise ValueError(f"select: {values.shape} values do not fit {bits.shape} index bits")
    state = values
    for i in range(k - 1, -1, -1):
        h = state.shape[-1] // 2
        bit = bits[..., i:i + 1].broadcast_to(state.shape[:-1] + (h,))
        state = pick(cs, bit, state[..., h:], state[..., :h])
    return state[..., 0]


# ---------------------------------------------------------------- inclusion
def merkle_root(cs, leaf: Num, depth: int, path: MerklePath | None,
                index_bits: Bo.Bits | None = None):
    """Ascend a binary SHA-256 path of ``depth`` levels from ``leaf`` (*S,):
    per level the index bit (allocated here, or taken from ``index_bits``
    (*S, depth) allocated by the caller), the sibling, insert, hash2.  One
    ``cs.loop`` over the levels.  Returns (root Num (*S,), index bits
    (*S, depth))."""
    if depth < 1:
        raise ValueError("sha merkle_root: a path needs at least one level")
    S = tuple(leaf.shape)
    given = index_bits is not None
    if given and (index_bits.shape != S + (depth,) or not (index_bits.kind == Bo.IS).all()):
        raise ValueError(f"sha merkle_root: index_bits must be {S + (depth,)} allocated bits, "
                         f"got {index_bits.shape}")
    w = not cs.recording
    if w and len(path.siblings) != depth:
        raise ValueError(f"sha merkle_root: {len(path.siblings)} sibling levels for depth {depth}")
    xs = []
    for level in range(depth):
        bits = sib = None
        if given:
            bits = index_bits[..., level:level + 1]
        elif w:
            bits = (jnp.asarray(path.index).astype(jnp.uint32)[..., None] >> level) & 1
        if w:
            sib = jnp.asarray(path.siblings[level])
            if sib.shape != (8,) + S + (1,):
                raise ValueError(f"sha merkle_root: level {level} sibling has shape {sib.shape}, "
                                 f"expected {(8,) + S + (1,)}")
        xs.append((bits, sib))

    def body(cs, cur, x):
        bits = x[0] if given else Bo.alloc_bits(cs, S + (1,), None if cs.recording
                                                else (lambda: x[0]))
        sib = Num.alloc(cs, S + (1,), None if cs.recording else (lambda: x[1]))
        return hash_children(cs, insert(cs, cur, bits, sib)), bits

    root, bits = cs.loop(body, leaf, xs)
    return root, Bo.concat(bits, -1)


def por(cs, inputs: PoRInputs | None, depth: int, private: bool = False, shape=(),
        leaf: Num | None = None, root: Num | None = None) -> Num:
    """``PoRCircuit::synthesize`` for a binary SHA-256 tree of ``depth``
    levels over a batch ``shape``: the leaf allocated (or the caller's Num:
    ``Root::Var``), the path, the index bits packed into a public input, the
    root allocated (or the caller's Num) and enforced equal (computed·1 =
    root), made public unless ``private``.  StackedCircuit's comm_d opening
    passes its data leaf and comm_d with ``private=True``: 45,382·depth + 2
    rows.  Returns the root Num."""
    shape = tuple(shape)
    w = not cs.recording
    for name, x in (("leaf", leaf), ("root", root)):
        if x is not None and x.shape != shape:
            raise ValueError(f"sha por: the {name} has shape {x.shape}, expected {shape}")
    if leaf is None:
        leaf = Num.alloc(cs, shape, (lambda: jnp.asarray(inputs.leaf)) if w else None)
    computed, bits = merkle_root(cs, leaf, depth, inputs.path if w else None)
    pack_into_inputs(cs, bits)
    if root is None:
        root = Num.alloc(cs, shape, (lambda: jnp.asarray(inputs.root)) if w else None)
    cs.enforce(lambda: (computed.lc(cs), cs.lc(np.full(shape, ONE)), root.lc(cs)))
    if not private:
        root.inputize(cs)
    return root


# ---------------------------------------------------------------- native
def hash2_native(a: int, b: int) -> int:
    """``Sha256Function::hash2`` on node integers (< 2^256; tree nodes are
    < 2^254): SHA-256 of the two 32-byte little-endian encodings, trimmed."""
    d = hashlib.sha256(int(a).to_bytes(32, "little") + int(b).to_bytes(32, "little")).digest()
    return int.from_bytes(d, "little") & TRIM


def tree_layers_native(leaves) -> list:
    """The layers of the binary tree over ``leaves`` (2^depth ints), leaves
    first, root last (a list of one)."""
    layer = [int(x) for x in leaves]
    n = len(layer)
    if n < 2 or n & (n - 1):
        raise ValueError(f"tree_layers_native: {n} leaves is not a power of two ≥ 2")
    layers = [layer]
    while len(layer) > 1:
        layer = [hash2_native(layer[2 * i], layer[2 * i + 1]) for i in range(len(layer) // 2)]
        layers.append(layer)
    return layers


def tree_path_native(layers, index: int) -> list:
    """The siblings of leaf ``index``, leaves first (ints)."""
    if not 0 <= index < len(layers[0]):
        raise ValueError(f"tree_path_native: index {index} outside {len(layers[0])} leaves")
    out = []
    for layer in layers[:-1]:
        out.append(layer[index ^ 1])
        index >>= 1
    return out
