"""Does ``ops.msm.bits_sum`` lower for CUDA on this jax, in each of its forms?

    PYTHONPATH=. JAX_EXPLAIN_CACHE_MISSES=1 python3 bench/device/probe_bits.py

Session 38 (H100, jax 0.11.2): every form lowers and agrees (resident, chunked with
device or host bases), except the resident form traced inside ``jax.default_device``
when ``JAX_EXPLAIN_CACHE_MISSES=1``: "not enough values to unpack" in Pallas-Triton's
reduction lowering (the walk's ``jnp.max``).  Without the flag it passes.  That flag
ended the 16 GB mode's 32GiB run in msm_a (bench/device/fc32.sh now sets it only with
EXPLAIN=1).  E and F are the reduction alone in a minimal kernel (both pass)."""
import dataclasses
import jax, jax.numpy as jnp, numpy as np
from jax import lax
from jax.experimental import pallas as pl
from ops import msm as M
from ops.curve import G1
from bench.ntt_msm import rand_fr, make_bases

print(jax.__version__, jax.devices()[0].device_kind, flush=True)
n = 1 << 12
k = rand_fr(jax.random.PRNGKey(1), n)
bases = make_bases(G1, k)
bits = jax.random.bits(jax.random.PRNGKey(2), (1, n), jnp.uint32) & 1
bits = bits.astype(bool)
cfg = M.default_config(bases)
budget = int(M.bits_working_set_bytes(G1, n // 4, 1, cfg) * 1.2 + 2 * 96 * n)

def tryit(name, f):
    try:
        out = jax.block_until_ready(f())
        print("OK  ", name, flush=True)
        return out
    except Exception as e:
        print("FAIL", name, type(e).__name__, str(e).splitlines()[0][:200], flush=True)

ref = tryit("A bits_sum resident", lambda: M.bits_sum(G1, bases, bits, cfg))
b = tryit("B bits_sum chunked (device bases)", lambda: M.bits_sum(G1, bases, bits, dataclasses.replace(cfg, budget_bytes=budget)))
c = tryit("C bits_sum chunked (host bases)", lambda: M.bits_sum(G1, np.asarray(bases), bits, dataclasses.replace(cfg, budget_bytes=budget)))
with jax.default_device(jax.devices()[0]):
    tryit("D bits_sum resident under default_device", lambda: M.bits_sum(G1, bases, bits, cfg))
for nm, o in (("B", b), ("C", c)):
    if ref is not None and o is not None:
        print(nm, "equal to A:", bool(jnp.all(G1.to_affine(o) == G1.to_affine(ref))))

def kern(x_ref, o_ref):
    def body(j, acc):
        v = x_ref[...] + j
        return lax.cond(jnp.max(v) > 5, lambda a: a + 1, lambda a: a, acc)
    o_ref[...] = lax.fori_loop(0, 4, body, jnp.zeros((32,), jnp.int32))
x = jnp.arange(32, dtype=jnp.int32)
tryit("E minimal jnp.max in fori_loop", lambda: pl.pallas_call(kern, out_shape=jax.ShapeDtypeStruct((32,), jnp.int32))(x))
def kern2(x_ref, o_ref):
    o_ref[...] = x_ref[...] + jnp.max(x_ref[...])
tryit("F minimal jnp.max", lambda: pl.pallas_call(kern2, out_shape=jax.ShapeDtypeStruct((32,), jnp.int32))(x))
