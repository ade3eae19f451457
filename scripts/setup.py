"""Groth16 setup: proving and verifying keys for a built-in circuit or a circom .r1cs.

Records the circuit (or reads the .r1cs, BLS12-381), draws the toxic waste
from the CSPRNG, computes the keys (``jaxprove.groth16.setup``: QAP at τ on
the host, point multiplications on the default JAX device), and writes them
under ``--out``:

* ``<key>/``: our keys (orbax, checksummed, atomic: ``groth16.save_keys``);
* with ``--params``: ``<key>.params``, bellperson's parameter file
  (``jaxprove.params``, density checked against the circuit);
* with ``--snarkjs_vk``: ``<key>.verification_key.json``, snarkjs's
  verifying key (``jaxprove.formats``).

    python3 scripts/setup.py --out keys [--circuit sha256|cubic] [--cubes 64]
                             [--r1cs c.r1cs] [--key NAME] [--params] [--snarkjs_vk]

Progress (each setup stage with its time) is printed as it goes.  ``--seed``
makes the toxic waste deterministic: for tests only, never for real keys.
"""
from __future__ import annotations

import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_enum("circuit", None, ["sha256", "cubic"],
                  "built-in circuit (default: sha256 on a GPU, cubic elsewhere)")
flags.DEFINE_integer("cubes", 64, "values of the cubic circuit", lower_bound=1)
flags.DEFINE_string("r1cs", None, "a circom .r1cs (BLS12-381) instead of a built-in circuit")
flags.DEFINE_string("out", None, "directory for the keys")
flags.DEFINE_string("key", None, "name of the keys in --out (default: from the circuit's name)")
flags.DEFINE_bool("params", False, "also write <key>.params (bellperson's layout)")
flags.DEFINE_bool("snarkjs_vk", False, "also write <key>.verification_key.json (snarkjs)")
flags.DEFINE_integer("seed", None, "deterministic toxic waste (tests only: insecure)")
flags.DEFINE_bool("cache", True, "use the persistent compilation cache")
flags.mark_flag_as_required("out")


def _circuit():
    """(R1CS, default key name) for the flags."""
    import jax

    from circuits import cs as C
    from circuits import examples as E
    from jaxprove import formats

    if FLAGS.r1cs:
        if FLAGS.circuit:
            raise app.UsageError("give either --circuit or --r1cs, not both")
        r1cs = formats.read_r1cs(FLAGS.r1cs)
        return r1cs, os.path.splitext(os.path.basename(FLAGS.r1cs))[0]
    circuit = FLAGS.circuit or ("sha256" if jax.default_backend() == "gpu" else "cubic")
    if circuit == "sha256":
        return C.record(E.sha256_preimage, 64, name="sha256(64,)"), "sha256-64"
    return C.record(E.cubic, FLAGS.cubes, name=f"cubic({FLAGS.cubes},)"), f"cubic-{FLAGS.cubes}"


def main(argv) -> int:
    del argv
    import jax

    from jaxprove import formats
    from jaxprove import groth16 as G
    from jaxprove import params as PR
    from jaxprove import pce

    if FLAGS.cache:
        from jaxprove.cache import enable_compilation_cache
        enable_compilation_cache()
    t0 = time.perf_counter()
    r1cs, default_key = _circuit()
    key = FLAGS.key or default_key
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", key) or key.startswith("."):
        raise app.UsageError(f"--key {key!r}: use letters, digits, '_', '.', '-'")
    print(f"circuit {r1cs.name}: {r1cs.num_constraints} constraints, {r1cs.num_inputs} inputs "
          f"(ONE included), {r1cs.num_aux} aux; device {jax.devices()[0].device_kind}", flush=True)
    if FLAGS.seed is not None:
        print("WARNING: --seed makes the toxic waste predictable; these keys are for tests only",
              flush=True)

    def progress(stage, seconds):
        print(f"setup: {stage} done at {seconds:.2f} s", flush=True)

    pk, vk = G.setup(r1cs, seed=FLAGS.seed, progress=progress)
    os.makedirs(FLAGS.out, exist_ok=True)
    written = [G.save_keys(pk, vk, FLAGS.out, key)]
    if FLAGS.params:
        path = os.path.join(FLAGS.out, f"{key}.params")
        n = PR.write_params(path, pk, vk, pce.extract(r1cs))
        written.append(f"{path} ({n} bytes)")
    if FLAGS.snarkjs_vk:
        path = os.path.join(FLAGS.out, f"{key}.verification_key.json")
        formats.write_verification_key_json(path, vk)
        written.append(path)
    for w in written:
        print(f"wrote {w}", flush=True)
    print(f"setup of {r1cs.name} finished in {time.perf_counter() - t0:.2f} s")
    return 0


if __name__ == "__main__":
    app.run(lambda argv: sys.exit(main(argv)))
