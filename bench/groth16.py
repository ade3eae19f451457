"""Groth16 end-to-end benchmark (issue 5): full proofs with the stage breakdown.

For each size 2^k (``--sizes``) one circuit with at most 2^k R1CS rows is
recorded, extracted (PCE), set up on the device (keys, matrices and the NTT
domain stay resident), its witness computed by the
jitted witness function, and proved ``--reps`` times after a warm-up with keys
and matrices resident on the device; the first proof's extra time over the
median is reported as compile time.  The last proof is verified with our
pairing on the host CPU (``verified``).  Circuits (``--circuit``):

* ``sha256``: n free 512-bit blocks hashed by bellperson's SHA-256 compression
  (26,352 rows each), block 0's digest packed into 2 public inputs.  Almost
  every witness value is a bit, as in Filecoin's circuits, so the A, B and L
  MSMs see 0/1 scalars (one entry per set bit) and only H is a full MSM;
* ``dense``: n secret x_i with x_i², x_i³ (2 rows each): every witness value
  uniformly random, the worst case for the MSMs (A, B_G1, B_G2 and L full).

One JSON record per size (bench/common.py fields) with the rows, domain,
variables, seconds for record / extract / setup / witness, the proof's
per-stage medians (spmv, ntt, msm_g1, msm_g2, combine: see
``groth16.prove``) and total median/min/max, and the device's peak bytes in use; then a
``.verify`` record once the last proof has been checked by our verifier
(``--verify-on cpu``, the default: on the host CPU; ``default``: on the
default device, e.g. the GPU), with the first call's seconds (compiles) and
the median of ``--reps`` further verifications.

    python -m bench.groth16 --sizes 16,20 --out bench/results/groth16_h200.jsonl
    python -m bench.groth16 --sizes 24 --out bench/results/groth16_h200.jsonl

Goals (issue 5): 2^20 constraints <= 0.25 s and 2^24 <= 1.5 s per proof with
keys resident on the H200.  Anchor (research/perf-anchors.md): cuzk's 32GiB
PoRep partition (2^27) ~3.7 s of GPU time per partition on an RTX 5070 Ti.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from bench.common import argv_command, emit, environment, peak_memory_bytes
from circuits import cs as C
from circuits.gadgets import boolean as Bo
from circuits.gadgets import multipack as MP
from circuits.gadgets import sha256 as S
from circuits.gadgets.num import Num
from jaxprove import groth16 as G
from jaxprove import pce
from ops import ntt as N
from ops.field import Fr

GOALS = {20: 0.25, 24: 1.5}
SHA_ROWS = 512 + 25_840          # alloc_bits of one block + one compression


def sha_blocks(cs, bits, n):
    """n free blocks compressed; block 0's digest public. bits: uint32 (n, 512)."""
    x = Bo.alloc_bits(cs, (n, 512), None if cs.recording else (lambda: bits))
    d = S.block_no_padding(cs, x)
    MP.pack_into_inputs(cs, d[0])


def dense(cs, x, n):
    """x_i, x_i², x_i³ for n secret x_i (all aux). x: Fr (8, n)."""
    xs = Num.alloc(cs, (n,), None if cs.recording else (lambda: x))
    xs.square(cs).mul(cs, xs)


def circuit_for(kind: str, log_rows: int):
    """(circuit fn, static n, random input builder) with rows <= 2^log_rows."""
    budget = 1 << log_rows
    if kind == "sha256":
        n = max(1, (budget - 3) // SHA_ROWS)

        def inputs(key):
            return jax.random.bernoulli(key, 0.5, (1, n, 512)).astype(jnp.uint32)
        return sha_blocks, n, inputs
    n = max(1, (budget - 1) // 2)

    def inputs(key):
        x = jax.random.bits(key, (8, 1, n), jnp.uint32)
        return x.at[7].set(x[7] & jnp.uint32(0x0FFFFFFF))      # < r: a valid Montgomery form
    return dense, n, inputs


def _say(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def save_for_snarkjs(directory: str, vk, proof, public):
    """verification_key.json, proof.json and public.json of the batch's first
    proof, so `snarkjs groth16 verify` can check a GPU proof on another
    machine.  vk_alphabeta_12 (unused by snarkjs's verifier; a pairing, whose
    first GPU compile takes minutes) is written as an empty list."""
    from jaxprove import formats as F
    os.makedirs(directory, exist_ok=True)
    one = G.Proof(proof.a.reshape(2, 12, -1)[..., 0], proof.b.reshape(2, 2, 12, -1)[..., 0],
                  proof.c.reshape(2, 12, -1)[..., 0])
    F.write_verification_key_json(os.path.join(directory, "verification_key.json"), vk, alphabeta=[])
    F.write_proof_json(os.path.join(directory, "proof.json"), one)
    F.write_public_json(os.path.join(directory, "public.json"), public)


def run(kind: str, log_rows: int, reps: int, env: dict, out: str | None, verify: bool = True,
        save: str | None = None, verify_on: str = "cpu"):
    fn, n, inputs = circuit_for(kind, log_rows)
    _say(f"{kind} 2^{log_rows}: recording n={n}")
    rec = {"case": f"groth16.{kind}", "log_rows_max": log_rows, "n": n, "command": argv_command(),
           "goal_s": GOALS.get(log_rows), **env}
    t = time.perf_counter()
    r1cs = C.record(fn, n, name=f"bench_{kind}")
    rec["record_s"] = time.perf_counter() - t
    _say(f"recorded in {rec['record_s']:.1f} s; extracting")
    t = time.perf_counter()
    m = pce.extract(r1cs)
    jax.block_until_ready(m)
    rec["extract_s"] = time.perf_counter() - t
    rec.update(rows=m.rows, domain_log=G.domain_log(m.rows), num_vars=m.num_vars,
               num_inputs=m.num_inputs, nnz=list(m.nnz))
    stages = {}
    _say(f"extracted in {rec['extract_s']:.1f} s; setup of {m.rows} rows")

    def progress(stage, sec):
        stages[stage] = round(sec, 3)
        _say(f"setup: {stage} at {sec:.1f} s")

    t = time.perf_counter()
    pk, vk = G.setup(r1cs, progress=progress)
    jax.block_until_ready(pk)
    rec["setup_s"] = time.perf_counter() - t
    rec["setup_stages_cumulative_s"] = stages
    del r1cs
    x = inputs(jax.random.PRNGKey(log_rows))
    wf = C.witness_fn(fn, n, in_axes=1 if kind == "dense" else 0)
    t = time.perf_counter()
    w = jax.block_until_ready(wf(x)[0])
    rec["witness_first_s"] = time.perf_counter() - t
    t = time.perf_counter()
    w = jax.block_until_ready(wf(x)[0])
    rec["witness_s"] = time.perf_counter() - t
    _say(f"witness {rec['witness_s']:.3f} s; first proof (compiles)")
    dom = N.domain(G.domain_log(m.rows))          # resident with the keys
    pos = G.msm_positions(m)
    t = time.perf_counter()
    G.prove(pk, m, w, domain=dom, positions=pos)
    first = time.perf_counter() - t
    _say(f"first proof {first:.1f} s; timing {reps}")
    totals, per_stage = [], {}
    for _ in range(reps):
        proof, times = G.prove(pk, m, w, domain=dom, positions=pos)
        totals.append(times["total"])
        for k, v in times.items():
            per_stage.setdefault(k, []).append(v)
        _say(f"proof {times['total']:.3f} s")
    med = statistics.median(totals)
    rec.update(median_s=med, min_s=min(totals), max_s=max(totals), reps=reps,
               compile_s=max(first - med, 0.0),
               stages_median_s={k: statistics.median(v) for k, v in per_stage.items()})
    rec["peak_bytes"] = peak_memory_bytes()
    emit(rec, out)
    pub = Fr.to_int(np.asarray(w[:, :, 1:m.num_inputs]))
    if save:
        save_for_snarkjs(os.path.join(save, f"{kind}_{log_rows}"), vk, proof, [int(v) for v in pub[0]])
    if verify:
        # verified after the timing record is written; by default on the host CPU (before
        # the pairing ran as product rounds, its first GPU compile took over 4 minutes)
        device = jax.devices("cpu")[0] if verify_on == "cpu" else None
        where = "host CPU" if device is not None else jax.devices()[0].platform
        _say(f"verifying (pairing, {where})")
        public = [[int(v) for v in row] for row in pub]
        check = lambda: bool(np.all(np.asarray(G.verify(vk, public, proof, device))))
        t = time.perf_counter()
        ok = check()
        first = time.perf_counter() - t
        times = []
        for _ in range(reps if ok else 0):
            t = time.perf_counter()
            ok = check() and ok
            times.append(time.perf_counter() - t)
        emit({"case": f"groth16.{kind}.verify", "log_rows_max": log_rows, "verified": ok,
              "verify_device": "cpu" if device is not None else where, "verify_first_s": first,
              "batch": int(np.prod(proof.a.shape[2:])), "reps": len(times),
              **({"median_s": statistics.median(times), "min_s": min(times),
                  "max_s": max(times)} if times else {}),
              "command": argv_command(), **env}, out)
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="16,20", help="log2 of the most R1CS rows, comma-separated")
    ap.add_argument("--circuit", choices=["sha256", "dense"], default="sha256")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=None, help="append JSON records here")
    ap.add_argument("--cache", action="store_true", help="persistent compilation cache")
    ap.add_argument("--no-verify", action="store_true", help="skip the final verification")
    ap.add_argument("--verify-on", choices=["cpu", "default"], default="cpu",
                    help="verify on the host CPU or on the default device (the GPU)")
    ap.add_argument("--save", default=None,
                    help="write snarkjs verification_key/proof/public JSON under DIR/<circuit>_<size>")
    a = ap.parse_args()
    if a.cache:
        from jaxprove.cache import enable_compilation_cache
        enable_compilation_cache()
    env = environment()
    for k in [int(s) for s in a.sizes.split(",") if s]:
        run(a.circuit, k, a.reps, env, a.out, not a.no_verify, a.save, a.verify_on)


if __name__ == "__main__":
    main()
