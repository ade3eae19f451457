"""snarkjs / circom interoperability (jaxprove.formats).

Oracles: snarkjs itself (``r1cs export json``, ``wtns export json``,
``zkey export verificationkey``, ``groth16 verify``) on a tiny circuit
compiled by circom for BLS12-381, and Python-integer Lagrange interpolation
with snarkjs's roots for the odd-coset H scalars.  The snarkjs tests need
node and npm; snarkjs@0.7.6, circom2@0.2.23 and circomlib@2.0.5 are
installed once into ``$JAXPROVE_NPM`` (default ~/.cache/jaxprove/npm) and the
tests skip cleanly when that is impossible.  The synthetic-file tests run
everywhere.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import struct
import subprocess
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from circuits import cs
from jaxprove import formats as F
from jaxprove import groth16 as G
from jaxprove import pce
from ops import ntt
from ops.field import Fr

R = 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001
NPM_DIR = Path(os.environ.get("JAXPROVE_NPM", Path.home() / ".cache" / "jaxprove" / "npm"))
PACKAGES = ["snarkjs@0.7.6", "circom2@0.2.23", "circomlib@2.0.5"]

CIRCUIT = """pragma circom 2.0.0;
template T() {
    signal input x;
    signal input y;
    signal output z;
    signal t;
    signal u;
    t <== x * x;
    u <== 2 * x + y;
    z <== t * y + 3 * x + u;
}
component main {public [y]} = T();
"""
X, Y = 5, 7
Z = X * X * Y + 3 * X + 2 * X + Y          # 217


# ---------------------------------------------------------------- tools
def _bin(name):
    return NPM_DIR / "node_modules" / ".bin" / name


def _tools():
    """Paths of snarkjs and circom2, installing them once; None if impossible."""
    if not shutil.which("node") or not shutil.which("npm"):
        return None
    if not (_bin("snarkjs").exists() and _bin("circom2").exists()):
        try:
            NPM_DIR.mkdir(parents=True, exist_ok=True)
            if not (NPM_DIR / "package.json").exists():
                (NPM_DIR / "package.json").write_text('{"name": "jaxprove-npm", "private": true}\n')
            subprocess.run(["npm", "install", "--no-audit", "--no-fund", *PACKAGES], cwd=NPM_DIR,
                           capture_output=True, timeout=300, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
    if not (_bin("snarkjs").exists() and _bin("circom2").exists()):
        return None
    return str(_bin("snarkjs")), str(_bin("circom2"))


def _run(args, cwd, check=True):
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=check)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """circom build + snarkjs setup of CIRCUIT: directory with t.r1cs, w.wtns,
    t.zkey (one contribution), vk.json, r1cs.json, wtns.json and snarkjs's own
    proof.json, public.json."""
    tools = _tools()
    if tools is None:
        pytest.skip("node/npm or the snarkjs/circom2 npm packages are not available")
    snarkjs, circom = tools
    d = tmp_path_factory.mktemp("snarkjs")
    (d / "t.circom").write_text(CIRCUIT)
    (d / "input.json").write_text(json.dumps({"x": str(X), "y": str(Y)}))
    try:
        _run([circom, "t.circom", "--r1cs", "--wasm", "--O0", "--prime", "bls12381", "-o", "."], d)
        _run(["node", "t_js/generate_witness.js", "t_js/t.wasm", "input.json", "w.wtns"], d)
        _run([snarkjs, "powersoftau", "new", "bls12381", "4", "p0.ptau"], d)
        _run([snarkjs, "powersoftau", "contribute", "p0.ptau", "p1.ptau", "--name=a", "-e=jaxprove"], d)
        _run([snarkjs, "powersoftau", "prepare", "phase2", "p1.ptau", "p.ptau"], d)
        _run([snarkjs, "groth16", "setup", "t.r1cs", "p.ptau", "t0.zkey"], d)
        _run([snarkjs, "zkey", "contribute", "t0.zkey", "t.zkey", "--name=b", "-e=jaxprove"], d)
        _run([snarkjs, "zkey", "export", "verificationkey", "t.zkey", "vk.json"], d)
        _run([snarkjs, "r1cs", "export", "json", "t.r1cs", "r1cs.json"], d)
        _run([snarkjs, "wtns", "export", "json", "w.wtns", "wtns.json"], d)
        _run([snarkjs, "groth16", "prove", "t.zkey", "w.wtns", "proof.json", "public.json"], d)
    except (OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"circom/snarkjs could not build the test circuit: {e}")
    return d, snarkjs


def _rows(csr, coeffs, n_rows):
    """CSR -> list of {col: coeff} dicts."""
    out = []
    for i in range(n_rows):
        lo, hi = csr.indptr[i], csr.indptr[i + 1]
        out.append({int(c): coeffs[k] for c, k in zip(csr.cols[lo:hi], csr.coeff_ids[lo:hi])})
    return out


# ---------------------------------------------------------------- readers vs snarkjs
def test_r1cs_matches_snarkjs_export(built):
    d, _ = built
    ref = json.loads((d / "r1cs.json").read_text())
    r = F.read_r1cs(d / "t.r1cs")
    n_pub = ref["nOutputs"] + ref["nPubInputs"]
    assert (r.num_inputs, r.num_vars, r.num_constraints) == (1 + n_pub, ref["nVars"], ref["nConstraints"])
    for m, mat in enumerate((r.a, r.b, r.c)):
        got = _rows(mat, r.coeffs, r.num_rows)
        want = [{int(k): int(v) % R for k, v in con[m].items() if int(v) % R}
                for con in ref["constraints"]]
        want += [{i: 1} if m == 0 else {} for i in range(1 + n_pub)]       # the input rows
        assert got == want
    assert any(not con[0] and not con[1] for con in ref["constraints"])    # a linear constraint (--O0)


def test_wtns_matches_snarkjs_export_and_satisfies(built):
    d, _ = built
    r = F.read_r1cs(d / "t.r1cs")
    w = F.read_wtns(d / "w.wtns", r.num_vars)
    vals = [int(v) for v in Fr.to_int(w)]
    assert vals == [int(v) for v in json.loads((d / "wtns.json").read_text())]
    assert vals[:3] == [1, Z, Y]                    # ONE, output, public input
    assert cs.is_satisfied(r, w) == (True, None)
    with pytest.raises(ValueError, match="witness has 6 values, the circuit has 7 wires"):
        F.read_wtns(d / "w.wtns", r.num_vars + 1)


def test_zkey_matches_snarkjs_vk_and_r1cs(built):
    d, _ = built
    z = F.read_zkey(d / "t.zkey")
    r = F.read_r1cs(d / "t.r1cs")
    ref = json.loads((d / "vk.json").read_text())
    assert F.verification_key_json(z.vk, alphabeta=ref["vk_alphabeta_12"]) == ref
    assert z.num_public == 2 and z.domain_size == 8
    assert z.pk.a.shape == (2, 12, r.num_vars) and z.pk.h.shape == (2, 12, 8)
    assert z.pk.l.shape[-1] == r.num_aux and z.ab.num_constraints == r.num_constraints
    for mz, mr in ((z.ab.a, r.a), (z.ab.b, r.b)):
        assert _rows(mz, z.ab.coeffs, r.num_rows) == _rows(mr, r.coeffs, r.num_rows)


def test_json_round_trips_snarkjs_text(built, tmp_path):
    d, _ = built
    proof = F.read_proof_json(d / "proof.json")
    F.write_proof_json(tmp_path / "p.json", proof)
    assert (tmp_path / "p.json").read_text() == (d / "proof.json").read_text()
    pub = F.read_public_json(d / "public.json")
    assert pub == [Z, Y]
    F.write_public_json(tmp_path / "pub.json", pub)
    assert (tmp_path / "pub.json").read_text() == (d / "public.json").read_text()
    ref = json.loads((d / "vk.json").read_text())
    F.write_verification_key_json(tmp_path / "vk.json", F.read_zkey(d / "t.zkey").vk,
                                  alphabeta=ref["vk_alphabeta_12"])
    assert (tmp_path / "vk.json").read_text() == (d / "vk.json").read_text()
    vk, zvk = F.read_verification_key_json(d / "vk.json"), F.read_zkey(d / "t.zkey").vk
    assert all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(vk, zvk))
    ref["nPublic"] += 1
    (tmp_path / "bad.json").write_text(json.dumps(ref))
    with pytest.raises(ValueError, match="nPublic"):
        F.read_verification_key_json(tmp_path / "bad.json")
    doc = json.loads((d / "proof.json").read_text())
    doc["pi_a"][1] = str((int(doc["pi_a"][1]) + 1))
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="not on the curve"):
        F.read_proof_json(tmp_path / "bad.json")
    (tmp_path / "bad.json").write_text(json.dumps([str(R)]))
    with pytest.raises(ValueError, match="public signal 0"):
        F.read_public_json(tmp_path / "bad.json")


def test_json_readers_take_gzipped_files(tmp_path):
    """A gzipped JSON file (a 32GiB WindowPoSt key is 6.7 MB of JSON) reads
    as the plain one; a truncated or corrupt one is named, not a crash."""
    import gzip
    pub = [1, 2, R - 1]
    F.write_public_json(tmp_path / "public.json", pub)
    raw = (tmp_path / "public.json").read_bytes()
    (tmp_path / "public.json.gz").write_bytes(gzip.compress(raw))
    assert F.read_public_json(tmp_path / "public.json.gz") == pub
    (tmp_path / "cut.json.gz").write_bytes(gzip.compress(raw)[:-9])
    with pytest.raises(ValueError, match="cut.json.gz: not JSON"):
        F.read_public_json(tmp_path / "cut.json.gz")
    (tmp_path / "bad.json.gz").write_bytes(b"\x1f\x8b not gzip at all")
    with pytest.raises(ValueError, match="bad.json.gz: not JSON"):
        F.read_public_json(tmp_path / "bad.json.gz")


@pytest.mark.slow   # CI time (session 21: see bench/NOTES.md)
def test_verify_script_checks_snarkjs_files_plain_or_gzipped(built, tmp_path):
    """``scripts/verify.py`` on snarkjs's own proof: verified (exit 0) from the
    key and inputs gzipped; a changed public signal fails (exit 1, prints
    false); a missing file is named (exit 2) before anything compiles."""
    import gzip
    import sys
    d, _ = built
    for name in ("vk.json", "public.json"):
        (tmp_path / (name + ".gz")).write_bytes(gzip.compress((d / name).read_bytes()))
    pub = json.loads((d / "public.json").read_text())
    pub[0] = str((int(pub[0]) + 1) % R)
    (tmp_path / "changed.json").write_text(json.dumps(pub))
    script = Path(__file__).resolve().parents[1] / "scripts" / "verify.py"
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAXPROVE_CACHE": str(tmp_path / "xla")}

    def run(vk, public):
        return subprocess.run([sys.executable, str(script), "--vk", str(vk), "--proof",
                               str(d / "proof.json"), "--public", str(public)],
                              capture_output=True, text=True, env=env, timeout=900)

    ok = run(tmp_path / "vk.json.gz", tmp_path / "public.json.gz")
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert json.loads(ok.stdout.splitlines()[-1])["verified"] is True
    changed = run(d / "vk.json", tmp_path / "changed.json")
    assert changed.returncode == 1
    assert json.loads(changed.stdout.splitlines()[-1])["verified"] is False
    gone = run(tmp_path / "missing.json", d / "public.json")
    assert gone.returncode == 2 and "missing.json" in gone.stderr


# ---------------------------------------------------------------- proving
# the end-to-end interop check: CPU compiles of the MSMs, combination and pairings take 2-4 min
def test_proof_verifies_with_snarkjs(built, tmp_path):
    d, snarkjs = built
    z = F.read_zkey(d / "t.zkey")
    r = F.read_r1cs(d / "t.r1cs")
    w = F.read_wtns(d / "w.wtns", r.num_vars)
    proof = F.prove_snarkjs(z, pce.extract(r), w)
    F.write_proof_json(tmp_path / "proof.json", proof)
    F.write_public_json(tmp_path / "public.json", w[:, 1:1 + z.num_public])
    F.write_verification_key_json(tmp_path / "vk.json", z.vk)      # e(α, β) by ops.pairing
    assert (tmp_path / "vk.json").read_text() == (d / "vk.json").read_text()
    assert json.loads((tmp_path / "public.json").read_text()) == [str(Z), str(Y)]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []   # no temporaries
    ok = _run([snarkjs, "groth16", "verify", "vk.json", "public.json", "proof.json"], tmp_path,
              check=False)
    assert ok.returncode == 0 and "OK" in ok.stdout, ok.stdout + ok.stderr
    (tmp_path / "public.json").write_text(json.dumps([str(Z + 1), str(Y)]))
    bad = _run([snarkjs, "groth16", "verify", "vk.json", "public.json", "proof.json"], tmp_path,
               check=False)
    assert bad.returncode != 0
    # our verifier accepts our proof and snarkjs's own one with the zkey's key
    assert G.verify(z.vk, [Z, Y], proof)
    assert G.verify(F.read_verification_key_json(d / "vk.json"), F.read_public_json(d / "public.json"),
                    F.read_proof_json(d / "proof.json"))
    assert not G.verify(z.vk, [Z + 1, Y], proof)
    # fresh CSPRNG blinding: another proof of the same witness differs and verifies
    again = F.prove_snarkjs(z, pce.extract(r), w)
    assert G.proof_to_bytes(again) != G.proof_to_bytes(proof) and G.verify(z.vk, [Z, Y], again)


# ---------------------------------------------------------------- odd-coset H
def _snarkjs_h_reference(a, b, n):
    """p = A·B − C at snarkjs's ω_{2n}^{2i+1}, by Lagrange interpolation with ints."""
    w_n = pow(5, (R - 1) // n, R)
    g = pow(5, (R - 1) // (2 * n), R)
    pts = [pow(w_n, c, R) for c in range(n)]

    def interp(vals, x):
        tot = 0
        for j, (xj, vj) in enumerate(zip(pts, vals)):
            num, den = 1, 1
            for k, xk in enumerate(pts):
                if k != j:
                    num, den = num * (x - xk) % R, den * (xj - xk) % R
            tot += vj * num * pow(den, -1, R)
        return tot % R

    c = [x * y % R for x, y in zip(a, b)]
    out = []
    for i in range(n):
        x = pow(g, 2 * i + 1, R)
        out.append((interp(a, x) * interp(b, x) - interp(c, x)) % R)
    return out


def test_odd_coset_h_matches_interpolation():
    rng = random.Random(5)
    n = 8
    a = [rng.randrange(R) for _ in range(n)]
    b = [rng.randrange(R) for _ in range(n)]
    h = F.odd_coset_h(jnp.asarray(Fr.from_int(a)), jnp.asarray(Fr.from_int(b)), F.odd_coset(3))
    assert [int(v) for v in Fr.to_int(h)] == _snarkjs_h_reference(a, b, n)
    assert F.snarkjs_root(3) != ntt.root_of_unity(3)        # the roots differ: the maps matter


# ---------------------------------------------------------------- damaged files
def _container(magic, version, sections):
    out = magic + struct.pack("<II", version, len(sections))
    for typ, payload in sections:
        out += struct.pack("<IQ", typ, len(payload)) + payload
    return out


def _fe(x, n8=32):
    return x.to_bytes(n8, "little")


def _r1cs_bytes(prime=R, constraints=None, n_cons=1, version=1):
    """x·x = y with wires one=0, y=1 (public output), x=2 (private input)."""
    hdr = struct.pack("<I", 32) + _fe(prime) + struct.pack("<IIIIQI", 3, 1, 0, 1, 3, n_cons)

    def lc(terms):
        return struct.pack("<I", len(terms)) + b"".join(struct.pack("<I", w) + _fe(c)
                                                        for w, c in terms)
    cons = constraints if constraints is not None else lc([(2, 1)]) + lc([(2, 1)]) + lc([(1, 1)])
    return _container(b"r1cs", version, [(2, cons), (1, hdr), (3, struct.pack("<3Q", 0, 1, 2))])


def _wtns_bytes(vals, n=None, prime=R):
    hdr = struct.pack("<I", 32) + _fe(prime) + struct.pack("<I", len(vals) if n is None else n)
    return _container(b"wtns", 2, [(1, hdr), (2, b"".join(_fe(v) for v in vals))])


def _write(tmp_path, data):
    p = tmp_path / "f.bin"
    p.write_bytes(data)
    return p


def _expect(tmp_path, reader, data, match):
    with pytest.raises(ValueError, match=match):
        reader(_write(tmp_path, data))


def test_synthetic_r1cs_and_wtns(tmp_path):
    p = tmp_path / "ok.r1cs"
    p.write_bytes(_r1cs_bytes())
    r = F.read_r1cs(p)
    assert (r.num_inputs, r.num_aux, r.num_constraints) == (2, 1, 1)
    assert _rows(r.a, r.coeffs, 3) == [{2: 1}, {0: 1}, {1: 1}]
    assert _rows(r.c, r.coeffs, 3) == [{1: 1}, {}, {}]
    q = tmp_path / "ok.wtns"
    q.write_bytes(_wtns_bytes([1, 9, 3]))
    w = F.read_wtns(q, 3)
    assert [int(v) for v in Fr.to_int(w)] == [1, 9, 3]
    assert cs.is_satisfied(r, w) == (True, None)
    assert cs.is_satisfied(r, F.read_wtns(_write(tmp_path, _wtns_bytes([1, 9, 4])))) == (False, 0)


def test_damaged_r1cs_and_wtns(tmp_path):
    good = _r1cs_bytes()
    _expect(tmp_path, F.read_r1cs, b"r1cx" + good[4:], "bad magic")
    _expect(tmp_path, F.read_r1cs, _r1cs_bytes(version=2), "version 2")
    _expect(tmp_path, F.read_r1cs, good[:-5], "truncated")
    _expect(tmp_path, F.read_r1cs, good[:7], "truncated header")
    _expect(tmp_path, F.read_r1cs, _r1cs_bytes(prime=F.BN254_R), "BN254")
    _expect(tmp_path, F.read_r1cs, _r1cs_bytes(n_cons=2), "truncated in constraint 1")
    bad_wire = (struct.pack("<I", 1) + struct.pack("<I", 7) + _fe(1)) * 3
    _expect(tmp_path, F.read_r1cs, _r1cs_bytes(constraints=bad_wire), "wire 7")
    big = (struct.pack("<I", 1) + struct.pack("<I", 1) + _fe(R)) * 3
    _expect(tmp_path, F.read_r1cs, _r1cs_bytes(constraints=big), "non-canonical")
    _expect(tmp_path, F.read_r1cs, good + b"\0", "after the last section")
    _expect(tmp_path, F.read_wtns, _wtns_bytes([1, 9, 3], n=4), "section 2 has")
    _expect(tmp_path, F.read_wtns, _wtns_bytes([2, 9, 3]), r"witness\[0\] must be 1")
    _expect(tmp_path, F.read_wtns, _wtns_bytes([1, R, 3]), "not a canonical")
    _expect(tmp_path, F.read_wtns, _wtns_bytes([1, 9, 3], prime=F.BN254_R), "not BLS12-381")
    _expect(tmp_path, lambda p: F.read_wtns(p, 4), _wtns_bytes([1, 9, 3]), "3 values")


def test_damaged_zkey(built, tmp_path):
    d, _ = built
    data = (d / "t.zkey").read_bytes()
    _expect(tmp_path, F.read_zkey, b"zkez" + data[4:], "bad magic")
    _expect(tmp_path, F.read_zkey, data[:len(data) // 2], "truncated")
    _expect(tmp_path, F.read_zkey, data[:4] + struct.pack("<I", 2) + data[8:], "version 2")
    off = _offsets(data)
    bad = bytearray(data)
    bad[off[2] + 4] ^= 1                                 # the base-field prime q (after n8q)
    _expect(tmp_path, F.read_zkey, bytes(bad), "not BLS12-381")
    bad = bytearray(data)
    bad[off[9] + 7] ^= 0x10                              # the first H point's x: off the curve
    _expect(tmp_path, F.read_zkey, bytes(bad), "H: point 0 is not on G1")
    bad = bytearray(data)
    bad[off[1]] = 2                                      # protocol 2
    _expect(tmp_path, F.read_zkey, bytes(bad), "plonk")
    bad = bytearray(data)
    bad[off[9] + 40:off[9] + 48] = b"\xff" * 8              # x ≥ q
    _expect(tmp_path, F.read_zkey, bytes(bad), "H coordinate 0 is not a canonical")


def _offsets(data):
    """Section type -> payload offset (walking the table independently)."""
    (n,) = struct.unpack_from("<I", data, 8)
    pos, out = 12, {}
    for _ in range(n):
        typ, size = struct.unpack_from("<IQ", data, pos)
        out[typ] = pos + 12
        pos += 12 + size
    return out
