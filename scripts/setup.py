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

from absl import app, flags, logging  # noqa: E402

FLAGS = flags.FLAGS


def define_flags():
    """Defined when run as a script only, so importing this module defines no flags."""
    flags.DEFINE_enum("circuit", None, ["sha256", "cubic"],
                      "built-in circuit (default: sha256 on a GPU, cubic elsewhere)")
    flags.DEFINE_integer("cubes", 64, "values of the cubic circuit", lower_bound=1)
    flags.DEFINE_string("r1cs", None, "a circom .r1cs (BLS12-381) instead of a built-in circuit")
    flags.DEFINE_string("out", None, "directory for the keys", required=True)
    flags.DEFINE_string("key", None, "name of the keys in --out (default: from the circuit's name)")
    flags.DEFINE_bool("params", False, "also write <key>.params (bellperson's layout)")
    flags.DEFINE_bool("snarkjs_vk", False, "also write <key>.verification_key.json (snarkjs)")
    flags.DEFINE_integer("seed", None, "deterministic toxic waste (tests only: insecure)")
    flags.DEFINE_bool("cache", True, "use the persistent compilation cache")
    flags.DEFINE_bool("host", False, "build the proving key in host memory (device holds one "
                      "chunk: for keys larger than the GPU)")


def record(circuit: str | None = None, cubes: int = 64, r1cs_path: str | None = None):
    """(R1CS, default key name): a circom .r1cs, or a built-in circuit (default:
    sha256 on a GPU, cubic elsewhere)."""
    import jax

    from circuits import cs as C
    from circuits import examples as E
    from jaxprove import formats

    if r1cs_path:
        if circuit:
            raise ValueError("give either a built-in circuit or an .r1cs, not both")
        return formats.read_r1cs(r1cs_path), os.path.splitext(os.path.basename(r1cs_path))[0]
    circuit = circuit or ("sha256" if jax.default_backend() == "gpu" else "cubic")
    if circuit == "sha256":
        return C.record(E.sha256_preimage, 64, name="sha256(64,)"), "sha256-64"
    if circuit == "cubic":
        return C.record(E.cubic, cubes, name=f"cubic({cubes},)"), f"cubic-{cubes}"
    raise ValueError(f"unknown circuit {circuit!r} (sha256, cubic)")


def run(out: str, circuit: str | None = None, cubes: int = 64, r1cs_path: str | None = None,
        key: str | None = None, params: bool = False, snarkjs_vk: bool = False,
        seed: int | None = None, say=print, host: bool = False) -> list[str]:
    """Set up the circuit and write its keys under ``out``; ``say`` gets the
    progress lines.  Returns the paths written."""
    import jax

    from jaxprove import formats
    from jaxprove import groth16 as G
    from jaxprove import params as PR
    from jaxprove import pce

    t0 = time.perf_counter()
    r1cs, default_key = record(circuit, cubes, r1cs_path)
    key = key or default_key
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", key) or key.startswith("."):
        raise ValueError(f"key {key!r}: use letters, digits, '_', '.', '-' (not leading '.')")
    say(f"circuit {r1cs.name}: {r1cs.num_constraints} constraints, {r1cs.num_inputs} inputs "
        f"(ONE included), {r1cs.num_aux} aux; device {jax.devices()[0].device_kind}")
    if seed is not None:
        say("WARNING: a seeded setup has predictable toxic waste; these keys are for tests only")
    pk, vk = G.setup(r1cs, seed=seed, host=host,
                     progress=lambda stage, s: say(f"setup: {stage} done at {s:.2f} s"))
    os.makedirs(out, exist_ok=True)
    written = [G.save_keys(pk, vk, out, key)]
    if params:
        path = os.path.join(out, f"{key}.params")
        PR.write_params(path, pk, vk, pce.extract(r1cs))
        written.append(path)
    if snarkjs_vk:
        path = os.path.join(out, f"{key}.verification_key.json")
        formats.write_verification_key_json(path, vk)
        written.append(path)
    for w in written:
        say(f"wrote {w}")
    say(f"setup of {r1cs.name} finished in {time.perf_counter() - t0:.2f} s")
    return written


def main(argv) -> int:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if not FLAGS["verbosity"].present:
        logging.set_verbosity(logging.WARNING)        # orbax's INFO lines would bury the progress
    if FLAGS.cache:
        from jaxprove.cache import enable_compilation_cache
        enable_compilation_cache()
    try:
        run(FLAGS.out, FLAGS.circuit, FLAGS.cubes, FLAGS.r1cs, FLAGS.key, FLAGS.params,
            FLAGS.snarkjs_vk, FLAGS.seed, say=lambda line: print(line, flush=True),
            host=FLAGS.host)
    except (ValueError, OSError) as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    define_flags()
    app.run(lambda argv: sys.exit(main(argv)))
