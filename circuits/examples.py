"""Small example circuits (the main job's default circuits and test circuits).

* ``cubic(cs, x, k)``: y_i = x_i³ + x_i for k secret x_i; the y_i are public
  (4 rows per value: square, product, sum, inputize).
* ``sha256_preimage(cs, msg, nbytes)``: knowledge of an ``nbytes``-byte message
  whose SHA-256 digest is public (the digest's 256 bits packed into two public
  inputs, bellperson's ``multipack``); 44,874 + 2 rows for 64 bytes.
"""
from __future__ import annotations

import hashlib

import jax.numpy as jnp
import numpy as np

from circuits.gadgets import boolean as Bo
from circuits.gadgets import multipack as MP
from circuits.gadgets import sha256 as S
from circuits.gadgets.num import Num


def cubic(cs, x, k: int):
    """x: Fr (8, k) per instance (witness mode)."""
    xs = Num.alloc(cs, (k,), lambda: x)
    y = xs.square(cs).mul(cs, xs).add(cs, xs)
    y.inputize(cs)


def cubic_public(xs: list[int], r: int) -> list[int]:
    return [(x ** 3 + x) % r for x in xs]


def sha256_preimage(cs, msg, nbytes: int):
    """msg: uint32 0/1 bits (8·nbytes,) per instance, bytes MSB first."""
    bits = Bo.alloc_bits(cs, (8 * nbytes,), lambda: msg)
    MP.pack_into_inputs(cs, S.sha256(cs, bits))


def message_bits(data: bytes) -> jnp.ndarray:
    """Bytes -> (8·len,) uint32 bits, each byte most significant bit first."""
    return jnp.asarray(np.unpackbits(np.frombuffer(data, np.uint8)).astype(np.uint32))


def sha256_public(data: bytes) -> list[int]:
    """The public inputs of ``sha256_preimage``: the digest's bits (message
    order) packed little-endian into 254-bit chunks."""
    bits = np.unpackbits(np.frombuffer(hashlib.sha256(data).digest(), np.uint8))
    out = []
    for lo in range(0, 256, 254):
        out.append(sum(int(b) << i for i, b in enumerate(bits[lo:lo + 254])))
    return out
