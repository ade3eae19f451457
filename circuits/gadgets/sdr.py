"""The SDR labeling gadget (rust-fil-proofs storage-proofs-porep
stacked/circuit/create_label.rs ``create_label_circuit``) and its native
reference (stacked/vanilla/create_label ``create_label_exp``).

A label of node v in layer l is

    label = SHA-256( replica_id (32 B) ‖ l as u32 big-endian ‖ v as u64
                     big-endian ‖ 20 zero bytes ‖ p_0 ‖ … ‖ p_36 (32 B each) )

read as a little-endian 256-bit integer with the top two bits cleared
(``bytes[31] &= 0x3f``), i.e. an integer below 2^254 < r.  The 37 parents
are the 6 DRG parents (×6, then parent 0) on layer 1, and from layer 2 on
the 6 DRG + 8 expander parents (×2, then the first 9): ``expand_parents``.

The gadget, per instance, in bellperson's order:

1. the message bits: replica id padded to 256 bits with constant zeros, the
   layer (``UInt32::into_bits_be``), the node (``UInt64::to_bits_be``),
   constant zeros to 512 bits, then each parent padded to 256 bits;
2. ``sha256`` of the 9,984 message bits (20 compressions, the last one over
   the constant padding);
3. ``reverse_bit_numbering`` of the digest (bits reversed within each byte:
   the little-endian bit order of the digest bytes) and ``pack_bits`` of the
   first 254 bits (one row).

Costs: 522,269 rows when the replica id and parents come from field
elements (``fr_bytes_bits``: 255 bits and one constant zero each) and the
node is allocated (64 free bits) [D, research/filecoin-circuits.md §2.1];
rust-fil-proofs' create_label test (all 38 × 256 input bits allocated, layer
3 and node 22 constant) asserts 532,025 rows including the 9,728 input bit
allocations [T].

Tensors: any leading batch shape S.  Bits are ``boolean.Bits`` in message
order: ``replica_id`` (*S, n ≤ 256), ``parents`` (*S, 37, m ≤ 256), the node
(*S, 64) little-endian (``UInt64``) or a Python int, the layer a Python int
(``UInt32::constant``, as in the circuit) or a (*S, 32) little-endian word.
"""
from __future__ import annotations

import hashlib

import jax.numpy as jnp
import numpy as np

from circuits.gadgets import boolean as Bo
from circuits.gadgets.boolean import Bits
from circuits.gadgets.multipack import CAPACITY, pack_bits
from circuits.gadgets.num import Num
from circuits.gadgets.sha256 import sha256
from circuits.gadgets.uint32 import constant_words, into_bits_be

TOTAL_PARENTS = 37
BASE_DEGREE = 6
EXP_DEGREE = 8
NODE_BITS = 256
MESSAGE_BITS = (2 + TOTAL_PARENTS) * NODE_BITS          # 9,984 bits = 1,248 bytes


# ---------------------------------------------------------------- bit helpers
def uint64_constant(cs, value: int, batch=()) -> Bits:
    """UInt64::constant: (*batch, 64) constant bits, least significant first."""
    if not 0 <= int(value) < 1 << 64:
        raise ValueError(f"uint64_constant: {value} is not a u64")
    bits = (int(value) >> np.arange(64)) & 1
    return Bo.constant(cs, np.broadcast_to(bits.astype(bool), tuple(batch) + (64,)))


def uint64_alloc(cs, shape=(), value=None) -> Bits:
    """UInt64::alloc (storage-proofs-core gadgets/uint64.rs): 64 allocated
    bits per element, least significant first, one boolean row each.
    ``value`` returns each integer as its two 32-bit halves, uint32
    (*shape, 2) = (low, high) (jax has no 64-bit integers by default)."""
    shape = tuple(shape)

    def bits():
        v = jnp.asarray(value())
        if v.shape != shape + (2,):
            raise ValueError(f"uint64_alloc: the value has shape {v.shape}, expected "
                             f"{shape + (2,)} (low and high 32-bit halves)")
        sh = jnp.arange(32, dtype=jnp.uint32)
        return ((v.astype(jnp.uint32)[..., :, None] >> sh) & 1).reshape(shape + (64,))

    return Bo.alloc_bits(cs, shape + (64,), None if value is None else bits)


def reverse_bit_numbering(cs, bits: Bits) -> Bits:
    """storage-proofs-core util ``reverse_bit_numbering``: pad (…, n) with
    constant zeros to a whole number of bytes, then reverse the bits within
    each byte (a little-endian bit string <-> the bytes' MSB-first bits)."""
    n = bits.shape[-1]
    pad = (-n) % 8
    if pad:
        bits = Bo.concat([bits, Bo.constant(cs, np.zeros(bits.shape[:-1] + (pad,), bool))], -1)
    m = bits.shape[-1]
    return bits.reshape(bits.shape[:-1] + (m // 8, 8)).flip(-1).reshape(bits.shape[:-1] + (m,))


def fr_bytes_bits(cs, x: Num) -> Bits:
    """A field element as the message bits of its 32-byte little-endian
    encoding: ``reverse_bit_numbering(x.to_bits_le())`` (255 allocated bits,
    256 rows; the top bit is a constant zero).  (*S,) -> (*S, 256)."""
    return reverse_bit_numbering(cs, x.to_bits_le(cs))


def _pad_to(cs, bits: Bits, n: int, what: str) -> Bits:
    if bits.shape[-1] > n:
        raise ValueError(f"create_label: {what} has {bits.shape[-1]} bits, more than {n}")
    zeros = Bo.constant(cs, np.zeros(bits.shape[:-1] + (n - bits.shape[-1],), bool))
    return Bo.concat([bits, zeros], -1)


# ---------------------------------------------------------------- the gadget
def create_label(cs, replica_id: Bits, layer_index, node_index, parents: Bits) -> Num:
    """create_label_circuit: the label Num (*S,) of node ``node_index`` in
    layer ``layer_index`` (see the module docstring for the operands)."""
    if replica_id.shape[-1] < 32:
        raise ValueError(f"create_label: the replica id has {replica_id.shape[-1]} bits, "
                         f"fewer than 32")
    if len(parents.shape) < 2 or parents.shape[-2] != TOTAL_PARENTS:
        raise ValueError(f"create_label: parents must be (*S, {TOTAL_PARENTS}, ≤256) bits, "
                         f"got {parents.shape}")
    batch = np.broadcast_shapes(replica_id.shape[:-1], parents.shape[:-2],
                                *([] if isinstance(node_index, int) else [node_index.shape[:-1]]),
                                *([] if isinstance(layer_index, int)
                                  else [layer_index.shape[:-1]]))
    if isinstance(layer_index, int):
        if not 0 <= layer_index < 1 << 32:
            raise ValueError(f"create_label: layer {layer_index} is not a u32")
        layer = constant_words(cs, np.full(batch, layer_index, np.uint64))
    else:
        layer = layer_index
    node = uint64_constant(cs, node_index, batch) if isinstance(node_index, int) else node_index
    if layer.shape[-1:] != (32,) or node.shape[-1:] != (64,):
        raise ValueError(f"create_label: layer {layer.shape} must end in 32 bits and the node "
                         f"{node.shape} in 64")
    rid = _pad_to(cs, replica_id, NODE_BITS, "the replica id")
    head = Bo.concat([rid.broadcast_to(batch + (NODE_BITS,)),
                      into_bits_be(layer).broadcast_to(batch + (32,)),
                      node.flip(-1).broadcast_to(batch + (64,))], -1)
    head = _pad_to(cs, head, 2 * NODE_BITS, "the prefix")
    par = _pad_to(cs, parents, NODE_BITS, "a parent")
    par = par.broadcast_to(batch + (TOTAL_PARENTS, NODE_BITS))
    message = Bo.concat([head, par.reshape(batch + (TOTAL_PARENTS * NODE_BITS,))], -1)
    digest = sha256(cs, message)
    return pack_bits(cs, reverse_bit_numbering(cs, digest)[..., :CAPACITY])


def expand_parents(parents: list, layer: int) -> list:
    """The 37 hashed parents of a node (params.rs): layer 1 has the 6 DRG
    parents, repeated 6 times then parent 0; later layers the 6 DRG and 8
    expander parents, twice, then the first 9.  Works on any list items."""
    want = BASE_DEGREE if layer == 1 else BASE_DEGREE + EXP_DEGREE
    if len(parents) != want:
        raise ValueError(f"expand_parents: layer {layer} needs {want} parents, got {len(parents)}")
    if layer == 1:
        return parents * 6 + parents[:1]
    return parents * 2 + parents[:9]


# ---------------------------------------------------------------- native reference
def label_native(replica_id: bytes, layer_index: int, node_index: int, parents) -> int:
    """create_label_exp with hashlib: the label as an integer < 2^254
    (replica id and each parent 32 bytes, the node's little-endian encoding
    is ``int.to_bytes(32, 'little')``)."""
    if len(replica_id) != 32 or len(parents) != TOTAL_PARENTS or \
            any(len(p) != 32 for p in parents):
        raise ValueError("label_native: a 32-byte replica id and 37 parents of 32 bytes")
    msg = (bytes(replica_id) + int(layer_index).to_bytes(4, "big")
           + int(node_index).to_bytes(8, "big") + bytes(20) + b"".join(bytes(p) for p in parents))
    d = bytearray(hashlib.sha256(msg).digest())
    d[31] &= 0b0011_1111
    return int.from_bytes(d, "little")

