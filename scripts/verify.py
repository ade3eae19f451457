"""Verify snarkjs-format Groth16 proofs (BLS12-381) with jaxprove's pairing.

    python3 scripts/verify.py --vk verification_key.json --proof proof.json --public public.json

Reads the three JSON files snarkjs writes, plain or gzipped (and ``bench.groth16 --save``,
``bench.filecoin --save`` and ``jaxprove.formats`` write), checks every point
is on its curve, and evaluates e(A, B) = e(α, β)·e(IC(x), γ)·e(C, δ).  Prints
one JSON line ``{"verified": bool, "seconds": ...}`` and exits 0 only if the
proof verifies (1 if it does not, 2 on unreadable input).  Runs on the JAX
default device; the first call compiles the pairing (~40 s on a CPU).
"""
from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("vk", None, "snarkjs verification_key.json", required=True)
flags.DEFINE_string("proof", None, "snarkjs proof.json", required=True)
flags.DEFINE_string("public", None, "snarkjs public.json", required=True)
flags.DEFINE_bool("cache", True, "use the persistent compilation cache")


def main(argv):
    del argv
    from jaxprove import formats as F
    from jaxprove import groth16 as G

    if FLAGS.cache:
        from jaxprove.cache import enable_compilation_cache
        enable_compilation_cache()
    try:
        vk = F.read_verification_key_json(FLAGS.vk)
        proof = F.read_proof_json(FLAGS.proof)
        public = F.read_public_json(FLAGS.public)
        if len(public) != vk.ic.shape[-1] - 1:
            raise ValueError(f"{FLAGS.public}: {len(public)} public signals, the key expects "
                             f"{vk.ic.shape[-1] - 1}")
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    t = time.perf_counter()
    ok = bool(G.verify(vk, public, proof))
    print(json.dumps({"verified": ok, "seconds": round(time.perf_counter() - t, 3)}))
    return 0 if ok else 1


if __name__ == "__main__":
    app.run(main)
