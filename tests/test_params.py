"""bellperson .params files (jaxprove.params) and scripts/setup.py.

Oracles: the file layout walked by hand here from research/filecoin-circuits.md
§4 (u32 big-endian counts, big-endian uncompressed coordinates, G2 as
c1 ‖ c0), the density computed here from the R1CS's CSR columns (not from
``pce.Matrices``), points outside the subgroup found with py_ecc (conftest),
and ``snarkjs groth16 verify`` for a proof made with a read-back key (our
setup's verification_key.json, proof.json and public.json as jaxprove writes
them; marked slow: the CPU compiles of the prover's MSMs and of the pairing
take minutes; skips without node, like tests/test_formats.py).
"""
from __future__ import annotations

import importlib.util
import json
import random
import struct
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from circuits import cs as C
from circuits import examples as E
from conftest import P, R, find_non_subgroup_points
from jaxprove import formats as F
from jaxprove import groth16 as G
from jaxprove import params as PR
from jaxprove import pce
from ops.curve import G1, G2
from ops.field import Fr

K = 4                       # cubic circuit: 4 values, 16 constraints, 5 inputs, 16 aux
SEED = 1


@pytest.fixture(scope="module", autouse=True)
def _two_subgroup_chunks():
    """The file's ~120 G1 points are checked in two chunks of 64 (the chunked
    path, still one compiled shape per curve)."""
    old, PR.SUBGROUP_CHUNK = PR.SUBGROUP_CHUNK, 64
    yield
    PR.SUBGROUP_CHUNK = old


@pytest.fixture(scope="module")
def keys():
    r1cs = C.record(E.cubic, K, name="cubic")
    pk, vk = G.setup(r1cs, seed=SEED)
    return r1cs, pce.extract(r1cs), pk, vk


@pytest.fixture(scope="module")
def written(keys, tmp_path_factory):
    _, m, pk, vk = keys
    path = tmp_path_factory.mktemp("params") / "cubic.params"
    n = PR.write_params(path, pk, vk, m)
    data = path.read_bytes()
    assert n == len(data)
    return path, data


def _used(csr, lo, hi):
    cols = np.asarray(csr.cols)
    return np.isin(np.arange(lo, hi), cols)


def _g1_xy(arr, j=None):
    pt = G1.to_affine_ints(arr if j is None else arr[..., j], projective=False)
    return pt[0].to_bytes(48, "big") + pt[1].to_bytes(48, "big")


def _g2_xy(arr, j=None):
    (x0, x1), (y0, y1) = G2.to_affine_ints(arr if j is None else arr[..., j], projective=False)
    return b"".join(v.to_bytes(48, "big") for v in (x1, x0, y1, y0))


def test_layout_by_hand(keys, written):
    """Walk the file as §4 describes it and compare every point's bytes."""
    r1cs, _, pk, vk = keys
    _, data = written
    n_in, n_aux = r1cs.num_inputs, r1cs.num_aux
    dens_a = np.concatenate([np.ones(n_in, bool), _used(r1cs.a, n_in, r1cs.num_vars)])
    dens_b = _used(r1cs.b, 0, r1cs.num_vars)
    assert dens_a.sum() < r1cs.num_vars and 0 < dens_b.sum() < r1cs.num_vars   # compression shows
    m = 1 << (r1cs.num_rows - 1).bit_length()
    pos = 0

    def take(n):
        nonlocal pos
        pos += n
        return data[pos - n:pos]

    assert take(96) == _g1_xy(pk.alpha_g1) and take(96) == _g1_xy(pk.beta_g1)
    assert take(192) == _g2_xy(pk.beta_g2) and take(192) == _g2_xy(vk.gamma_g2)
    assert take(96) == _g1_xy(pk.delta_g1) and take(192) == _g2_xy(pk.delta_g2)
    assert pos == 864
    for name, arr, idx, g2 in (("ic", vk.ic, range(n_in), False), ("h", pk.h, range(m - 1), False),
                               ("l", pk.l, range(n_aux), False),
                               ("a", pk.a, np.flatnonzero(dens_a), False),
                               ("b_g1", pk.b_g1, np.flatnonzero(dens_b), False),
                               ("b_g2", pk.b_g2, np.flatnonzero(dens_b), True)):
        assert struct.unpack(">I", take(4))[0] == len(idx), name
        for j in idx:
            assert take(192 if g2 else 96) == (_g2_xy if g2 else _g1_xy)(arr, int(j)), (name, j)
    assert pos == len(data)
    # the dropped A/B queries are exactly the identity (0, 0) in our key
    assert not np.asarray(pk.a)[..., ~dens_a].any() and not np.asarray(pk.b_g2)[..., ~dens_b].any()


def test_round_trip_is_identity(keys, written):
    _, m, pk, vk = keys
    path, _ = written
    pk2, vk2 = PR.read_params(path, m)
    for f in G.ProvingKey._fields:
        assert np.array_equal(np.asarray(getattr(pk, f)), np.asarray(getattr(pk2, f))), f
    for f in G.VerifyingKey._fields:
        assert np.array_equal(np.asarray(getattr(vk, f)), np.asarray(getattr(vk2, f))), f
    assert [p.name for p in path.parent.iterdir()] == [path.name]        # no temporaries left


@pytest.mark.slow
def test_read_back_key_proves_and_snarkjs_verifies(keys, written, tmp_path):
    """Our setup, through the .params file, proves; snarkjs accepts the proof
    with our verification_key.json (and so does our verifier)."""
    from test_formats import _run, _tools
    r1cs, m, _, _ = keys
    path, _ = written
    pk, vk = PR.read_params(path, m)
    xs = [random.Random(7).randrange(R) for _ in range(K)]
    ys = E.cubic_public(xs, R)
    w = C.witness(E.cubic, jnp.asarray(Fr.from_int([xs])), K, in_axes=1)     # batch of one
    proof, _ = G.prove(pk, m, w)
    one = jax.tree.map(lambda x: x[..., 0], proof)
    assert G.verify(vk, ys, one) and not G.verify(vk, [(ys[0] + 1) % R] + ys[1:], one)
    tools = _tools()
    if tools is None:
        pytest.skip("node/npm or the snarkjs npm package is not available")
    F.write_verification_key_json(tmp_path / "vk.json", vk)
    F.write_proof_json(tmp_path / "proof.json", one)
    F.write_public_json(tmp_path / "public.json", w[:, 0, 1:K + 1])
    assert json.loads((tmp_path / "public.json").read_text()) == [str(y) for y in ys]
    verify = [tools[0], "groth16", "verify", "vk.json", "public.json", "proof.json"]
    ok = _run(verify, tmp_path, check=False)
    assert ok.returncode == 0 and "OK" in ok.stdout, ok.stdout + ok.stderr
    bad = [str((ys[0] + 1) % R)] + [str(y) for y in ys[1:]]
    (tmp_path / "public.json").write_text(json.dumps(bad))
    assert _run(verify, tmp_path, check=False).returncode != 0


# ---------------------------------------------------------------- damaged files
def _expect(data, match, tmp_path):
    p = tmp_path / "bad.params"
    p.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=match) as e:
        PR.read_params_file(p)
    assert str(p) in str(e.value)


def _offset(data, field):
    """Byte offset of a vector's u32 count (walking the counts)."""
    pos = 864
    for f, c in PR.VECTORS:
        if f == field:
            return pos
        (n,) = struct.unpack_from(">I", data, pos)
        pos += 4 + n * (96 if c is G1 else 192)
    raise KeyError(field)


def test_damaged_files(written, tmp_path):
    _, data = written
    h0, l0 = _offset(data, "h") + 4, _offset(data, "l") + 4
    _expect(data[:-1], "truncated in b_g2", tmp_path)
    _expect(data[:500], "truncated in gamma_g2", tmp_path)
    _expect(data[:h0 - 2], r"truncated in h \(count\)", tmp_path)
    _expect(data + b"\0", "1 bytes after the last vector", tmp_path)
    bad = bytearray(data)
    bad[h0 - 4:h0] = struct.pack(">I", 10 ** 6)
    _expect(bad, "truncated in h: 1000000 points declared", tmp_path)
    bad = bytearray(data)
    bad[h0 + 95] ^= 1                                     # h[0].y: off the curve
    _expect(bad, "h: G1: point 0: point is not on the curve", tmp_path)
    bad = bytearray(data)
    bad[l0 + 96:l0 + 144] = P.to_bytes(48, "big")         # l[1].x = p
    _expect(bad, "l: G1: point 1: coordinate not canonical", tmp_path)
    bad = bytearray(data)
    bad[l0:l0 + 96] = b"\x40" + bytes(95)                 # l[0] = infinity
    _expect(bad, "l: point 0 is the point at infinity", tmp_path)
    bad = bytearray(data)
    bad[0] |= 0x80                                        # compressed flag on α₁
    _expect(bad, "alpha_g1: G1: point 0: compression flag", tmp_path)


def test_points_outside_the_subgroup(written, tmp_path):
    _, data = written
    x, y = find_non_subgroup_points(G1, 1)[0]
    for field, i in (("l", 2), ("a", 10)):               # G1 points 41 and 65: both chunks
        o = _offset(data, field) + 4 + i * 96
        bad = bytearray(data)
        bad[o:o + 96] = x.to_bytes(48, "big") + y.to_bytes(48, "big")
        _expect(bad, f"{field}: point {i} is not in the prime-order subgroup", tmp_path)
    (x0, x1), (y0, y1) = find_non_subgroup_points(G2, 1)[0]
    bad = bytearray(data)
    bad[-192:] = b"".join(v.to_bytes(48, "big") for v in (x1, x0, y1, y0))
    n_b = struct.unpack_from(">I", data, _offset(data, "b_g2"))[0]
    _expect(bad, f"b_g2: point {n_b - 1} is not in the prime-order subgroup", tmp_path)


def test_lengths_against_each_other_and_the_circuit(keys, written, tmp_path):
    _, m, pk, vk = keys
    _, data = written
    p = PR.from_bytes(data)
    _expect(PR.to_bytes(p._replace(h=p.h[..., :-1])), "h has 30 points; expected m − 1", tmp_path)
    _expect(PR.to_bytes(p._replace(b_g2=p.b_g2[..., 1:])), r"b_g1 \(\d+\) and b_g2", tmp_path)
    _expect(PR.to_bytes(p._replace(a=p.a[..., :3])), "a has 3 points; expected every input",
            tmp_path)
    other = pce.extract(C.record(E.cubic, K - 1, name="cubic3"))
    with pytest.raises(ValueError, match=r"ic has 5 points, circuit 'cubic3' needs 4"):
        PR.from_params(p, other)
    with pytest.raises(ValueError, match="key for 21 variables"):
        PR.to_params(pk, vk, other)
    holed = pk._replace(a=pk.a.at[..., K + 1].set(0))     # a dense aux variable's A query = O
    with pytest.raises(ValueError, match=f"A query of variable {K + 1} is the identity but its "
                                         "A-density is 1"):
        PR.to_params(holed, vk, m)
    with pytest.raises(ValueError, match="differ in delta_g2"):
        PR.to_params(pk, vk._replace(delta_g2=vk.gamma_g2))


# ---------------------------------------------------------------- scripts/setup.py
def _load_setup_script():
    path = Path(__file__).resolve().parents[1] / "scripts" / "setup.py"
    spec = importlib.util.spec_from_file_location("jaxprove_setup_script", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_setup_script(keys, written, tmp_path):
    """scripts/setup.py on the same circuit and seed writes the same keys and
    .params, with progress lines."""
    _, m, pk, vk = keys
    _, data = written
    script = _load_setup_script()
    lines = []
    paths = script.run(str(tmp_path), circuit="cubic", cubes=K, key="c", params=True,
                       seed=SEED, say=lines.append)
    assert paths[1:] == [str(tmp_path / "c.params")]
    stages = [line for line in lines if line.startswith("setup: ")]   # groth16.setup's stages
    assert len(stages) >= 2 and stages[0].startswith("setup: qap done at")
    assert (tmp_path / "c.params").read_bytes() == data
    pk2, vk2 = G.load_keys(str(tmp_path), "c")
    for x, y in zip(pk + vk, pk2 + vk2):
        assert np.array_equal(np.asarray(x), np.asarray(y))
    with pytest.raises(ValueError, match="not both"):
        script.run(str(tmp_path), circuit="cubic", r1cs_path="x.r1cs")


@pytest.mark.slow
def test_setup_script_subprocess(keys, written, tmp_path):
    """The command line, in its own process (a cold setup compile: slow)."""
    import subprocess
    _, _, _, vk = keys
    _, data = written
    script = Path(__file__).resolve().parents[1] / "scripts" / "setup.py"
    res = subprocess.run([sys.executable, str(script), "--circuit=cubic", f"--cubes={K}",
                          f"--seed={SEED}", f"--out={tmp_path}", "--key=c", "--params",
                          "--snarkjs_vk", "--nocache"], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "setup: qap done at" in res.stdout and "WARNING: a seeded setup" in res.stdout
    assert (tmp_path / "c.params").read_bytes() == data
    doc = json.loads((tmp_path / "c.verification_key.json").read_text())
    ic = G1.to_affine_ints(vk.ic, projective=False)
    assert doc["nPublic"] == K and doc["IC"] == [[str(x), str(y), "1"] for x, y in ic]
    bad = subprocess.run([sys.executable, str(script), f"--out={tmp_path}", "--circuit=cubic",
                          "--r1cs=x.r1cs", "--nocache"], capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode == 1 and "FAILED: give either" in bad.stderr
