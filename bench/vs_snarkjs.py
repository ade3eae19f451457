"""jaxprove against snarkjs on the same circom circuit, one after the other (issue 5).

Builds a circom circuit of ``--constraints`` multiplications (a chain
t_{i+1} = t_i² + i, BLS12-381), a snarkjs Groth16 setup (powers of tau of the
next power of two, one contribution each phase), the witness with circom's
generator, then times ``--reps`` proofs of each prover after one warm-up:

* ``snarkjs groth16 prove t.zkey w.wtns`` (a node process per proof, as its
  users run it; the process start is included and reported apart as
  ``node_start_s``, the time of ``snarkjs --version``);
* ``jaxprove.formats.prove_snarkjs`` with the same .zkey/.wtns (keys and
  matrices resident in the process; compile time reported apart).

Both proofs are verified by ``snarkjs groth16 verify``.  One JSON record with
the medians and ``ratio`` = jaxprove / snarkjs (goal, issue 5: ≤ 1 on the CPU).
npm packages as in tests/test_formats.py (``$JAXPROVE_NPM``, default
~/.cache/jaxprove/npm).

    python3 -m bench.vs_snarkjs --constraints 1024 --out bench/results/vs_snarkjs_cpu.jsonl
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import jax

from bench.common import argv_command, emit, environment
from jaxprove import formats as F
from jaxprove import pce

NPM_DIR = Path(os.environ.get("JAXPROVE_NPM", Path.home() / ".cache" / "jaxprove" / "npm"))
PACKAGES = ["snarkjs@0.7.6", "circom2@0.2.23", "circomlib@2.0.5"]
CIRCUIT = """pragma circom 2.0.0;
template Chain(n) {
    signal input x;
    signal output y;
    signal t[n + 1];
    t[0] <== x;
    for (var i = 0; i < n; i++) {
        t[i + 1] <== t[i] * t[i] + i;
    }
    y <== t[n];
}
component main = Chain(%d);
"""


def tools() -> tuple[str, str]:
    """snarkjs and circom2 paths, installed once with npm."""
    b = NPM_DIR / "node_modules" / ".bin"
    if not ((b / "snarkjs").exists() and (b / "circom2").exists()):
        if not shutil.which("npm"):
            raise SystemExit("vs_snarkjs: needs node and npm")
        NPM_DIR.mkdir(parents=True, exist_ok=True)
        if not (NPM_DIR / "package.json").exists():
            (NPM_DIR / "package.json").write_text('{"name": "jaxprove-npm", "private": true}\n')
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", *PACKAGES], cwd=NPM_DIR,
                       check=True, capture_output=True, timeout=600)
    return str(b / "snarkjs"), str(b / "circom2")


def sh(args, cwd, timeout=1800):
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=True)


def build(d: Path, n: int, snarkjs: str, circom: str):
    (d / "t.circom").write_text(CIRCUIT % n)
    (d / "input.json").write_text(json.dumps({"x": "3"}))
    power = max(4, (n + 2).bit_length())
    sh([circom, "t.circom", "--r1cs", "--wasm", "--O1", "--prime", "bls12381", "-o", "."], d)
    sh(["node", "t_js/generate_witness.js", "t_js/t.wasm", "input.json", "w.wtns"], d)
    sh([snarkjs, "powersoftau", "new", "bls12381", power, "p0.ptau"], d)
    sh([snarkjs, "powersoftau", "contribute", "p0.ptau", "p1.ptau", "--name=a", "-e=jaxprove"], d)
    sh([snarkjs, "powersoftau", "prepare", "phase2", "p1.ptau", "p.ptau"], d)
    sh([snarkjs, "groth16", "setup", "t.r1cs", "p.ptau", "t0.zkey"], d)
    sh([snarkjs, "zkey", "contribute", "t0.zkey", "t.zkey", "--name=b", "-e=jaxprove"], d)
    sh([snarkjs, "zkey", "export", "verificationkey", "t.zkey", "vk.json"], d)


def verify(snarkjs: str, d: Path) -> bool:
    r = subprocess.run([snarkjs, "groth16", "verify", "vk.json", "public.json", "proof.json"],
                       cwd=d, capture_output=True, text=True, timeout=600)
    return r.returncode == 0 and "OK" in r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--constraints", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    snarkjs, circom = tools()
    env = environment()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        build(d, a.constraints, snarkjs, circom)
        t = time.perf_counter()
        subprocess.run([snarkjs, "--version"], cwd=d, capture_output=True, timeout=120)
        node_start = time.perf_counter() - t
        sj = []
        for i in range(a.reps + 1):
            t = time.perf_counter()
            sh([snarkjs, "groth16", "prove", "t.zkey", "w.wtns", "proof.json", "public.json"], d)
            if i:
                sj.append(time.perf_counter() - t)
        sj_ok = verify(snarkjs, d)
        z = F.read_zkey(d / "t.zkey")
        r1cs = F.read_r1cs(d / "t.r1cs")
        w = F.read_wtns(d / "w.wtns", r1cs.num_vars)
        m = pce.extract(r1cs)
        t = time.perf_counter()
        jax.block_until_ready(F.prove_snarkjs(z, m, w))
        first = time.perf_counter() - t
        jp = []
        for _ in range(a.reps):
            t = time.perf_counter()
            proof = jax.block_until_ready(F.prove_snarkjs(z, m, w))
            jp.append(time.perf_counter() - t)
        F.write_proof_json(d / "proof.json", proof)
        F.write_public_json(d / "public.json", w[:, 1:1 + z.num_public])
        jp_ok = verify(snarkjs, d)
    rec = {"case": "groth16.vs_snarkjs", "constraints": a.constraints, "rows": m.rows,
           "snarkjs_median_s": statistics.median(sj), "snarkjs_min_s": min(sj),
           "snarkjs_max_s": max(sj), "node_start_s": node_start, "snarkjs_verified": sj_ok,
           "median_s": statistics.median(jp), "min_s": min(jp), "max_s": max(jp),
           "compile_s": max(first - statistics.median(jp), 0.0), "jaxprove_verified": jp_ok,
           "ratio": statistics.median(jp) / statistics.median(sj), "reps": a.reps,
           "goal": "jaxprove no slower than snarkjs on the CPU (ratio <= 1)",
           "command": argv_command(), **env}
    emit(rec, a.out)


if __name__ == "__main__":
    main()
