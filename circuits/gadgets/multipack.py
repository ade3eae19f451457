"""Packing bits into field elements (bellperson's ``multipack``).

Bits are packed little-endian in chunks of Fr's capacity (254 bits, so a
chunk is always below r): chunk j of n bits is Σ_i 2^i·bit_{254j+i}.
``pack_into_inputs`` makes each chunk a public input with the row
(Σ 2^i·bit_i)·1 = input; ``compute_multipacking`` computes the same inputs on
the host (what a verifier is given).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from circuits.cs import ONE
from circuits.gadgets.boolean import Bits, concat, constant
from circuits.gadgets.num import Num
from ops.field import Fr

CAPACITY = 254
_POW2 = [1 << i for i in range(CAPACITY)]


def _xp(a):
    return np if isinstance(a, (np.ndarray, bytes, bytearray, list)) else jnp


def bytes_to_bits(data):
    """Bytes -> bits, each byte most significant bit first: a ``bytes`` or a
    uint8 array ``(..., n)`` -> 0/1 ``(..., 8n)`` (numpy for host input, jax
    for jax input)."""
    xp = _xp(data)
    a = xp.asarray(np.frombuffer(bytes(data), np.uint8) if isinstance(data, (bytes, bytearray))
                   else data)
    bits = (a[..., None].astype(xp.uint32) >> xp.arange(7, -1, -1, dtype=xp.uint32)) & 1
    return bits.reshape(bits.shape[:-2] + (-1,))


def bytes_to_bits_le(data):
    """Bytes -> bits, each byte least significant bit first."""
    xp = _xp(data)
    a = xp.asarray(np.frombuffer(bytes(data), np.uint8) if isinstance(data, (bytes, bytearray))
                   else data)
    bits = (a[..., None].astype(xp.uint32) >> xp.arange(8, dtype=xp.uint32)) & 1
    return bits.reshape(bits.shape[:-2] + (-1,))


def compute_multipacking(bits):
    """Host: the public inputs of ``pack_into_inputs``: bits ``(..., n)`` ->
    Python ints, a list for one sequence, else an object array
    ``(..., ceil(n / 254))``."""
    b = np.asarray(bits).astype(bool)
    n = b.shape[-1]
    flat = b.reshape(-1, n)
    out = np.empty((flat.shape[0], -(-n // CAPACITY)), dtype=object)
    for j in range(out.shape[1]):
        chunk = flat[:, CAPACITY * j:CAPACITY * (j + 1)]
        weights = np.array(_POW2[:chunk.shape[1]], dtype=object)
        out[:, j] = (chunk.astype(object) * weights).sum(1) if chunk.shape[1] else 0
    out = out.reshape(b.shape[:-1] + (out.shape[1],))
    return [int(v) for v in out] if b.ndim == 1 else out


def pack_value(bits):
    """Witness mode: bits ``(..., m)`` (m <= 254, little-endian) -> Fr values
    ``(8, ...)`` of Σ 2^i·bit_i."""
    m = bits.shape[-1]
    if m > CAPACITY:
        raise ValueError(f"pack_value: {m} bits do not fit below r (at most {CAPACITY})")
    b = jnp.pad(jnp.asarray(bits, jnp.uint32), [(0, 0)] * (bits.ndim - 1) + [(0, Fr.L * 32 - m)])
    b = b.reshape(b.shape[:-1] + (Fr.L, 32))
    limbs = jnp.sum(b << jnp.arange(32, dtype=jnp.uint32), -1, dtype=jnp.uint32)   # (..., 8)
    return Fr.to_montgomery(jnp.moveaxis(limbs, -1, 0))


def _chunks(cs, bits: Bits) -> Bits:
    """Bits (..., n) -> (..., ceil(n/254), 254), padded with constant zeros
    (which add nothing to a packed LC)."""
    n = bits.shape[-1]
    k = -(-n // CAPACITY)
    pad = constant(cs, np.zeros(bits.shape[:-1] + (k * CAPACITY - n,), bool))
    full = concat([bits, pad], -1)
    return full.reshape(bits.shape[:-1] + (k, CAPACITY))


def pack_into_inputs(cs, bits: Bits) -> Num:
    """Expose bits ``(..., n)`` as public inputs, one per 254-bit chunk, each
    with the row (Σ 2^i·bit_i)·1 = input.  Returns the inputs
    ``(..., ceil(n / 254))``."""
    ch = _chunks(cs, bits)
    inp = Num.alloc_input(cs, ch.shape[:-1], lambda: pack_value(ch.value))
    cs.enforce(lambda: (ch.lc(cs, _POW2).sum(-1), cs.lc(np.full(ch.shape[:-1], ONE)),
                        inp.lc(cs)))
    return inp


def pack_bits(cs, bits: Bits) -> Num:
    """Pack the first 254 bits of ``(..., n)`` into one aux variable each:
    row (Σ 2^i·bit_i)·1 = num."""
    b = bits[..., :CAPACITY]
    num = Num.alloc(cs, b.shape[:-1], lambda: pack_value(b.value))
    cs.enforce(lambda: (b.lc(cs, _POW2[:b.shape[-1]]).sum(-1),
                        cs.lc(np.full(b.shape[:-1], ONE)), num.lc(cs)))
    return num
