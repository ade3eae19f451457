"""Point encodings of BLS12-381 as used by zcash, bellperson and blst.

Big-endian field elements; Fq2 elements as c1 ‖ c0.  The top three bits of the
first byte are flags:

* bit 7 (0x80) — compressed (x only; 48 bytes for G1, 96 for G2), else
  uncompressed (x ‖ y; 96 / 192 bytes);
* bit 6 (0x40) — the point at infinity (all other bits zero);
* bit 5 (0x20) — compressed only: y is the lexicographically larger root
  (for Fq: y > (p−1)/2; for Fq2: compare c1 first, c0 if c1 = 0).

Decoding rejects, with a ValueError naming the element and the reason: a wrong
length, inconsistent flags, a non-canonical coordinate (≥ p), a point not on
the curve (no square root, for compressed input) and — unless
``subgroup_check=False`` — a point outside the prime-order subgroup.
"""
from __future__ import annotations

from typing import Sequence

import jax.numpy as jnp
import numpy as np

from ops.curve import Curve
from ops.field import P_FQ

P = P_FQ
HALF = (P - 1) // 2
FLEN = 48


def _is_g2(C: Curve) -> bool:
    return C.fp != (12,)


def sizes(C: Curve) -> tuple[int, int]:
    """(compressed, uncompressed) byte lengths."""
    return (96, 192) if _is_g2(C) else (48, 96)


def _larger(y, g2: bool) -> bool:
    if g2:
        return y[1] > HALF if y[1] != 0 else y[0] > HALF
    return y > HALF


def _fe_bytes(v, g2: bool) -> bytes:
    if g2:
        return v[1].to_bytes(FLEN, "big") + v[0].to_bytes(FLEN, "big")
    return v.to_bytes(FLEN, "big")


def encode_ints(C: Curve, pts: Sequence, compressed: bool = True) -> list[bytes]:
    """Host affine points (None = infinity) -> encodings."""
    g2 = _is_g2(C)
    n = sizes(C)[0 if compressed else 1]
    out = []
    for pt in pts:
        if pt is None:
            b = bytearray(n)
            b[0] = 0xC0 if compressed else 0x40
            out.append(bytes(b))
            continue
        x, y = pt
        if compressed:
            b = bytearray(_fe_bytes(x, g2))
            b[0] |= 0x80 | (0x20 if _larger(y, g2) else 0)
        else:
            b = bytearray(_fe_bytes(x, g2) + _fe_bytes(y, g2))
        out.append(bytes(b))
    return out


def encode(C: Curve, points, compressed: bool = True, projective: bool = True) -> list[bytes]:
    """Device points (projective by default, else affine), any batch -> a flat
    list of encodings in batch order."""
    pts = C.to_affine_ints(points, projective=projective)
    if not isinstance(pts, list):
        pts = [pts]
    return encode_ints(C, pts, compressed)


def _parse(C: Curve, data) -> list[bytes]:
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data)
        csize, usize = sizes(C)
        if len(data) == 0:
            raise ValueError(f"{C.name}: empty input")
        flag_compressed = bool(data[0] & 0x80)
        size = csize if flag_compressed else usize
        if len(data) % size:
            raise ValueError(f"{C.name}: {len(data)} bytes is not a multiple of the "
                             f"{'compressed' if flag_compressed else 'uncompressed'} size {size}")
        return [data[i:i + size] for i in range(0, len(data), size)]
    return [bytes(d) for d in data]


def decode_ints(C: Curve, data) -> list:
    """Encodings -> host affine points (None = infinity), with every check
    except subgroup membership.  ``data``: one ``bytes`` (one or several
    concatenated encodings of one kind) or a sequence of ``bytes``."""
    g2 = _is_g2(C)
    csize, usize = sizes(C)
    enc = _parse(C, data)
    out, need_root = [None] * len(enc), []
    for i, b in enumerate(enc):
        if len(b) not in (csize, usize):
            raise ValueError(f"{C.name}: encoding {i} has {len(b)} bytes; expected {csize} "
                             f"(compressed) or {usize} (uncompressed)")
        comp, inf, big = bool(b[0] & 0x80), bool(b[0] & 0x40), bool(b[0] & 0x20)
        if comp != (len(b) == csize):
            raise ValueError(f"{C.name}: encoding {i}: compression flag {int(comp)} does not match "
                             f"its length {len(b)}")
        if not comp and big:
            raise ValueError(f"{C.name}: encoding {i}: sort flag set on an uncompressed point")
        body = bytes([b[0] & 0x1F]) + b[1:]
        if inf:
            if big or any(body):
                raise ValueError(f"{C.name}: encoding {i}: infinity flag with non-zero bits")
            continue
        words = [int.from_bytes(body[j:j + FLEN], "big") for j in range(0, len(body), FLEN)]
        if any(w >= P for w in words):
            raise ValueError(f"{C.name}: encoding {i}: coordinate not canonical (>= p)")
        if g2:
            x = (words[1], words[0])
            y = (words[3], words[2]) if not comp else None
        else:
            x, y = words[0], (words[1] if not comp else None)
        if comp:
            need_root.append((i, x, big))
        else:
            if not C._on_curve_int(x, y):
                raise ValueError(f"{C.name}: encoding {i}: point is not on the curve")
            out[i] = (x, y)
    if need_root:
        F = C._field
        xs = [x for _, x, _ in need_root]
        xa = jnp.asarray(F.from_int(np.array(xs, dtype=object).reshape((len(xs),) + ((2,) if g2 else ()))))
        rhs = F.add(F.mul(F.square(xa), xa), F.constant(C.b, (len(xs),)))
        root, ok = F.sqrt(rhs)
        roots = F.to_int(root)
        for (i, x, big), r, good in zip(need_root, roots, np.asarray(ok)):
            if not good:
                raise ValueError(f"{C.name}: encoding {i}: x has no point on the curve")
            y = (int(r[0]), int(r[1])) if g2 else int(r)
            if _larger(y, g2) != big:
                y = ((-y[0]) % P, (-y[1]) % P) if g2 else (-y) % P
            out[i] = (x, y)
    return out


def decode(C: Curve, data, subgroup_check: bool = True):
    """Encodings -> affine device array ``(2, *fp, k)`` (identity = (0, 0)),
    checked on the curve and, by default, in the prime-order subgroup."""
    pts = decode_ints(C, data)
    A = jnp.asarray(C.from_affine_ints(pts))
    if subgroup_check:
        ok = np.asarray(C.in_subgroup(C.from_affine(A)))
        if not ok.all():
            raise ValueError(f"{C.name}: encoding {int(np.argmin(ok))} is not in the prime-order subgroup")
    return A
