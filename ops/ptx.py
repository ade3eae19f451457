"""Prime-field arithmetic as inline PTX carry chains, for CUDA kernels only.

Triton has no add-with-carry: the portable limb code (``ops.limbs``) forms
every limb product-accumulate in 64 bits and splits it, about 2000 thread
instructions per 12-limb Montgomery product (research/arith-prototype).  PTX
has the carry flag (``add.cc``/``addc``, ``mad.lo.cc``/``madc.hi``), with which
a product is ~4L² + 4L instructions.  This module writes those programs as
text and binds them inside Pallas (Triton) kernels as one
``tt.elementwise_inline_asm`` each.

* ``montgomery_mul_asm(p, n0)``: a·b·R⁻¹ mod p, operand-scanning CIOS on
  L + 1 words (no-carry variant: the top limb of p is below 2^31 − 1, so
  every partial sum t + a·b_i + m·p < 2^33·p < 2^(32(L+1)) and the result of
  each row is < 2p), then one conditional subtraction.  Row i:
  t += a·b_i (low halves in one carry chain, high halves in a second),
  m = t_0·n0 mod 2^32, t += m·p (t_0 becomes 0), t >>= 32 (a renaming of
  registers: the zeroed word becomes the new top).
* ``add_mod_asm(p)`` / ``sub_mod_asm(p)``: canonical (a ± b) mod p.

Operands: ``$0 .. $(L-1)`` are the result limbs, then the limbs of a, then
of b (least significant first), all ``.u32``; the constants of p are
immediates.  Inputs and outputs are canonical, as in ``ops.limbs``.

``call(asm, n_out, rows)`` binds ``ptx_asm_p``, our own primitive (jax's
``plgpu.elementwise_inline_asm`` drops all but one result when there are
several, jax 0.10.2), with a Triton lowering only: it is traced only inside
Pallas kernels compiled for CUDA (``kernel_arith`` decides).  Interpret mode
and the CPU keep the portable code.  The programs' logic is checked on the
CPU by a small PTX interpreter against Python integers (tests/test_ptx.py);
that ptxas accepts them and the GPU agrees is checked on the device
(tests/test_gpu.py, bench/arith.py).
"""
from __future__ import annotations

import dataclasses
import functools
import os
from typing import Sequence

import jax
import jax.numpy as jnp

try:  # jax's private Triton lowering: present in the jaxlibs we support
    from jax._src import core as _core
    from jax._src.lib.triton import dialect as _tt
    from jax._src.pallas.triton import lowering as _triton_lowering
except ImportError:  # pragma: no cover - exotic jaxlib builds: portable code only
    _triton_lowering = None

AVAILABLE = _triton_lowering is not None
OPS = ("mul", "add", "sub")     # the FpArith operations this module can replace


def default_ops() -> tuple:
    """The operations kernels run as PTX unless their ``KernelConfig`` says
    otherwise: ``$JAXPROVE_PTX`` (comma-separated names from ``OPS``; ``off``
    or empty for none; read once, when ``ops.elementwise`` is imported),
    else all of them."""
    v = os.environ.get("JAXPROVE_PTX")
    if v is None:
        return OPS
    names = tuple(x.strip() for x in v.split(",") if x.strip() and x.strip() != "off")
    bad = [x for x in names if x not in OPS]
    if bad:
        raise ValueError(f"JAXPROVE_PTX: unknown operation(s) {bad}; choose from {OPS} or 'off'")
    return names


# ---------------------------------------------------------------- programs
def _imm(v: int) -> str:
    return f"0x{v:08x}"


def _operands(*sizes: int) -> list[list[str]]:
    """Consecutive inline-asm operand groups: ``$0 ..`` for the first size, …"""
    groups, k = [], 0
    for n in sizes:
        groups.append([f"${k + j}" for j in range(n)])
        k += n
    return groups


def _minus_p_if_not_below(out, t, top: str, p) -> list[str]:
    """out = t − p, kept where that did not borrow, else out = t (t < 2p;
    ``top``: t's word above the L limbs, a register or ``0``)."""
    L = len(p)
    s = [f"sub.cc.u32 {out[0]}, {t[0]}, {_imm(p[0])};"]
    s += [f"subc.cc.u32 {out[j]}, {t[j]}, {_imm(p[j])};" for j in range(1, L)]
    s.append(f"subc.u32 %top, {top}, 0;")
    s.append("setp.ne.u32 %c, %top, 0;")
    s += [f"selp.b32 {out[j]}, {t[j]}, {out[j]}, %c;" for j in range(L)]
    return s


def _mac_lines(t, tin, x, y: str, top_in: str, y_first: bool = False) -> list[str]:
    """t (L + 1 words) = tin + x·y: x L words (registers or immediates), y
    one word (written as the first factor with ``y_first``: immediates go
    second); low halves in one carry chain, high halves in a second;
    ``top_in``: tin's word L (a register or ``0``)."""
    L = len(x)
    xy = [f"{y}, {v}" if y_first else f"{v}, {y}" for v in x]
    s = [f"mad.lo.cc.u32 {t[0]}, {xy[0]}, {tin[0]};"]
    s += [f"madc.lo.cc.u32 {t[j]}, {xy[j]}, {tin[j]};" for j in range(1, L)]
    s.append(f"addc.u32 {t[L]}, {top_in}, 0;")
    s.append(f"mad.hi.cc.u32 {t[1]}, {xy[0]}, {t[1]};")
    s += [f"madc.hi.cc.u32 {t[j + 1]}, {xy[j]}, {t[j + 1]};" for j in range(1, L - 1)]
    s.append(f"madc.hi.u32 {t[L]}, {xy[L - 1]}, {t[L]};")
    return s


def _reduce_lines(t, p, n0: int) -> list[str]:
    """t += m·p with m = t_0·n0 mod 2^32: the low word becomes 0."""
    return [f"mul.lo.u32 %m, {t[0]}, {_imm(n0)};"] + _mac_lines(t, t, [_imm(v) for v in p], "%m",
                                                                 t[len(p)], y_first=True)


def montgomery_mul_asm(p: Sequence[int], n0: int) -> str:
    """PTX of the CIOS Montgomery product for the L-limb modulus p."""
    L = len(p)
    out, a, b = _operands(L, L, L)
    t = [f"%t{j}" for j in range(L + 1)]          # t[L] is the extra word
    s = [f"{{ .reg .u32 %t<{L + 1}>, %m, %top; .reg .pred %c;"]
    # row 0: t = a·b_0
    s += [f"mul.lo.u32 {t[j]}, {a[j]}, {b[0]};" for j in range(L)]
    s.append(f"mul.hi.u32 {t[L]}, {a[L - 1]}, {b[0]};")
    s.append(f"mad.hi.cc.u32 {t[1]}, {a[0]}, {b[0]}, {t[1]};")
    s += [f"madc.hi.cc.u32 {t[j + 1]}, {a[j]}, {b[0]}, {t[j + 1]};" for j in range(1, L - 1)]
    s.append(f"addc.u32 {t[L]}, {t[L]}, 0;")
    for i in range(L):
        if i:                                      # t += a·b_i
            s += _mac_lines(t, t, a, b[i], t[L])
        s += _reduce_lines(t, p, n0)
        t = t[1:] + t[:1]                          # t >>= 32; the zero word is the new top
    s += _minus_p_if_not_below(out, t, t[L], p)      # t < 2p
    s.append("}")
    return "\n".join(s)


def montgomery_row_asm(p: Sequence[int], n0: int) -> str:
    """PTX of one CIOS row, for a product kept as a loop (``Unroll.mul``
    off): t' = (t + a·b_i + m·p) / 2^32, m = (t_0 + a_0·b_i)·n0 mod 2^32.
    Operands: t' (L words), then t (L), a (L), b_i; t < 2p in, t' < 2p out."""
    L = len(p)
    out, tin, a, (bi,) = _operands(L, L, L, 1)
    t = [f"%t{j}" for j in range(L + 1)]
    s = [f"{{ .reg .u32 %t<{L + 1}>, %m;"]
    s += _mac_lines(t, tin, a, bi, "0") + _reduce_lines(t, p, n0)
    s += [f"mov.u32 {out[j]}, {t[j + 1]};" for j in range(L)]
    s.append("}")
    return "\n".join(s)


def cond_sub_asm(p: Sequence[int]) -> str:
    """PTX of t mod p for t < 2p (operands: result, then t)."""
    L = len(p)
    out, t = _operands(L, L)
    s = ["{ .reg .u32 %top; .reg .pred %c;"]
    s += _minus_p_if_not_below(out, t, "0", p)
    s.append("}")
    return "\n".join(s)


def _chain(op: str, d, x, y, carry_out: bool) -> list[str]:
    """d = x op y over all words in one carry chain (op ``add`` or ``sub``);
    ``carry_out``: the last word sets the flag too, for a reader after it."""
    n = len(d)
    s = [f"{op}.cc.u32 {d[0]}, {x[0]}, {y[0]};"]
    s += [f"{op}c.cc.u32 {d[j]}, {x[j]}, {y[j]};" for j in range(1, n - 1)]
    s.append(f"{op}c{'.cc' if carry_out else ''}.u32 {d[n - 1]}, {x[n - 1]}, {y[n - 1]};")
    return s


def add_mod_asm(p: Sequence[int]) -> str:
    """PTX of (a + b) mod p for canonical a, b (2p < 2^(32L))."""
    L = len(p)
    out, a, b = _operands(L, L, L)
    u = [f"%u{j}" for j in range(L)]
    s = [f"{{ .reg .u32 %u<{L}>, %top; .reg .pred %c;"]
    s += _chain("add", u, a, b, carry_out=False)
    s += _minus_p_if_not_below(out, u, "0", p)
    s.append("}")
    return "\n".join(s)


def sub_mod_asm(p: Sequence[int]) -> str:
    """PTX of (a − b) mod p for canonical a, b: subtract, add p where it borrowed."""
    L = len(p)
    out, a, b = _operands(L, L, L)
    d = [f"%d{j}" for j in range(L)]
    q = [f"%q{j}" for j in range(L)]
    s = [f"{{ .reg .u32 %d<{L}>, %q<{L}>, %mask;"]
    s += _chain("sub", d, a, b, carry_out=True)
    s.append("subc.u32 %mask, 0, 0;")
    s += [f"and.b32 {q[j]}, %mask, {_imm(p[j])};" for j in range(L)]
    s += _chain("add", out, d, q, carry_out=False)
    s.append("}")
    return "\n".join(s)


# ---------------------------------------------------------------- the primitive
ptx_asm_p = _core.Primitive("jaxprove_ptx_asm") if AVAILABLE else None
if AVAILABLE:
    ptx_asm_p.multiple_results = True

    @ptx_asm_p.def_abstract_eval
    def _abstract_eval(*avals, asm, n_out):
        del asm
        return [_core.ShapedArray(avals[0].shape, jnp.uint32)] * n_out

    @_triton_lowering.register_lowering(ptx_asm_p)
    def _lower(ctx, *args, asm, n_out):
        del ctx
        types = [args[0].type] * n_out       # Triton's signless i32 tensors, as the inputs
        constraints = ",".join(["=r"] * n_out + ["r"] * len(args))
        res = _tt.elementwise_inline_asm(types, asm, constraints=constraints, pure=True,
                                         packed_element=1, args=list(args))
        return list(res) if n_out > 1 else [res]


def call(asm: str, n_out: int, rows: Sequence) -> list:
    """Run the PTX program ``asm`` per lane: ``n_out`` uint32 result rows from
    the input rows (broadcast to one shape).  Inside CUDA Pallas kernels only."""
    rows = [jnp.asarray(r).astype(jnp.uint32) for r in rows]
    shape = jnp.broadcast_shapes(*(r.shape for r in rows))
    rows = [jnp.broadcast_to(r, shape) for r in rows]
    return list(ptx_asm_p.bind(*rows, asm=asm, n_out=n_out))


@functools.lru_cache(maxsize=None)
def _programs(p: tuple, n0: int):
    return (montgomery_mul_asm(p, n0), add_mod_asm(p), sub_mod_asm(p),
            montgomery_row_asm(p, n0), cond_sub_asm(p))


def montgomery_mul(a, b, p: Sequence[int], n0: int, rolled: bool = True,
                   rows_per_step: int = 1) -> list:
    """a·b·R⁻¹ mod p.  Unrolled: one program of L rows (~4L² + 4L
    instructions, fastest alone); rolled: a loop over the rows of b
    (``rows_per_step`` row programs per step, k: the largest divisor of L
    not above it; b's limbs rotating by k through the loop carry as in
    ``ops.limbs``, which costs L register moves a step), then the
    conditional subtraction: a formula with a dozen products stays a few
    thousand instructions instead of ~10k."""
    progs = _programs(tuple(p), n0)
    if not rolled:
        return call(progs[0], len(p), list(a) + list(b))
    L = len(p)
    k = max(d for d in range(1, min(rows_per_step, L) + 1) if L % d == 0)
    a = [jnp.asarray(x).astype(jnp.uint32) for x in a]
    zero = jnp.zeros(jnp.broadcast_shapes(*(x.shape for x in list(a) + list(b))), jnp.uint32)

    def step(_, tb):
        t, bb = tb
        for i in range(k):
            t = call(progs[3], L, t + a + [bb[i]])
        return t, bb[k:] + bb[:k]

    b = [jnp.broadcast_to(jnp.asarray(x).astype(jnp.uint32), zero.shape) for x in b]
    t, _ = jax.lax.fori_loop(0, L // k, step, ([zero] * L, b))
    return call(progs[4], L, t)


def add_mod(a, b, p: Sequence[int]) -> list:
    return call(_programs(tuple(p), 0)[1], len(p), list(a) + list(b))


def sub_mod(a, b, p: Sequence[int]) -> list:
    return call(_programs(tuple(p), 0)[2], len(p), list(a) + list(b))


def kernel_arith(arith, config):
    """The formula layer a kernel built with ``config`` should use: ``arith``
    with the operations ``config.ptx`` as PTX where the kernel is compiled for
    CUDA (not interpret mode), ``arith`` itself elsewhere."""
    if config.ptx and not config.interpret and AVAILABLE and hasattr(arith, "ptx"):
        return dataclasses.replace(arith, ptx=tuple(config.ptx))
    return arith
