"""32-bit words as tensors of Booleans (bellperson's ``UInt32``) and
``MultiEq``.

A word tensor is a ``Bits`` of shape ``(*batch, 32)``, least significant bit
first.  Rotations and shifts are free; ``xor``, ``sha256_ch`` and
``sha256_maj`` are the Boolean gadgets bit by bit (bit 0 first);
``addmany`` allocates the bits of the full sum and defers the equality
Σ operands = Σ 2^i·result_i to a ``MultiEq``, which packs several such
equalities (weighted by 2^bits_used) into one row A·1 = C until the next one
would reach Fr's capacity of 254 bits.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from circuits.cs import ONE
from circuits.gadgets import boolean
from circuits.gadgets.boolean import Bits, alloc_bits, constant

CAPACITY = 254           # Fr::CAPACITY: bits that always fit below r
_POW2_32 = [1 << i for i in range(32)]


def constant_words(cs, values) -> Bits:
    """UInt32::constant of an integer array ``(*shape)`` -> ``(*shape, 32)``."""
    v = np.asarray(values, dtype=np.uint64)
    return constant(cs, (v[..., None] >> np.arange(32, dtype=np.uint64)) & 1)


def alloc_words(cs, shape, value=None) -> Bits:
    """UInt32::alloc over a tensor: 32 allocated bits per word (one boolean
    row each), least significant first; ``value`` returns the bits
    ``(*shape, 32)``."""
    return alloc_bits(cs, tuple(shape) + (32,), value)


def from_bits_be(bits: Bits) -> Bits:
    """UInt32::from_bits_be: ``(..., 32)`` most significant bit first."""
    return bits.flip(-1)


def into_bits_be(word: Bits) -> Bits:
    return word.flip(-1)


def rotr(word: Bits, by: int) -> Bits:
    """Rotate right: bit i of the result is bit (i + by) mod 32."""
    return word.roll(-(by % 32), -1)


def shr(cs, word: Bits, by: int) -> Bits:
    """Shift right, filled with constant zeros."""
    by %= 32
    zeros = constant(cs, np.zeros(word.shape[:-1] + (by,), bool))
    return boolean.concat([word[..., by:], zeros], -1)


def xor(cs, a: Bits, b: Bits) -> Bits:
    return boolean.xor(cs, a, b)


def sha256_ch(cs, a: Bits, b: Bits, c: Bits) -> Bits:
    return boolean.sha256_ch(cs, a, b, c)


def sha256_maj(cs, a: Bits, b: Bits, c: Bits) -> Bits:
    return boolean.sha256_maj(cs, a, b, c)


def word_value(word: Bits):
    """Witness mode: the uint32 value of words ``(*shape, 32)`` -> ``(*shape)``
    (None in record mode)."""
    if word.value is None:
        return None
    return jnp.sum(word.value << jnp.arange(32, dtype=jnp.uint32), axis=-1, dtype=jnp.uint32)


class MultiEq:
    """bellperson's MultiEq for a batch of independent instances of shape
    ``shape`` (one accumulator each, all in the same state): equalities of
    ``num_bits``-bit quantities are summed with weights 2^bits_used into one
    row lhs·1 = rhs, flushed when bits_used + num_bits would reach 254 and at
    the end (use as a context manager, like bellperson's Drop)."""

    def __init__(self, cs, shape=()):
        self.cs, self.shape = cs, tuple(shape)
        self.bits_used = 0
        self.lhs = self.rhs = None

    def enforce_equal(self, num_bits: int, lhs, rhs):
        """Add lhs() = rhs() (LC thunks of ``shape``; record mode only)."""
        if not self.cs.recording:
            return
        if num_bits >= CAPACITY:
            raise ValueError(f"MultiEq: a {num_bits}-bit equality does not fit in one row")
        if CAPACITY <= self.bits_used + num_bits:
            self.flush()
        w = 1 << self.bits_used
        l, r = lhs().scale(w), rhs().scale(w)
        if l.shape != self.shape or r.shape != self.shape:
            raise ValueError(f"MultiEq: equality of shape {l.shape}, the accumulator has "
                             f"shape {self.shape}")
        self.lhs = (l if self.lhs is None else self.lhs + l).compact()
        self.rhs = (r if self.rhs is None else self.rhs + r).compact()
        self.bits_used += num_bits

    def flush(self):
        if self.bits_used == 0:
            return
        lhs, rhs = self.lhs, self.rhs
        self.cs.enforce(lambda: (lhs, self.cs.lc(np.full(self.shape, ONE)), rhs))
        self.lhs = self.rhs = None
        self.bits_used = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self.flush()
        return False


def _sum_bits(words, nbits: int):
    """Witness mode: the bits (…, nbits) of the sum of words (…, 32).  The
    column sums (at most 10 per bit position) are weighted and summed per
    16-bit half, so every partial sum fits in uint32."""
    col = sum(w.value for w in words)                                  # (…, 32)
    col = col.reshape(col.shape[:-1] + (2, 16)) << jnp.arange(16, dtype=jnp.uint32)
    halves = jnp.sum(col, -1, dtype=jnp.uint32)                        # (…, 2)
    lo, hi = halves[..., 0], halves[..., 1]
    hi = hi + (lo >> 16)
    low_bits = (lo[..., None] >> jnp.arange(16, dtype=jnp.uint32)) & 1
    high_bits = (hi[..., None] >> jnp.arange(nbits - 16, dtype=jnp.uint32)) & 1
    return jnp.concatenate([low_bits, high_bits], -1).astype(jnp.uint32)


def addmany(cs, meq: MultiEq, operands) -> Bits:
    """UInt32::addmany: the sum mod 2^32 of 2..10 words ``(*meq.shape, 32)``.

    All bits constant: a constant word, no constraint.  Otherwise the
    bitlen(n·(2^32-1)) bits of the full sum are allocated (one boolean row
    each) and Σ operands = Σ 2^i·bit_i goes to ``meq``; the low 32 bits are
    the result."""
    n = len(operands)
    if not 2 <= n <= 10:
        raise ValueError(f"addmany takes 2..10 operands, got {n}")
    shape = np.broadcast_shapes(*[o.shape for o in operands])
    if shape[-1:] != (32,):
        raise ValueError(f"addmany: operands must be words (..., 32), got shape {shape}")
    ops = [o.broadcast_to(shape) for o in operands]
    all_const = np.logical_and.reduce([o.is_constant.all(-1) for o in ops])
    if all_const.all():
        if any((o.kind == boolean.CONSTX).any() for o in ops):    # witness mode, run-time constants
            return Bits(np.full(shape, boolean.CONSTX, np.int8), None, _sum_bits(ops, 33)[..., :32])
        total = sum(np.sum(o.constant_value().astype(np.uint64) << np.arange(32, dtype=np.uint64),
                           -1) for o in ops)
        return constant_words(cs, total & np.uint64(0xFFFFFFFF))
    if all_const.any():
        raise NotImplementedError("addmany: some instances of the batch are all-constant and "
                                  "others are not; the constant folding must be uniform")
    nbits = (n * 0xFFFFFFFF).bit_length()
    r = alloc_bits(cs, shape[:-1] + (nbits,), lambda: _sum_bits(ops, nbits))
    meq.enforce_equal(
        nbits,
        lambda: sum((o.lc(cs, _POW2_32).sum(-1) for o in ops[1:]), ops[0].lc(cs, _POW2_32).sum(-1)),
        lambda: cs.lc(r.var, [1 << i for i in range(nbits)]).sum(-1))
    return r[..., :32]
