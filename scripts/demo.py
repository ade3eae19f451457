"""The main job until the prover lands: real BLS12-381 work, checked.

Draws secret-quality random scalars (``secrets``, a CSPRNG; ``--seed`` gives a
reproducible run for tests only), computes s_i·G for G1 and G2 by fixed-base
multiplication on the default JAX device, sums them, checks a sample of the
products and the sum against py_ecc (an independent pure-Python
implementation), round-trips them through the compressed encoding, and prints
timings.  Exits non-zero if any check fails.

    python3 scripts/demo.py [--n1 512] [--n2 64] [--check 4] [--seed S]
"""
from __future__ import annotations

import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("n1", 512, "G1 scalar multiplications", lower_bound=1)
flags.DEFINE_integer("n2", 64, "G2 scalar multiplications", lower_bound=1)
flags.DEFINE_integer("check", 4, "products checked against py_ecc", lower_bound=0)
flags.DEFINE_integer("window", 4, "fixed-base window bits", lower_bound=1, upper_bound=12)
flags.DEFINE_integer("seed", None, "deterministic scalars (tests only; default: CSPRNG)")
flags.DEFINE_bool("cache", True, "use the persistent compilation cache")


def run_curve(C, ref_gen, n: int, rng, to_ints):
    import jax
    import jax.numpy as jnp
    from py_ecc import bls12_381 as b

    from ops import encoding
    from ops.field import Fr

    ks = Fr.random_ints(n, rng)
    s = jnp.asarray(Fr.from_int(ks))
    t = time.perf_counter()
    P = jax.block_until_ready(C.fixed_base_mul(C.generator_affine(), s, FLAGS.window))
    t_first = time.perf_counter() - t
    t = time.perf_counter()
    P = jax.block_until_ready(C.fixed_base_mul(C.generator_affine(), s, FLAGS.window))
    t_mul = time.perf_counter() - t
    # the sum of the batch, one complete addition per point (one compiled step)
    acc, _ = jax.lax.scan(lambda a, p: (C.add(a, p), None), C.identity(),
                          jnp.moveaxis(P, -1, 0))
    total = C.to_affine_ints(acc)
    ok = total == to_ints(b.multiply(ref_gen, sum(ks) % Fr.p))
    pts = C.to_affine_ints(P)
    idx = list(range(min(FLAGS.check, n)))
    ok &= all(pts[i] == to_ints(b.multiply(ref_gen, ks[i])) for i in idx)
    enc = encoding.encode_ints(C, pts[:8])
    back = C.to_affine_ints(encoding.decode(C, b"".join(enc)), projective=False)
    ok &= back == pts[:8]
    print(f"{C.name}: {n} fixed-base multiplications in {t_mul * 1e3:.1f} ms "
          f"({n / t_mul:,.0f}/s; first call with compile {t_first:.1f} s); sum and "
          f"{len(idx)} products match py_ecc: {ok}; first point compressed: {enc[0].hex()[:32]}...")
    return ok


def main(argv):
    del argv
    import jax

    from ops.curve import G1, G2
    if FLAGS.cache:
        from jaxprove.cache import enable_compilation_cache
        enable_compilation_cache()
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind} ({jax.default_backend()})")
    rng = random.Random(FLAGS.seed) if FLAGS.seed is not None else None
    g1_ints = lambda p: None if p is None else (int(p[0]), int(p[1]))
    g2_ints = lambda p: None if p is None else tuple(tuple(int(c) for c in v.coeffs) for v in p)
    from py_ecc import bls12_381 as b
    ok = run_curve(G1, b.G1, FLAGS.n1, rng, g1_ints)
    ok &= run_curve(G2, b.G2, FLAGS.n2, rng, g2_ints)
    print("ALL CHECKS PASSED" if ok else "CHECK FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    app.run(main)
