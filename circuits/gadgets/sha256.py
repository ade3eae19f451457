"""SHA-256 (FIPS 180-4) as bellperson's gadget, over any batch of messages.

Bits are Booleans in message order (each byte most significant bit first, as
``multipack.bytes_to_bits``); words are ``(..., 32)`` tensors, least
significant bit first (``uint32``).  The compression function follows
bellperson's ``sha256_compression_function`` step by step, which fixes the
constraint count (25,840 for a free 512-bit block and the constant IV): the
message schedule and the rounds share one ``MultiEq`` per compression, and the
new e and a of each round stay *deferred* as operand lists (e = h, Σ1, Ch,
K_t, W_t, d; a = the same five, Σ0, Maj) until the next round materialises
them with one ``addmany``.
"""
from __future__ import annotations

import numpy as np

from circuits.gadgets import boolean
from circuits.gadgets.boolean import Bits, constant, opaque
from circuits.gadgets.uint32 import (MultiEq, addmany, constant_words, from_bits_be,
                                     into_bits_be, rotr, sha256_ch, sha256_maj, shr, xor)

ROUND_CONSTANTS = np.array([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
], dtype=np.uint64)

IV = np.array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19], dtype=np.uint64)


def iv(cs, batch=()) -> Bits:
    """The initial hash value H(0) as constant words ``(*batch, 8, 32)``."""
    return constant_words(cs, np.broadcast_to(IV, tuple(batch) + (8,)))


def _xor3(cs, x, y, z):
    return xor(cs, xor(cs, x, y), z)


def compression(cs, block: Bits, state: Bits) -> Bits:
    """One application of the compression function (FIPS 180-4 §6.2.2):
    a 512-bit block ``(*batch, 512)`` and the hash value ``(*batch, 8, 32)``
    -> the next hash value ``(*batch, 8, 32)``.  The schedule and the rounds
    are ``cs.loop``s (in witness mode the repeating steps are one scan)."""
    if block.shape[-1:] != (512,) or state.shape[-2:] != (8, 32):
        raise ValueError(f"sha256 compression: block {block.shape} must end in 512 and the "
                         f"state {state.shape} in (8, 32)")
    batch = np.broadcast_shapes(block.shape[:-1], state.shape[:-2])
    block = block.broadcast_to(batch + (512,))
    state = state.broadcast_to(batch + (8, 32))
    hv = [state[..., j, :] for j in range(8)]
    w = [from_bits_be(block[..., 32 * t:32 * t + 32]) for t in range(16)]
    with MultiEq(cs, batch) as meq:
        def schedule(cs, win, _):
            """W_t = σ1(W_t-2) + W_t-7 + σ0(W_t-15) + W_t-16 (bellperson's operand order)."""
            s0 = _xor3(cs, rotr(win[1], 7), rotr(win[1], 18), shr(cs, win[1], 3))
            s1 = _xor3(cs, rotr(win[14], 17), rotr(win[14], 19), shr(cs, win[14], 10))
            new = addmany(cs, meq, [win[0], s0, win[9], s1])
            return win[1:] + (new,), new

        _, w_new = cs.loop(schedule, tuple(w), [None] * 48)
        w += w_new

        def round_(cs, v, x):
            """One round; the new e and a stay deferred as operand lists."""
            a, b, c, d, e, f, g, h = v
            k_t, w_t = x
            if isinstance(e, list):
                e = addmany(cs, meq, e)
            s1 = _xor3(cs, rotr(e, 6), rotr(e, 11), rotr(e, 25))
            ch = sha256_ch(cs, e, f, g)
            temp1 = [h, s1, ch, k_t, w_t]
            if isinstance(a, list):
                a = addmany(cs, meq, a)
            s0 = _xor3(cs, rotr(a, 2), rotr(a, 13), rotr(a, 22))
            maj = sha256_maj(cs, a, b, c)
            return (temp1 + [s0, maj], a, b, c, temp1 + [d], e, f, g), None

        xs = [(opaque(cs, constant_words(cs, np.broadcast_to(k_t, batch))), opaque(cs, w_t))
              for k_t, w_t in zip(ROUND_CONSTANTS, w)]
        (a_ops, b, c, d, e_ops, f, g, h), _ = cs.loop(round_, tuple(hv), xs)

        out = [addmany(cs, meq, a_ops + [hv[0]])]
        out += [addmany(cs, meq, [hv[j], x]) for j, x in ((1, b), (2, c), (3, d))]
        out += [addmany(cs, meq, e_ops + [hv[4]])]
        out += [addmany(cs, meq, [hv[j], x]) for j, x in ((5, f), (6, g), (7, h))]
    return boolean.concat([o[..., None, :] for o in out], -2)


def digest_bits(state: Bits) -> Bits:
    """Hash value ``(*batch, 8, 32)`` -> the 256 digest bits, big-endian words."""
    be = into_bits_be(state)
    return be.reshape(be.shape[:-2] + (256,))


def block_no_padding(cs, block: Bits) -> Bits:
    """sha256_block_no_padding: one compression of a 512-bit block from the IV;
    the 256 digest bits ``(*batch, 256)``."""
    return digest_bits(compression(cs, block, iv(cs, block.shape[:-1])))


def padding(cs, length: int, batch=()) -> Bits:
    """The constant padding of a message of ``length`` bits (§5.1.1): a 1,
    zeros to 448 mod 512, the 64-bit big-endian length."""
    k = (-(length + 1 + 64)) % 512
    bits = np.zeros(1 + k + 64, bool)
    bits[0] = True
    bits[1 + k:] = (np.uint64(length) >> np.arange(63, -1, -1, dtype=np.uint64)) & 1
    return constant(cs, np.broadcast_to(bits, tuple(batch) + bits.shape))


def sha256(cs, bits: Bits) -> Bits:
    """SHA-256 of messages of bits ``(*batch, L)``, L a multiple of 8 (FIPS
    180-4 §5.1.1 padding with constant bits, then one compression per block,
    a ``cs.loop`` over the blocks); the digest bits ``(*batch, 256)``."""
    length = bits.shape[-1]
    if length % 8:
        raise ValueError(f"sha256: the message has {length} bits, not a whole number of bytes")
    batch = bits.shape[:-1]
    padded = boolean.concat([bits, padding(cs, length, batch)], -1)
    blocks = [padded[..., 512 * i:512 * (i + 1)] for i in range(padded.shape[-1] // 512)]
    state, _ = cs.loop(lambda cs, st, blk: (compression(cs, blk, st), None), iv(cs, batch), blocks)
    return digest_bits(state)
