"""snarkjs / circom interoperability (BLS12-381): read .r1cs, .wtns and
Groth16 .zkey files, prove with snarkjs's H convention, write snarkjs JSON.

Formats (research/snarkjs-formats.md §3): a container ``magic(4) ‖ version
u32 ‖ nSect u32`` then sections ``type u32 ‖ size u64 ‖ payload`` in any
order, all little-endian.  .r1cs and .wtns hold canonical (standard form)
integers; the .zkey holds points affine, each Fq coordinate 48 bytes LE in
Montgomery form x·2^384 mod q (exactly ``ops.field.Fq``'s limbs, since
Fq's Montgomery radix is also 2^384), infinity as all-zero bytes, G2 as
x.c0 ‖ x.c1 ‖ y.c0 ‖ y.c1, and its coefficient section stores c·2^512 mod r.

Wire order: circom numbers wires ONE, public outputs, public inputs, private
inputs, internal wires.  With num_inputs = 1 + nPubOut + nPubIn that is
already bellperson's order (ONE, public inputs, aux), and snarkjs's QAP rows
(the r1cs constraints, then one row A = 1·w_s per public signal s ≤ nPublic,
ONE included) are exactly ``circuits.cs``'s rows (constraints, then the
input rows).  So ``read_r1cs`` returns an ordinary ``R1CS`` and
``pce.extract`` compiles it unchanged.

H (snarkjs's convention, §4.1).  The zkey's H points are
H_i = L^(2n)_{2i+1}(τ)/δ·G1 (odd Lagrange basis points of the 2n domain) for
n = domainSize, so the prover feeds them the values of p = A·B − C at the odd
points ω_{2n}^{2i+1}, where A, B interpolate a = A·w, b = B·w on ω_n^c and C
interpolates a∘b (snarkjs never uses the C matrix: the extra public rows
have B = 0).  snarkjs's roots are ω_{2n} = 5^((r−1)/2n) while ``ops.ntt``
uses 7^((r−1)/2n) = ω'_{2n}; both generate the same group, ω_{2n} = ω'_{2n}^J
for an odd J (a discrete log in a 2-group).  So the value placed at snarkjs
row c goes to our index J·c mod n, one iNTT gives the coefficients, scaling
coefficient i by ω'_{2n}^i (the twiddles of our 2n domain) and one NTT give
the values at ω'_{2n}^{2m+1}, and snarkjs's odd point i is our m with
2m + 1 ≡ J(2i + 1) (mod 2n).  No division by Z: it is the constant −2 on the
odd coset and is folded into the H points.

Proof (§4.2) with blinding r, s from a CSPRNG: the same combination as
``jaxprove.groth16`` (L = the zkey's C section, γ = 1, i.e. gamma2 = G2's
generator), so ``groth16.verify`` with the zkey's verifying key accepts it,
as does ``snarkjs groth16 verify`` with the JSON written here.

API: ``read_r1cs(path) -> R1CS``, ``read_wtns(path, num_vars=None) -> Fr
(8, n)``, ``read_zkey(path) -> Zkey``, ``prove_snarkjs(zkey, matrices, w,
seed=None, msm_config=None) -> groth16.Proof``, ``odd_coset_h`` (the H
scalars), ``read_proof_json``, ``read_public_json``, ``write_proof_json``,
``write_public_json``, ``write_verification_key_json`` (and the ``*_json``
dict builders).  JSON (§3.5): decimal strings, points as affine projective
triples (z = 1; infinity [0, 1, 0]), Fq2 as [c0, c1], indent 1, which is
snarkjs's text byte for byte.

Every reader validates what it reads and raises ValueError naming the file
and the problem (magic, version, missing or truncated section, prime, sizes,
non-canonical values, points off the curve).  Writers are atomic (temporary
name, fsync, rename).  Subgroup membership of the zkey's points is not
checked (the zkey is trusted setup output; on-curve is).
"""
from __future__ import annotations

import gzip
import json
import os
import struct
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from circuits.cs import CSR, R1CS
from jaxprove import atomic, pce
from jaxprove import groth16 as G
from ops import msm as M
from ops import ntt as N
from ops import pairing as PA
from ops.curve import G1, G2
from ops.field import Fq, Fr
from ops.fq12 import Fq12

R = Fr.p
Q = Fq.p
BN254_R = 0x30644e72e131a029b85045b68181585d2833e84879b9709143e1f593f0000001
N8R, N8Q = 32, 48
SNARKJS_NONRESIDUE = 5            # snarkjs's roots: w[32] = 5^((r−1)/2^32)


# ------------------------------------------------------------------ container
def _read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _sections(data: bytes, magic: bytes, versions: tuple, name: str) -> dict[int, memoryview]:
    """The section table of a snarkjs binary file: {type: payload}."""
    if len(data) < 12:
        raise ValueError(f"{name}: truncated header ({len(data)} bytes)")
    if data[:4] != magic:
        raise ValueError(f"{name}: bad magic {bytes(data[:4])!r}, expected {magic!r}")
    version, n = struct.unpack_from("<II", data, 4)
    if version not in versions:
        raise ValueError(f"{name}: unsupported {magic.decode()} version {version} "
                         f"(supported: {', '.join(map(str, versions))})")
    view, pos, out = memoryview(data), 12, {}
    for _ in range(n):
        if pos + 12 > len(data):
            raise ValueError(f"{name}: truncated section table at byte {pos}")
        typ, size = struct.unpack_from("<IQ", data, pos)
        pos += 12
        if pos + size > len(data):
            raise ValueError(f"{name}: section {typ} is truncated ({size} bytes declared, "
                             f"{len(data) - pos} left)")
        if typ in out:
            raise ValueError(f"{name}: section {typ} appears twice")
        out[typ] = view[pos:pos + size]
        pos += size
    if pos != len(data):
        raise ValueError(f"{name}: {len(data) - pos} bytes after the last section")
    return out


def _section(secs: dict, typ: int, name: str, size: int | None = None) -> memoryview:
    if typ not in secs:
        raise ValueError(f"{name}: section {typ} is missing")
    s = secs[typ]
    if size is not None and len(s) != size:
        raise ValueError(f"{name}: section {typ} has {len(s)} bytes, expected {size}")
    return s


def _check_prime(name: str, n8: int, prime: int, want_n8: int, want: int, what: str):
    if n8 != want_n8:
        raise ValueError(f"{name}: field element size {n8} bytes, expected {want_n8} ({what})")
    if prime != want:
        hint = " (that is BN254's r: compile with --prime bls12381)" if prime == BN254_R else ""
        raise ValueError(f"{name}: prime {prime:#x} is not BLS12-381's {what}{hint}")


def _field_header(secs, name: str, extra: int) -> tuple[bytes, int]:
    """Section 1 of a .r1cs or .wtns: n8 (u32), the prime in n8 bytes (must
    be BLS12-381's r), then ``extra`` bytes; returns (the section, n8)."""
    hdr = _section(secs, 1, name)
    if len(hdr) < 4:
        raise ValueError(f"{name}: header section truncated")
    (n8,) = struct.unpack_from("<I", hdr, 0)
    if len(hdr) != 4 + n8 + extra:
        raise ValueError(f"{name}: header section has {len(hdr)} bytes, expected {4 + n8 + extra}")
    _check_prime(name, n8, int.from_bytes(hdr[4:4 + n8], "little"), N8R, R, "scalar field r")
    return hdr, n8


def _ints(buf, n8: int, count: int, bound: int, name: str, what: str) -> list[int]:
    vals = [int.from_bytes(buf[i * n8:(i + 1) * n8], "little") for i in range(count)]
    for i, v in enumerate(vals):
        if v >= bound:
            raise ValueError(f"{name}: {what} {i} is not a canonical field element (>= modulus)")
    return vals


# ------------------------------------------------------------------ .r1cs
def _parse_lc(buf, pos: int, n_wires: int, name: str, where: str):
    if pos + 4 > len(buf):
        raise ValueError(f"{name}: constraints section truncated in {where}")
    (k,) = struct.unpack_from("<I", buf, pos)
    pos += 4
    end = pos + k * (4 + N8R)
    if end > len(buf):
        raise ValueError(f"{name}: constraints section truncated in {where}")
    terms = {}
    for t in range(k):
        o = pos + t * (4 + N8R)
        (wire,) = struct.unpack_from("<I", buf, o)
        coef = int.from_bytes(buf[o + 4:o + 4 + N8R], "little")
        if wire >= n_wires:
            raise ValueError(f"{name}: {where} names wire {wire}, the circuit has {n_wires}")
        if coef >= R:
            raise ValueError(f"{name}: {where} has a non-canonical coefficient (>= r)")
        terms[wire] = (terms.get(wire, 0) + coef) % R
    return {w: c for w, c in terms.items() if c}, end


def _to_r1cs(name: str, num_inputs: int, num_aux: int, rows: list) -> R1CS:
    """``circuits.cs.R1CS`` from per-row term dicts {wire: coef} for A, B, C
    (constraint rows only; the input rows A = 1·input_i are appended)."""
    rows = list(rows) + [({i: 1}, {}, {}) for i in range(num_inputs)]
    table: dict[int, int] = {}
    mats = []
    for m in range(3):
        indptr, cols, ids = [0], [], []
        for row in rows:
            for wire in sorted(row[m]):
                cols.append(wire)
                ids.append(table.setdefault(row[m][wire], len(table)))
            indptr.append(len(cols))
        mats.append(CSR(np.asarray(indptr, np.int64), np.asarray(cols, np.int64),
                        np.asarray(ids, np.int32)))
    coeffs = tuple(sorted(table, key=table.get))
    return R1CS(name, num_inputs, num_aux, len(rows) - num_inputs, *mats, coeffs,
                np.zeros(num_inputs + num_aux, bool))


def read_r1cs(path) -> R1CS:
    """A circom .r1cs (version 1, BLS12-381 scalar field) as ``circuits.cs.R1CS``
    in bellperson's variable order (= circom's: ONE, outputs, public inputs,
    then private wires), with the input rows appended; num_inputs = 1 +
    nPubOut + nPubIn.  Each row's terms are sorted by wire, repeated wires
    merged and zero terms dropped."""
    name = str(path)
    secs = _sections(_read(path), b"r1cs", (1,), name)
    if 4 in secs or 5 in secs:
        raise ValueError(f"{name}: custom gates (sections 4, 5) are not supported (PLONK only)")
    hdr, n8 = _field_header(secs, name, 28)
    n_wires, n_out, n_in, n_prv, _labels, n_cons = struct.unpack_from("<IIIIQI", hdr, 4 + n8)
    num_inputs = 1 + n_out + n_in
    if num_inputs + n_prv > n_wires:
        raise ValueError(f"{name}: {num_inputs} public and {n_prv} private input wires "
                         f"exceed nWires = {n_wires}")
    buf, pos, rows = _section(secs, 2, name), 0, []
    for i in range(n_cons):
        row = []
        for m in "ABC":
            lc, pos = _parse_lc(buf, pos, n_wires, name, f"constraint {i} ({m})")
            row.append(lc)
        rows.append(tuple(row))
    if pos != len(buf):
        raise ValueError(f"{name}: {len(buf) - pos} bytes after constraint {n_cons - 1} "
                         f"(header says {n_cons} constraints)")
    if 3 in secs and len(secs[3]) != 8 * n_wires:
        raise ValueError(f"{name}: wire-to-label section has {len(secs[3])} bytes, "
                         f"expected {8 * n_wires}")
    base = os.path.splitext(os.path.basename(name))[0]
    return _to_r1cs(f"circom:{base}", num_inputs, n_wires - num_inputs, rows)


# ------------------------------------------------------------------ .wtns
def read_wtns(path, num_vars: int | None = None) -> jnp.ndarray:
    """A .wtns witness (version ≤ 2, BLS12-381 r) as Fr ``(8, n)`` (Montgomery
    limbs, circom = bellperson order); witness[0] must be 1.  With
    ``num_vars`` the length must match it."""
    name = str(path)
    secs = _sections(_read(path), b"wtns", (1, 2), name)
    hdr, n8 = _field_header(secs, name, 4)
    (n,) = struct.unpack_from("<I", hdr, 4 + n8)
    if num_vars is not None and n != num_vars:
        raise ValueError(f"{name}: witness has {n} values, the circuit has {num_vars} wires")
    vals = _ints(_section(secs, 2, name, n * N8R), N8R, n, R, name, "witness value")
    if not vals or vals[0] != 1:
        raise ValueError(f"{name}: witness[0] must be 1 (the constant wire)")
    return jnp.asarray(Fr.from_int(vals))


# ------------------------------------------------------------------ .zkey
class Zkey(NamedTuple):
    """A snarkjs Groth16 proving key.

    pk: ``groth16.ProvingKey`` with l = the zkey's C section (private wires)
    and h = its Lagrange-form H points (domain_size of them, snarkjs's
    convention, not bellperson's τ^i·Z(τ)/δ); vk: ``groth16.VerifyingKey``
    (gamma_g2 = G2's generator, ic = section 3); ab: an ``R1CS`` holding the
    A and B rows of the coefficient section (C empty: snarkjs does not store
    it), for ``pce.extract``; coset: the ``OddCoset`` maps of its domain."""
    pk: G.ProvingKey
    vk: G.VerifyingKey
    ab: R1CS
    num_public: int            # outputs + public inputs (ONE excluded)
    domain_size: int
    coset: "OddCoset"


def _on_curve(curve, x, y) -> bool:
    """y² = x³ + b over Fq (G1) or Fq2 = Fq[u]/(u² + 1) (G2), host ints."""
    if curve is G1:
        return (y * y - x * x * x - curve.b) % Q == 0
    mul = lambda a, b: ((a[0] * b[0] - a[1] * b[1]) % Q, (a[0] * b[1] + a[1] * b[0]) % Q)
    lhs, rhs = mul(y, y), mul(mul(x, x), x)
    return all((lhs[k] - rhs[k] - curve.b[k]) % Q == 0 for k in range(2))


def _points(curve, buf, count: int, name: str, what: str) -> jnp.ndarray:
    """``count`` zkey points (affine, coordinates LE Montgomery x·2^384, all
    zero = infinity) -> our affine ``(2, *fp, count)``, whose limbs are the
    same words; each coordinate checked canonical and each point on the curve."""
    per = 2 if curve is G1 else 4
    raw = _ints(buf, N8Q, count * per, Q, name, f"{what} coordinate")
    rinv = pow(1 << 384, -1, Q)
    for i in range(count):
        c = [v * rinv % Q for v in raw[i * per:(i + 1) * per]]
        x, y = (c[0], c[1]) if per == 2 else ((c[0], c[1]), (c[2], c[3]))
        if any(c) and not _on_curve(curve, x, y):
            raise ValueError(f"{name}: {what}: point {i} is not on {curve.name}")
    limbs = np.frombuffer(bytes(buf), dtype="<u4").astype(np.uint32)
    arr = limbs.reshape((count,) + ((2,) if per == 2 else (2, 2)) + (12,))
    return jnp.asarray(np.ascontiguousarray(np.moveaxis(arr, 0, -1)))    # (2[, 2], 12, count)


def read_zkey(path) -> Zkey:
    """A snarkjs Groth16 .zkey (version 1, BLS12-381), validated (sections,
    sizes, primes, canonical coordinates, points on the curve, coefficient
    indices) -> ``Zkey``."""
    name = str(path)
    secs = _sections(_read(path), b"zkey", (1,), name)
    (proto,) = struct.unpack_from("<I", _section(secs, 1, name, 4), 0)
    if proto != 1:
        kind = {2: "plonk", 10: "fflonk"}.get(proto, "unknown")
        raise ValueError(f"{name}: protocol {proto} ({kind}), expected 1 (groth16)")
    hdr = _section(secs, 2, name, 4 + N8Q + 4 + N8R + 12 + 96 * 3 + 192 * 3)
    (n8q,) = struct.unpack_from("<I", hdr, 0)
    _check_prime(name, n8q, int.from_bytes(hdr[4:4 + N8Q], "little"), N8Q, Q, "base field q")
    (n8r,) = struct.unpack_from("<I", hdr, 4 + N8Q)
    _check_prime(name, n8r, int.from_bytes(hdr[8 + N8Q:8 + N8Q + N8R], "little"), N8R, R,
                 "scalar field r")
    o = 8 + N8Q + N8R
    n_vars, n_pub, n = struct.unpack_from("<III", hdr, o)
    o += 12
    if n < 2 or n & (n - 1) or n > 1 << (N.TWO_ADICITY - 1):
        raise ValueError(f"{name}: domain size {n} is not a power of two in [2, 2^31]")
    if n_pub + 1 > n_vars:
        raise ValueError(f"{name}: nPublic = {n_pub} needs more than nVars = {n_vars} wires")
    layout = [(G1, "alpha1"), (G1, "beta1"), (G2, "beta2"), (G2, "gamma2"), (G1, "delta1"),
              (G2, "delta2")]
    pts = []
    for c, what in layout:
        size = 96 if c is G1 else 192
        pts.append(_points(c, hdr[o:o + size], 1, name, what)[..., 0])
        o += size
    alpha1, beta1, beta2, gamma2, delta1, delta2 = pts
    ic = _points(G1, _section(secs, 3, name, 96 * (n_pub + 1)), n_pub + 1, name, "IC")
    a = _points(G1, _section(secs, 5, name, 96 * n_vars), n_vars, name, "A")
    b1 = _points(G1, _section(secs, 6, name, 96 * n_vars), n_vars, name, "B1")
    b2 = _points(G2, _section(secs, 7, name, 192 * n_vars), n_vars, name, "B2")
    n_prv = n_vars - n_pub - 1
    c = _points(G1, _section(secs, 8, name, 96 * n_prv), n_prv, name, "C")
    h = _points(G1, _section(secs, 9, name, 96 * n), n, name, "H")
    ab = _coefficients(_section(secs, 4, name), n_vars, n_pub, n, name)
    pk = G.ProvingKey(alpha_g1=alpha1, beta_g1=beta1, beta_g2=beta2, delta_g1=delta1,
                      delta_g2=delta2, a=a, b_g1=b1, b_g2=b2, l=c, h=h)
    vk = G.VerifyingKey(alpha_g1=alpha1, beta_g2=beta2, gamma_g2=gamma2, delta_g2=delta2, ic=ic)
    return Zkey(pk, vk, ab, n_pub, n, odd_coset(n.bit_length() - 1))


def _coefficients(buf, n_vars: int, n_pub: int, n: int, name: str) -> R1CS:
    """Section 4 -> R1CS of its A and B rows (values c·2^512 -> c)."""
    if len(buf) < 4:
        raise ValueError(f"{name}: coefficient section truncated")
    (k,) = struct.unpack_from("<I", buf, 0)
    rec = 12 + N8R
    if len(buf) != 4 + k * rec:
        raise ValueError(f"{name}: coefficient section has {len(buf)} bytes, {k} entries "
                         f"need {4 + k * rec}")
    r2inv = pow(1 << 512, -1, R)
    rows: dict[int, tuple] = {}
    for i in range(k):
        o = 4 + i * rec
        m, row, sig = struct.unpack_from("<III", buf, o)
        v = int.from_bytes(buf[o + 12:o + rec], "little")
        if m > 1 or row >= n or sig >= n_vars or v >= R:
            raise ValueError(f"{name}: coefficient {i} (matrix {m}, row {row}, signal {sig}) is "
                             f"out of range (matrix 0/1, row < {n}, signal < {n_vars}, value < r)")
        lc = rows.setdefault(row, ({}, {}, {}))[m]
        lc[sig] = (lc.get(sig, 0) + v * r2inv) % R
    n_cons = (max(rows) + 1 if rows else 0) - (n_pub + 1)
    ok = n_cons >= 0 and all(rows.get(n_cons + s) == ({s: 1}, {}, {}) for s in range(n_pub + 1))
    if not ok:
        raise ValueError(f"{name}: the coefficient section must end with snarkjs's public rows "
                         f"(A = 1·w_s at row nConstraints + s for s ≤ nPublic)")
    body = [tuple({w: c for w, c in lc.items() if c} for lc in rows.get(i, ({}, {}, {})))
            for i in range(n_cons)]
    return _to_r1cs(f"zkey:{os.path.basename(name)}", n_pub + 1, n_vars - n_pub - 1, body)


# ------------------------------------------------------------------ prove
def snarkjs_root(log_n: int) -> int:
    """snarkjs's primitive 2^log_n-th root of unity: 5^((r−1)/2^log_n)."""
    if not 0 <= log_n <= N.TWO_ADICITY:
        raise ValueError(f"snarkjs_root: log_n = {log_n} outside [0, {N.TWO_ADICITY}]")
    return pow(SNARKJS_NONRESIDUE, (R - 1) >> log_n, R)


def _dlog2(target: int, base: int, k: int) -> int:
    """J with base^J = target, base of order 2^k (Pohlig–Hellman, bit by bit)."""
    j = 0
    for i in range(k):
        t = target * pow(base, -j, R) % R
        if pow(t, 1 << (k - 1 - i), R) != 1:
            j |= 1 << i
    if pow(base, j, R) != target:
        raise ValueError("_dlog2: target is not a power of base")
    return j


class OddCoset(NamedTuple):
    """Index maps between snarkjs's roots and ``ops.ntt``'s for domain size n
    (see the module docstring): ``to_ours[k]`` = the snarkjs row placed at
    our index k, ``from_ours[i]`` = our odd-coset index m of snarkjs's odd
    point i; ``shift``: ω'_{2n}^i, i < n."""
    dom: N.Domain
    shift: jnp.ndarray         # Fr (8, n)
    to_ours: jnp.ndarray       # int32 (n,)
    from_ours: jnp.ndarray     # int32 (n,)


def odd_coset(log_n: int) -> OddCoset:
    """The maps for snarkjs's domain of size 2^log_n (log_n ≤ 31)."""
    n, n2 = 1 << log_n, 2 << log_n
    J = _dlog2(snarkjs_root(log_n + 1), N.root_of_unity(log_n + 1), log_n + 1)
    jinv = pow(J, -1, n2)
    k = np.arange(n, dtype=np.int64)
    to_ours = (jinv * k) % n
    from_ours = (((J * (2 * k + 1)) % n2) - 1) // 2
    return OddCoset(N.domain(log_n, cosets=False), N.domain(log_n + 1, cosets=False).twiddles,
                    jnp.asarray(to_ours, jnp.int32), jnp.asarray(from_ours, jnp.int32))


@jax.jit
def odd_coset_h(a, b, oc: OddCoset):
    """snarkjs's H scalars: p = A·B − C at ω_{2n}^{2i+1}, i < n, with A, B
    interpolating a, b ``(8, *batch, n)`` on snarkjs's ω_n^c and C
    interpolating a∘b -> Fr ``(8, *batch, n)``."""
    x = jnp.stack([a, b, Fr.mul(a, b)], axis=1)                 # (8, 3, *batch, n)
    x = jnp.take(x, oc.to_ours, axis=-1)
    coef = N.intt(x, oc.dom)
    shift = oc.shift.reshape((8,) + (1,) * (coef.ndim - 2) + (-1,))
    ev = N.ntt(Fr.mul(coef, shift), oc.dom)
    p = Fr.sub(Fr.mul(ev[:, 0], ev[:, 1]), ev[:, 2])
    return jnp.take(p, oc.from_ours, axis=-1)


def prove_snarkjs(zkey: Zkey, matrices: pce.Matrices, w, seed: int | None = None,
                  msm_config: M.MSMConfig | None = None) -> G.Proof:
    """Groth16 proofs with a snarkjs zkey for witnesses w Fr ``(8, *batch,
    nVars)`` (circom order, w[..., 0] = 1).  ``matrices``:
    ``pce.extract(read_r1cs(...))`` or ``pce.extract(zkey.ab)``; only A·w and
    B·w are used (C from a∘b, as snarkjs).  Blinding r, s from the CSPRNG
    unless ``seed`` (tests only).  -> ``groth16.Proof`` of batch shape
    ``batch``, verifiable with ``zkey.vk`` and public inputs
    w[..., 1:nPublic+1]."""
    pk, n = zkey.pk, zkey.domain_size
    if matrices.num_vars != pk.a.shape[-1] or matrices.num_inputs != zkey.num_public + 1:
        raise ValueError(f"prove_snarkjs: circuit has {matrices.num_vars} wires and "
                         f"{matrices.num_inputs - 1} public signals, the zkey "
                         f"{pk.a.shape[-1]} and {zkey.num_public}")
    if matrices.rows > n:
        raise ValueError(f"prove_snarkjs: {matrices.rows} QAP rows exceed the zkey's domain of {n}")
    if w.ndim < 2 or w.shape[-1] != matrices.num_vars:
        raise ValueError(f"prove_snarkjs: witness must be Fr (8, *batch, {matrices.num_vars}), "
                         f"got shape {w.shape}")
    batch = w.shape[1:-1]
    a, b, _ = pce.evaluate(matrices, w)
    pad = [(0, 0)] * (a.ndim - 1) + [(0, n - matrices.rows)]
    h = odd_coset_h(jnp.pad(a, pad), jnp.pad(b, pad), zkey.coset)
    r, s = G._blinding(batch, seed)
    return G.prove_msms(pk, w, h, matrices.num_inputs, G.msm_positions(matrices), r, s, msm_config)


# ------------------------------------------------------------------ JSON
def _atomic_write_json(path, obj):
    atomic.write_bytes(path, json.dumps(obj, indent=1).encode())


def _g1_json(pt):
    return ["0", "1", "0"] if pt is None else [str(pt[0]), str(pt[1]), "1"]


def _g2_json(pt):
    if pt is None:
        return [["0", "0"], ["1", "0"], ["0", "0"]]
    (x0, x1), (y0, y1) = pt
    return [[str(x0), str(x1)], [str(y0), str(y1)], ["1", "0"]]


def proof_json(proof: G.Proof) -> dict:
    """snarkjs's proof.json object for one proof (batch shape ())."""
    if proof.a.shape != (2, 12):
        raise ValueError(f"proof_json: one proof expected, got A of shape {proof.a.shape}")
    return {"pi_a": _g1_json(G1.to_affine_ints(proof.a, projective=False)),
            "pi_b": _g2_json(G2.to_affine_ints(proof.b, projective=False)),
            "pi_c": _g1_json(G1.to_affine_ints(proof.c, projective=False)),
            "protocol": "groth16", "curve": "bls12381"}


def public_ints(public) -> list[int]:
    """Public signals from an Fr array ``(8, k)`` or a sequence of ints in [0, r)."""
    if isinstance(public, (jnp.ndarray, np.ndarray)) and public.dtype == np.uint32:
        vals = [int(v) for v in np.asarray(Fr.to_int(public)).reshape(-1)]
    else:
        vals = [int(v) for v in public]
    for i, v in enumerate(vals):
        if not 0 <= v < R:
            raise ValueError(f"public signal {i} is outside [0, r)")
    return vals


def _dec(v, bound: int, name: str, what: str) -> int:
    if not isinstance(v, str) or not v.isdigit():
        raise ValueError(f"{name}: {what} must be a decimal string, got {v!r}")
    x = int(v)
    if x >= bound:
        raise ValueError(f"{name}: {what} = {x} is not below the modulus")
    return x


def _read_json(path):
    """The JSON value in ``path``, read through gzip when the file is gzipped
    (its first bytes 1f 8b: a 32GiB WindowPoSt key's 25,840 IC points are
    6.7 MB of JSON, 2.9 MB gzipped)."""
    try:
        with open(path, "rb") as f:
            gzipped = f.read(2) == b"\x1f\x8b"
        with (gzip.open(path, "rt") if gzipped else open(path)) as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError, EOFError, gzip.BadGzipFile) as e:
        raise ValueError(f"{path}: not JSON ({e})") from None


def _g1_from_json(v, name, what):
    if not (isinstance(v, list) and len(v) == 3):
        raise ValueError(f"{name}: {what} must be [x, y, z]")
    x, y, z = (_dec(c, Q, name, what) for c in v)
    if (x, y, z) == (0, 1, 0):
        return None
    if z != 1:
        raise ValueError(f"{name}: {what} must be affine (z = 1), got z = {z}")
    return x, y


def _g2_from_json(v, name, what):
    if not (isinstance(v, list) and len(v) == 3 and all(isinstance(c, list) and len(c) == 2
                                                        for c in v)):
        raise ValueError(f"{name}: {what} must be [[x0, x1], [y0, y1], [z0, z1]]")
    (x0, x1), (y0, y1), (z0, z1) = ((_dec(a, Q, name, what), _dec(b, Q, name, what)) for a, b in v)
    if ((x0, x1), (y0, y1), (z0, z1)) == ((0, 0), (1, 0), (0, 0)):
        return None
    if (z0, z1) != (1, 0):
        raise ValueError(f"{name}: {what} must be affine (z = [1, 0])")
    return (x0, x1), (y0, y1)


def read_proof_json(path) -> G.Proof:
    """snarkjs's proof.json (groth16, bls12381) -> ``groth16.Proof`` (batch
    shape ()); points checked on the curve (ValueError otherwise)."""
    name, d = str(path), _read_json(path)
    if not isinstance(d, dict) or d.get("protocol") != "groth16" or d.get("curve") != "bls12381":
        raise ValueError(f"{name}: not a groth16 proof on bls12381 "
                         f"(protocol {d.get('protocol') if isinstance(d, dict) else None!r}, "
                         f"curve {d.get('curve') if isinstance(d, dict) else None!r})")
    try:
        a = G1.from_affine_int(_g1_from_json(d.get("pi_a"), name, "pi_a"))
        b = G2.from_affine_int(_g2_from_json(d.get("pi_b"), name, "pi_b"))
        c = G1.from_affine_int(_g1_from_json(d.get("pi_c"), name, "pi_c"))
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None
    return G.Proof(jnp.asarray(a), jnp.asarray(b), jnp.asarray(c))


def read_verification_key_json(path) -> G.VerifyingKey:
    """snarkjs's verification_key.json (groth16, bls12381) -> ``groth16.VerifyingKey``;
    points checked on the curve, vk_alphabeta_12 ignored (ValueError on a bad file)."""
    name, d = str(path), _read_json(path)
    if not isinstance(d, dict) or d.get("protocol") != "groth16" or d.get("curve") != "bls12381":
        raise ValueError(f"{name}: not a groth16 verification key on bls12381")
    ic = d.get("IC")
    if not isinstance(ic, list) or not ic or d.get("nPublic") != len(ic) - 1:
        raise ValueError(f"{name}: IC must list nPublic + 1 points (nPublic {d.get('nPublic')!r})")
    try:
        g2 = {k: jnp.asarray(G2.from_affine_int(_g2_from_json(d.get(k), name, k)))
              for k in ("vk_beta_2", "vk_gamma_2", "vk_delta_2")}
        alpha = jnp.asarray(G1.from_affine_int(_g1_from_json(d.get("vk_alpha_1"), name, "vk_alpha_1")))
        ic = jnp.asarray(G1.from_affine_ints([_g1_from_json(p, name, f"IC[{i}]")
                                              for i, p in enumerate(ic)]))
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None
    return G.VerifyingKey(alpha, g2["vk_beta_2"], g2["vk_gamma_2"], g2["vk_delta_2"], ic)


def read_public_json(path) -> list[int]:
    """snarkjs's public.json -> the public signals as ints in [0, r)."""
    name, d = str(path), _read_json(path)
    if not isinstance(d, list):
        raise ValueError(f"{name}: public signals must be a JSON list")
    return [_dec(v, R, name, f"public signal {i}") for i, v in enumerate(d)]


def write_proof_json(path, proof: G.Proof):
    _atomic_write_json(path, proof_json(proof))


def write_public_json(path, public):
    """public.json: the nPublic signals (w[1..nPublic]) as decimal strings."""
    _atomic_write_json(path, [str(v) for v in public_ints(public)])


def alphabeta_json(vk: G.VerifyingKey) -> list:
    """e(α, β) ∈ Fq12 as snarkjs's vk_alphabeta_12: [c0, c1] of Fq6 values
    [c0, c1, c2] of Fq2 values [re, im], decimal strings (``ops.pairing``'s
    value and tower are snarkjs's: checked against its exported keys)."""
    e = Fq12.to_int(np.asarray(PA.pairing(vk.alpha_g1, vk.beta_g2)))
    return [[[str(int(x)) for x in fq2] for fq2 in fq6] for fq6 in e]


def verification_key_json(vk: G.VerifyingKey, alphabeta=None) -> dict:
    """snarkjs's verification_key.json object.  ``alphabeta``: the
    vk_alphabeta_12 value (snarkjs's verifier does not use it); computed with
    ``alphabeta_json`` (one pairing) when None."""
    out = {"protocol": "groth16", "curve": "bls12381", "nPublic": vk.ic.shape[-1] - 1,
           "vk_alpha_1": _g1_json(G1.to_affine_ints(vk.alpha_g1, projective=False)),
           "vk_beta_2": _g2_json(G2.to_affine_ints(vk.beta_g2, projective=False)),
           "vk_gamma_2": _g2_json(G2.to_affine_ints(vk.gamma_g2, projective=False)),
           "vk_delta_2": _g2_json(G2.to_affine_ints(vk.delta_g2, projective=False))}
    out["vk_alphabeta_12"] = alphabeta_json(vk) if alphabeta is None else alphabeta
    out["IC"] = [_g1_json(p) for p in G1.to_affine_ints(vk.ic, projective=False)]
    return out


def write_verification_key_json(path, vk: G.VerifyingKey, alphabeta=None):
    _atomic_write_json(path, verification_key_json(vk, alphabeta))
