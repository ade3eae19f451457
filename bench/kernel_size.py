"""Triton IR size of our Pallas kernels, measured on any machine (no GPU).

Pallas' Triton backend compile time grows steeply with the number of ops in
the kernel's Triton IR (research/arith-prototype: ~7k ops compile in ~10 s,
15k in ~150 s).  This lowers a kernel for CUDA on the host and counts them.

    python -m bench.kernel_size            # table of every kernel in KERNELS
    python -m bench.kernel_size --pairing  # every Triton kernel of the lowered pairing programs
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import re

import jax
import jax.numpy as jnp

from ops.elementwise import KernelConfig


def triton_modules(fn, *shapes) -> list[str]:
    """The Triton IR texts of every Pallas kernel in ``fn``'s CUDA lowering
    (``fn`` built with a ``KernelConfig(debug=True)``: Pallas prints them)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        jax.jit(fn).trace(*shapes).lower(lowering_platforms=("cuda",))
    return buf.getvalue().split("The Triton module")[1:]


def _op_count(ir: str) -> int:
    return len(re.findall(r"= (?:\"?)([a-z_]+\.[a-z_.]+)", ir))


def triton_op_counts(fn, *shapes) -> list[int]:
    """Lower ``fn`` (a function built on ops.elementwise with config.debug on)
    for CUDA and return the op count of each Triton kernel it contains."""
    return [_op_count(ir) for ir in triton_modules(fn, *shapes)]


def debug_config(config: KernelConfig) -> KernelConfig:
    return dataclasses.replace(config, debug=True)


def kernels(config: KernelConfig | None = KernelConfig()):
    """name -> (function, argument shapes) for every kernel family we ship,
    each object with ``config`` (debug on), or with None each with its own
    shipped config (G2: ``ops.curve.G2_CONFIG``; the NTT and SpMV kernels:
    Fr's)."""
    from ops import curve, field, ntt, segsum, spmv, tower
    own = lambda o: dataclasses.replace(                              # noqa: E731
        o, config=debug_config(o.config if config is None else config))
    Fq, Fr, Fq2, G1, G2 = (own(o) for o in (field.Fq, field.Fr, tower.Fq2, curve.G1, curve.G2))
    cfg = Fr.config
    n = 1 << 20
    s = lambda *pre: jax.ShapeDtypeStruct(pre + (n,), jnp.uint32)
    i32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.int32)
    u32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.uint32)

    def segsum_level(curve, affine, xyzz=False, prefetch=False):  # one level, 2^14 lanes
        rows = math.prod(curve.aff if affine else curve.proj)

        def f(keys, nv, src, pay, buckets):
            return segsum.level(curve, keys, nv, src, pay if affine else None, 1 << 14, 4, buckets,
                                xyzz=xyzz, prefetch=prefetch)
        return f, (i32(n), i32(), u32(n, rows), u32(n), u32(1 << 16, math.prod(curve.proj)))

    def running(curve):              # the bucket reduction's running sums: 13·1024 lanes of 512
        lanes, g = 13 << 10, 512

        def f(b):
            return segsum.running_sums(curve, b, lanes, g)
        return f, (u32(lanes * g, math.prod(curve.proj)),)

    def ntt_pass(loaded):            # the passes of a 2^20 transform (the first one h = 1)
        def f(x, tw):
            return ntt._inplace(x, tw, 20, False, cfg, False, loaded)
        return f, (u32(8, 1, n), u32(8, n // 2))

    def spmv_fused(kp, kg):          # the fixed-width rows of 2^20 rows over 2^20 variables
        def f(c, neg, gc, gi, table, wt):
            return spmv._spmv_ell_fused((c, neg, gc, gi), n, table, wt, cfg)
        return f, (i32(n, kp), u32(n), i32(n, kg), i32(n, kg), u32(8, 4), u32(n, 1, 8))

    return {
        "Fr.mul": (Fr.mul, (s(8), s(8))),
        "Fq.mul": (Fq.mul, (s(12), s(12))),
        "Fq.square": (Fq.square, (s(12),)),
        "Fq.add": (Fq.add, (s(12), s(12))),
        "Fq.inv": (Fq.inv, (s(12),)),
        "Fq2.mul": (Fq2.mul, (s(2, 12), s(2, 12))),
        "G1.add": (G1.add, (s(3, 12), s(3, 12))),
        "G1.madd": (G1.madd, (s(3, 12), s(2, 12))),
        "G1.double": (G1.double, (s(3, 12),)),
        "G2.add": (G2.add, (s(3, 2, 12), s(3, 2, 12))),
        "G2.madd": (G2.madd, (s(3, 2, 12), s(2, 2, 12))),
        "G2.double": (G2.double, (s(3, 2, 12),)),
        "G1.segsum_A": segsum_level(G1, True),
        "G1.segsum_P": segsum_level(G1, False),
        "G2.segsum_A": segsum_level(G2, True),       # split: products, tail kernels per step
        "G2.segsum_P": segsum_level(G2, False),
        "G1.segsum_X": segsum_level(G1, True, xyzz=True),    # XYZZ walk, then to projective
        "G1.segsum_A_prefetch": segsum_level(G1, True, prefetch=True),   # pipelined walk
        "G1.segsum_X_prefetch": segsum_level(G1, True, xyzz=True, prefetch=True),
        "G1.running_sums": running(G1),
        "Fr.ntt_passes": ntt_pass(False),
        "Fr.ntt_passes_loaded": ntt_pass(True),
        "Fr.spmv_fused_5_1": spmv_fused(5, 1),
        "Fr.spmv_fused_2_8": spmv_fused(2, 8),       # the real PoRep's pieces (hypothesis 57)
    }


@contextlib.contextmanager
def _debug_pairing():
    """ops.pairing with its tower config in debug mode (so Pallas prints each
    kernel's Triton IR), restored afterwards."""
    from ops import fq12, pairing
    saved = pairing.CONFIG, pairing.Fq12
    cfg = debug_config(fq12.TOWER_CONFIG)
    pairing.CONFIG, pairing.Fq12 = cfg, dataclasses.replace(fq12.Fq12, config=cfg)
    try:
        yield pairing
    finally:
        pairing.CONFIG, pairing.Fq12 = saved


def pairing_op_counts(lanes: int = 3, programs=("pairing", "pairing_product_is_one")) -> dict:
    """name -> op count of every Triton kernel in the CUDA lowering of
    ``pairing`` (Miller loop + final exponentiation) and of the Groth16-shaped
    ``pairing_product_is_one`` (4 pairs) on ``lanes`` lanes.  Use a lane count
    no other pairing call in the process used (the pairing's jitted halves
    cache their traces by shape)."""
    s = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.uint32)
    out = {}
    with _debug_pairing() as pr:
        P, Q = s(2, 12, lanes), s(2, 2, 12, lanes)
        progs = {"pairing": (lambda p, q: pr.pairing(p, q), (P, Q)),
                 "pairing_product_is_one": (
                     lambda p, q: pr.pairing_product_is_one([p] * 4, [q] * 4), (P, Q))}
        for prog in programs:
            fn, shapes = progs[prog]
            for i, ir in enumerate(triton_modules(fn, *shapes)):
                name = re.search(r"tt.func (?:public )?@([\w$.]+)", ir)
                key = f"{prog}/{i}:{name.group(1) if name else '?'}"
                out[key] = _op_count(ir)
    return out


def main():
    import sys
    from ops.limbs import Unroll
    if "--pairing" in sys.argv:
        for name, n in pairing_op_counts().items():
            print(f"{name:48s} {n}", flush=True)
        return
    unroll = Unroll(table="--table" in sys.argv, inner="--inner" not in sys.argv)
    for name, (fn, shapes) in kernels(KernelConfig(unroll=unroll)).items():
        print(f"{name:12s} {triton_op_counts(fn, *shapes)}", flush=True)


if __name__ == "__main__":
    main()
