"""Bad input across the interop paths: each defect a clear ValueError before
any MSM.

tests/test_formats.py already covers: .r1cs bad magic, version, truncated
header/section/constraint, BN254 prime, unknown wire, non-canonical
coefficient, trailing bytes; .wtns section size, witness[0] ≠ 1,
non-canonical value, BN254 prime, length ≠ the circuit's wires; .zkey (from
snarkjs) bad magic, truncation, version, base-field prime, an H point off the
curve, protocol plonk, a non-canonical coordinate; tests/test_groth16.py:
``groth16.prove`` with a short witness and with an unsatisfied one (first
failing row); tests/test_params.py: damaged .params.  Added here: the rest
of the .r1cs/.wtns header and section checks, a wrong-curve (BN254-sized)
and wrong-r .zkey, corrupted zkey coefficients and G2 points, zkey/circuit
and witness mismatches in ``prove_snarkjs``, and the first failing row of an
unsatisfied circom witness, refused by ``groth16.prove`` after the SpMV and
before the NTTs and MSMs.

The .zkey files are built here by hand from research/snarkjs-formats.md §3.3
(so no node is needed): x·x = y (wires ONE, y public, x private), every point
the generator (the reader checks points on the curve, not their values).
"""
from __future__ import annotations

import struct

import jax.numpy as jnp
import numpy as np
import pytest
from py_ecc import bls12_381 as b

from circuits import cs as C
from conftest import P, R
from jaxprove import formats as F
from jaxprove import groth16 as G
from jaxprove import pce
from ops.field import Fr
from test_formats import _container, _fe, _r1cs_bytes, _wtns_bytes

BN254_Q = 0x30644e72e131a029b85045b68181585d97816a916871ca8d3c208c16d87cfd47


def _expect(tmp_path, reader, data, match):
    p = tmp_path / "bad.bin"
    p.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=match) as e:
        reader(p)
    assert str(p) in str(e.value)                        # the message names the file


# ---------------------------------------------------------------- .r1cs / .wtns
def test_r1cs_header_and_sections(tmp_path):
    hdr = struct.pack("<I", 32) + _fe(R) + struct.pack("<IIIIQI", 3, 1, 0, 1, 3, 1)

    def lc(terms):
        return struct.pack("<I", len(terms)) + b"".join(struct.pack("<I", w) + _fe(c)
                                                        for w, c in terms)
    cons = lc([(2, 1)]) + lc([(2, 1)]) + lc([(1, 1)])
    labels = struct.pack("<3Q", 0, 1, 2)

    def sec(*sections):
        return _container(b"r1cs", 1, list(sections))
    _expect(tmp_path, F.read_r1cs, sec((1, hdr), (2, cons), (3, labels), (4, b"")), "custom gates")
    _expect(tmp_path, F.read_r1cs, sec((1, hdr), (3, labels)), "section 2 is missing")
    _expect(tmp_path, F.read_r1cs, sec((1, hdr), (2, cons), (1, hdr)), "section 1 appears twice")
    _expect(tmp_path, F.read_r1cs, sec((1, hdr), (2, cons + b"\0"), (3, labels)),
            "1 bytes after constraint 0")
    _expect(tmp_path, F.read_r1cs, sec((1, hdr), (2, cons), (3, labels[:-8])),
            "wire-to-label section has 16 bytes, expected 24")
    q_hdr = struct.pack("<I", 48) + P.to_bytes(48, "little") + hdr[36:]    # the base field q
    _expect(tmp_path, F.read_r1cs, sec((1, q_hdr), (2, cons)), "field element size 48 bytes")
    wide = struct.pack("<I", 32) + _fe(R) + struct.pack("<IIIIQI", 2, 1, 0, 1, 3, 1)
    _expect(tmp_path, F.read_r1cs, sec((1, wide), (2, cons)), "exceed nWires = 2")
    other = struct.pack("<I", 32) + _fe(BN254_Q) + hdr[36:]        # a prime, but not r (no hint)
    _expect(tmp_path, F.read_r1cs, sec((1, other), (2, cons)), r"not BLS12-381's scalar field r$")


def test_wtns_truncated_and_versions(tmp_path):
    good = _wtns_bytes([1, 9, 3])
    _expect(tmp_path, F.read_wtns, good[:-1], "section 2 is truncated")
    _expect(tmp_path, F.read_wtns, good[:20], "truncated section table")
    _expect(tmp_path, F.read_wtns, good[:4] + struct.pack("<I", 3) + good[8:], "version 3")
    hdr = struct.pack("<I", 32) + _fe(R) + struct.pack("<I", 3)
    _expect(tmp_path, F.read_wtns, _container(b"wtns", 2, [(1, hdr + b"\0")]),
            "header section has 41 bytes, expected 40")
    _expect(tmp_path, F.read_wtns, _container(b"wtns", 2, [(1, hdr)]), "section 2 is missing")


# ---------------------------------------------------------------- synthetic .zkey
def _lem(v):
    """Fq coordinate as snarkjs's LEM: x·2^384 mod q, 48 bytes little-endian."""
    return (v * (1 << 384) % P).to_bytes(48, "little")


def _g1():
    x, y = b.G1
    return _lem(int(x)) + _lem(int(y))


def _g2():
    x, y = b.G2
    return b"".join(_lem(int(c)) for c in (*x.coeffs, *y.coeffs))


def _zkey_bytes(n8q=48, q=P, r=R, coeff_signal=2, sections=None):
    """x·x = y: nVars 3, nPublic 1, domain 4."""
    n_vars, n_pub, n = 3, 1, 4
    hdr = (struct.pack("<I", n8q) + q.to_bytes(48, "little") + struct.pack("<I", 32) + _fe(r)
           + struct.pack("<III", n_vars, n_pub, n) + _g1() * 2 + _g2() * 2 + _g1() + _g2())
    one = _fe((1 << 512) % R)                                  # coefficient 1 as c·2^512 mod r
    coef = [(0, 0, coeff_signal, one), (1, 0, 2, one), (0, 1, 0, one), (0, 2, 1, one)]
    sec4 = struct.pack("<I", len(coef)) + b"".join(struct.pack("<III", *e[:3]) + e[3] for e in coef)
    secs = {1: struct.pack("<I", 1), 2: hdr, 3: _g1() * (n_pub + 1), 4: sec4, 5: _g1() * n_vars,
            6: _g1() * n_vars, 7: _g2() * n_vars, 8: _g1() * (n_vars - n_pub - 1), 9: _g1() * n}
    secs.update(sections or {})
    return _container(b"zkey", 1, sorted(secs.items()))


def test_synthetic_zkey_reads(tmp_path):
    p = tmp_path / "ok.zkey"
    p.write_bytes(_zkey_bytes())
    z = F.read_zkey(p)
    assert (z.num_public, z.domain_size, z.pk.a.shape[-1], z.pk.h.shape[-1]) == (1, 4, 3, 4)
    assert z.ab.num_constraints == 1 and z.ab.num_inputs == 2
    assert F.G1.to_affine_ints(z.vk.ic[..., 1], projective=False) == (int(b.G1[0]), int(b.G1[1]))


def test_damaged_zkey_synthetic(tmp_path):
    rd = F.read_zkey
    _expect(tmp_path, rd, _zkey_bytes(n8q=32, q=BN254_Q),
            "field element size 32 bytes, expected 48")
    _expect(tmp_path, rd, _zkey_bytes(r=F.BN254_R), "that is BN254's r")
    _expect(tmp_path, rd, _zkey_bytes(coeff_signal=3),
            r"coefficient 0 \(matrix 0, row 0, signal 3\)")
    off_curve = bytearray(_g2())
    off_curve[0] ^= 1
    _expect(tmp_path, rd, _zkey_bytes(sections={7: _g2() + bytes(off_curve) + _g2()}),
            "B2: point 1 is not on G2")
    _expect(tmp_path, rd, _zkey_bytes(sections={3: _g1() * 3}),
            "section 3 has 288 bytes, expected 192")
    _expect(tmp_path, rd, _zkey_bytes(sections={1: struct.pack("<I", 10)}), "fflonk")
    no_pub_rows = struct.pack("<I", 1) + struct.pack("<III", 0, 0, 2) + _fe((1 << 512) % R)
    _expect(tmp_path, rd, _zkey_bytes(sections={4: no_pub_rows}),
            "must end with snarkjs's public rows")
    _expect(tmp_path, rd, _zkey_bytes()[:-1], "section 9 is truncated")


def test_prove_snarkjs_refuses_mismatches(tmp_path):
    p = tmp_path / "ok.zkey"
    p.write_bytes(_zkey_bytes())
    z = F.read_zkey(p)
    m = pce.extract(z.ab)
    w = jnp.asarray(Fr.from_int([[1, 9, 3]]))                    # (8, 1, 3)
    with pytest.raises(ValueError, match=r"prove_snarkjs: witness must be Fr \(8, \*batch, 3\)"):
        F.prove_snarkjs(z, m, w[..., :2])
    # the same constraint with y private: 3 wires, 0 public signals
    hdr = struct.pack("<I", 32) + _fe(R) + struct.pack("<IIIIQI", 3, 0, 0, 1, 3, 1)
    lc = lambda wire: struct.pack("<I", 1) + struct.pack("<I", wire) + _fe(1)
    q = tmp_path / "private.r1cs"
    q.write_bytes(_container(b"r1cs", 1, [(1, hdr), (2, lc(2) + lc(2) + lc(1))]))
    other = pce.extract(F.read_r1cs(q))
    with pytest.raises(ValueError,
                       match="circuit has 3 wires and 0 public signals, the zkey 3 and 1"):
        F.prove_snarkjs(z, other, w)


# ---------------------------------------------------------------- unsatisfied witnesses
def test_unsatisfied_circom_witness_first_row(tmp_path):
    """x·x = y with y = 9: x = 4 fails row 0; groth16.prove refuses it after
    the SpMV, before the NTTs and MSMs (the key is all zeros: never used)."""
    p = tmp_path / "c.r1cs"
    p.write_bytes(_r1cs_bytes())
    r1cs = F.read_r1cs(p)
    m = pce.extract(r1cs)
    q = tmp_path / "w.wtns"
    q.write_bytes(_wtns_bytes([1, 9, 4]))
    w = F.read_wtns(q, r1cs.num_vars)
    assert C.is_satisfied(r1cs, w) == (False, 0)                   # the host reference
    ws = jnp.stack([jnp.asarray(Fr.from_int([1, 9, 3])), w], axis=1)   # instance 1 is bad
    ok, first = pce.is_satisfied(m, ws)
    assert list(np.asarray(ok)) == [True, False] and list(np.asarray(first)) == [-1, 0]
    n, mm = r1cs.num_vars, 1 << G.domain_log(r1cs.num_rows)
    z1, z2 = jnp.zeros((2, 12), jnp.uint32), jnp.zeros((2, 2, 12), jnp.uint32)
    pk = G.ProvingKey(z1, z1, z2, z1, z2, jnp.zeros((2, 12, n), jnp.uint32),
                      jnp.zeros((2, 12, n), jnp.uint32), jnp.zeros((2, 2, 12, n), jnp.uint32),
                      jnp.zeros((2, 12, r1cs.num_aux), jnp.uint32),
                      jnp.zeros((2, 12, mm - 1), jnp.uint32))
    with pytest.raises(ValueError, match=r"does not satisfy circuit 'circom:c': "
                                         r"\(instance, first failing row\) = \[\(1, 0\)\]"):
        G.prove(pk, m, ws)
