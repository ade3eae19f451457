"""The main job: a real Groth16 proof on a small built-in circuit, verified.

Records the circuit, extracts its matrices (PCE), runs a setup (toxic waste
from the CSPRNG), computes the witness for a random secret input, proves
(SpMV, NTTs, MSMs on the default JAX device), verifies the proof with the
pairing, checks the public inputs against an independent computation
(hashlib for SHA-256), writes the proofs' 192-byte compressed encodings
(written to a temporary name, then renamed) and prints per-stage timings as
JSON.  Exits non-zero if anything fails to verify.

    python3 scripts/prove.py [--circuit sha256|cubic] [--batch 1] [--out proof.bin] [--seed S]

Default circuit: ``sha256`` (knowledge of a 64-byte SHA-256 preimage, 44,876
constraints) on a GPU, ``cubic`` (64 cubes, 256 constraints) on the CPU, where the
interpreter-backed kernels are slow.  ``--seed`` makes setup, inputs and
blinding deterministic: for tests only, never for real keys.
"""
from __future__ import annotations

import json
import os
import random
import secrets
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_enum("circuit", None, ["sha256", "cubic"], "built-in circuit (default: by device)")
flags.DEFINE_integer("batch", 1, "proofs of the same circuit proved together", lower_bound=1)
flags.DEFINE_integer("cubes", 64, "values of the cubic circuit", lower_bound=1)
flags.DEFINE_string("out", None, "write the proofs' compressed encodings (192 bytes each) here")
flags.DEFINE_integer("seed", None, "deterministic setup, inputs and blinding (tests only)")
flags.DEFINE_bool("cache", True, "use the persistent compilation cache")


def main(argv):
    del argv
    import jax
    import jax.numpy as jnp
    import numpy as np

    from circuits import cs as C
    from circuits import examples as E
    from jaxprove import groth16 as G
    from jaxprove import pce
    from ops.field import Fr

    if FLAGS.cache:
        from jaxprove.cache import enable_compilation_cache
        enable_compilation_cache()
    backend = jax.default_backend()
    circuit = FLAGS.circuit or ("sha256" if backend == "gpu" else "cubic")
    rng = random.Random(FLAGS.seed) if FLAGS.seed is not None else secrets.SystemRandom()
    B = FLAGS.batch
    t0 = time.perf_counter()
    if circuit == "sha256":
        msgs = [bytes(rng.randrange(256) for _ in range(64)) for _ in range(B)]
        fn, static = E.sha256_preimage, (64,)
        inputs = jnp.stack([E.message_bits(m) for m in msgs])
        in_axes = 0
        public = [E.sha256_public(m) for m in msgs]
    else:
        xs = [[rng.randrange(Fr.p) for _ in range(FLAGS.cubes)] for _ in range(B)]
        fn, static = E.cubic, (FLAGS.cubes,)
        inputs = jnp.asarray(Fr.from_int(np.array(xs, dtype=object)))
        in_axes = 1
        public = [E.cubic_public(x, Fr.p) for x in xs]
    r1cs = C.record(fn, *static, name=f"{circuit}{static}")
    t_record = time.perf_counter() - t0
    matrices = pce.extract(r1cs)
    print(f"circuit {r1cs.name}: {r1cs.num_constraints} constraints, {r1cs.num_inputs} inputs, "
          f"{r1cs.num_aux} aux, device {jax.devices()[0].device_kind}", flush=True)
    t = time.perf_counter()
    pk, vk = G.setup(r1cs, seed=FLAGS.seed)
    t_setup = time.perf_counter() - t
    t = time.perf_counter()
    w = C.witness(fn, inputs, *static, in_axes=in_axes)
    jax.block_until_ready(w)
    t_witness = time.perf_counter() - t
    got_public = [[int(v) for v in row] for row in Fr.to_int(np.asarray(w[:, :, 1:r1cs.num_inputs]))]
    if got_public != public:
        print("FAILED: the witness's public inputs differ from the independent computation")
        return 1
    blind = None if FLAGS.seed is None else FLAGS.seed + 1
    proof, times = G.prove(pk, matrices, w, seed=blind)           # first call: includes compiles
    first_total = times["total"]
    proof, times = G.prove(pk, matrices, w, seed=blind)
    t = time.perf_counter()
    ok = np.asarray(G.verify(vk, public, proof)).reshape(-1)
    t_verify = time.perf_counter() - t
    report = {"circuit": r1cs.name, "constraints": r1cs.num_constraints, "batch": B,
              "record_s": t_record, "setup_s": t_setup, "witness_s": t_witness,
              "prove_first_call_s": first_total, "prove_s": times, "verify_s": t_verify,
              "verified": [bool(v) for v in ok]}
    print(json.dumps(report, indent=1))
    if FLAGS.out:
        enc = b"".join(G.proof_to_bytes(proof))
        tmp = f"{FLAGS.out}.tmp-{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(enc)
        os.replace(tmp, FLAGS.out)
        print(f"wrote {len(enc)} bytes to {FLAGS.out}")
    if not ok.all():
        print("FAILED: a proof did not verify")
        return 1
    print("OK: every proof verified")
    return 0


if __name__ == "__main__":
    app.run(lambda argv: sys.exit(main(argv)))
