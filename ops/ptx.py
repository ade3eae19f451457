"""Prime-field arithmetic as inline PTX carry chains, for CUDA kernels only.

Triton has no add-with-carry: the portable limb code (``ops.limbs``) forms
every limb product-accumulate in 64 bits and splits it, about 2000 thread
instructions per 12-limb Montgomery product (research/arith-prototype).  PTX
has the carry flag (``add.cc``/``addc``, ``mad.lo.cc``/``madc.hi``), with which
a product is ~2L² wide multiply-adds.  This module writes those programs as
text and binds them inside Pallas (Triton) kernels as one
``tt.elementwise_inline_asm`` each.

* ``montgomery_mul_asm(p, n0)``: a·b·R⁻¹ mod p, operand-scanning CIOS
  (no-carry variant: the top limb of p is below 2^31 − 1, so every partial
  sum stays below 2^(32(L+1)) and the result is < 2p), then one conditional
  subtraction; ``montgomery_rows_asm`` / ``merge_asm`` the same as a loop.
  The accumulator is kept in two arrays (sppark's even/odd layout,
  ``_row_lines``): the products of a's even limbs land on words (2k, 2k+1),
  those of its odd limbs on (2k+1, 2k+2), so in each carry chain a
  product's low and high halves are adjacent (``mad.lo.cc``, ``madc.hi.cc``
  with the same factors), which ptxas emits as ONE ``IMAD.WIDE.U32.X``.
  The textbook order (all low halves in one chain, all high halves in a
  second) costs two SASS instructions per half, IMAD then IADD3.X: an Fq
  product 1,256 SASS instructions against 440 (sm_90a, ptxas 13.4;
  bench/NOTES.md hypothesis 61).
* ``montgomery_sqr_asm(p, n0)``: a²·R⁻¹ mod p, the cross products once
  (sppark's ``wide_t`` square) and a separate reduction: Fq 222 wide
  products against the product's 288.
* ``montgomery_dot_asm(p, n0, k)``: Σ a_t·b_t·R⁻¹ mod p, the k products'
  rows added before one reduction per row (sppark's ``dot_product``): Fq
  432 wide products for two against 576, where (k + 1)·p leaves room below
  2^(32L) (``dot_terms``: Fq 8, Fr none).  The curve formulas ask for such
  sums (``FpArith.dots``).
* ``add_mod_asm(p)`` / ``sub_mod_asm(p)``: canonical (a ± b) mod p.
* ``cap_registers(x, config)``: the register cap of a kernel
  (``KernelConfig.max_registers``): the kernel function gets the attribute
  ``nvvm.maxnreg``, which Triton's lowering carries to the PTX directive
  ``.maxnreg``, so ptxas keeps each thread within the cap (spilling what does
  not fit) and more warps fit an SM (bench/NOTES.md hypothesis 64).

Operands: ``$0 .. $(L-1)`` are the result limbs, then the limbs of a, then
of b (least significant first), all ``.u32``; the constants of p are
immediates.  Inputs and outputs are canonical, as in ``ops.limbs``.  A
program's own registers are declared in its block and must not be named as
LLVM's NVPTX backend names the operands it substitutes (%r, %rd, %p, …): a
local ``%r1`` would shadow the operand ``%r1`` (``LOCAL_REGISTERS``; the
first standalone squaring kernel read its own uninitialised registers on the
H100 that way, session 33).

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
    from jax._src.lib.mlir import ir as _ir
    from jax._src.lib.triton import dialect as _tt
    from jax._src.pallas.triton import lowering as _triton_lowering
except ImportError:  # pragma: no cover - exotic jaxlib builds: portable code only
    _triton_lowering = None

AVAILABLE = _triton_lowering is not None
OPS = ("mul", "add", "sub", "sqr", "dot")   # the FpArith operations this module can replace
# on unless named otherwise (sqr and dot: bench/NOTES.md hypothesis 65, measured on an H100 in
# session 33: MSM G1 2^24 200.2 -> 163.0 ms, G2 2^20 125.7 -> 93.7 ms, Groth16 2^20 -13%)
DEFAULT_OPS = OPS


def default_ops() -> tuple:
    """The operations kernels run as PTX unless their ``KernelConfig`` says
    otherwise: ``$JAXPROVE_PTX`` (comma-separated names from ``OPS``; ``off``
    or empty for none; read once, when ``ops.elementwise`` is imported),
    else ``DEFAULT_OPS``."""
    v = os.environ.get("JAXPROVE_PTX")
    if v is None:
        return DEFAULT_OPS
    names = tuple(x.strip() for x in v.split(",") if x.strip() and x.strip() != "off")
    bad = [x for x in names if x not in OPS]
    if bad:
        raise ValueError(f"JAXPROVE_PTX: unknown operation(s) {bad}; choose from {OPS} or 'off'")
    return names


# ---------------------------------------------------------------- programs
# the register names the programs declare, none of which LLVM's NVPTX backend gives the
# values it substitutes for $k (it uses %r, %rd, %rs, %p, %f, %fd, %h, %hh)
LOCAL_REGISTERS = ("e", "o", "v", "m", "t", "top", "c", "E", "O", "S", "u", "d", "q", "mask")


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


def _cmad_lines(acc, x, y: str) -> list[str]:
    """acc += x·y in the even/odd layout: acc[2k], acc[2k+1] += lo, hi(x[k]·y),
    ONE carry chain (a product's two halves adjacent, so ptxas emits one
    IMAD.WIDE.U32.X per product); the carry out is left set."""
    s = []
    for k, v in enumerate(x):
        s.append(f"{'mad' if k == 0 else 'madc'}.lo.cc.u32 {acc[2 * k]}, {v}, {y}, {acc[2 * k]};")
        s.append(f"madc.hi.cc.u32 {acc[2 * k + 1]}, {v}, {y}, {acc[2 * k + 1]};")
    return s


def _rshift_cmad_lines(odd, x, y: str) -> list[str]:
    """odd = (odd >> 64) + x·y in place, continuing the live carry chain:
    odd[2k], odd[2k+1] = lo, hi(x[k]·y) + odd[2k+2], odd[2k+3] (zero past
    the end); the chain ends at the top word."""
    n, s = len(odd), []
    for k, v in enumerate(x):
        j = 2 * k
        last = j + 2 >= n
        s.append(f"madc.lo.cc.u32 {odd[j]}, {v}, {y}, {'0' if last else odd[j + 2]};")
        s.append(f"madc.hi{'' if last else '.cc'}.u32 {odd[j + 1]}, {v}, {y}, "
                 f"{'0' if last else odd[j + 3]};")
    return s


def _row_lines(even, odd, terms, p, n0: int) -> list[str]:
    """One CIOS row in the even/odd layout (as sppark's ``mont_t``), in place.
    In: T = Σ even[k]·2^(32k) + Σ_(k≥1) odd[k]·2^(32(k−1)) (odd[0] = 0).
    Out: T + Σ_t a_t·b_t + m·p = Σ even[k]·2^(32k) + Σ odd[k]·2^(32(k+1)),
    with ``terms`` the pairs (a_t, b_t) of an operand's limbs and one limb of
    the other (one pair: a product's row; several: a sum of products', one
    reduction for all) and m = T_0'·n0 so that even[0] = 0: divided by 2^32
    that is the In form of the next row with the roles of the two arrays
    swapped.  even takes the products of the a's (and p's) even limbs, odd
    those of the odd limbs, so each product's two halves are adjacent words
    of one carry chain.  A chain after the first leaves no carry: odd's words
    1..L hold a part of T, and T < 2^(32(L+1)) (``montgomery_dot_asm``)."""
    L = len(p)
    (a, bi), rest = terms[0], terms[1:]
    s = [f"add.cc.u32 {even[0]}, {even[0]}, {odd[1]};"]
    s += _rshift_cmad_lines(odd, a[1::2], bi)
    for c, di in rest:
        s += _cmad_lines(odd, c[1::2], di)
    for c, di in terms:
        s += _cmad_lines(even, c[0::2], di)
        s.append(f"addc.u32 {odd[L - 1]}, {odd[L - 1]}, 0;")
    s += _reduce_lines(even, odd, p, n0)
    return s


def _reduce_lines(even, odd, p, n0: int) -> list[str]:
    """T += m·p with m = T_0·n0 mod 2^32 (T's word 0 is even[0] alone): the
    even/odd accumulators of a row after its products."""
    L = len(p)
    s = [f"mul.lo.u32 %m, {even[0]}, {_imm(n0)};"]
    s += _cmad_lines(odd, [_imm(v) for v in p[1::2]], "%m")    # no carry out: T < 2^(32(L+1))
    s += _cmad_lines(even, [_imm(v) for v in p[0::2]], "%m")
    s.append(f"addc.u32 {odd[L - 1]}, {odd[L - 1]}, 0;")
    return s


def _redc_row_lines(even, odd, p, n0: int) -> list[str]:
    """A row without products (Montgomery reduction of a value already in
    the accumulators, sppark's ``mul_by_1``): In and Out as ``_row_lines``,
    T + m·p with m = T_0·n0.  T_0 (even[0] + odd[1]) is formed apart first,
    so no instruction stands between a carry and its reader."""
    L = len(p)
    s = [f"add.u32 %t, {even[0]}, {odd[1]};",
         f"mul.lo.u32 %m, %t, {_imm(n0)};",
         f"add.cc.u32 {even[0]}, {even[0]}, {odd[1]};"]
    s += _rshift_cmad_lines(odd, [_imm(v) for v in p[1::2]], "%m")
    s += _cmad_lines(even, [_imm(v) for v in p[0::2]], "%m")
    s.append(f"addc.u32 {odd[L - 1]}, {odd[L - 1]}, 0;")
    return s


def _rows_lines(even, odd, a, bs, p, n0: int):
    """The rows of b's limbs ``bs`` in turn (``_row_lines``, the arrays'
    roles swapping after each) -> (lines, even, odd) with the names of the
    arrays in their roles after the last row.  ``a`` may be a list of
    operands and ``bs`` then a list of their partners' limb lists: the rows
    of a sum of products."""
    if a and isinstance(a[0], str):
        a, bs = [a], [bs]
    s = []
    for bi in zip(*bs):
        s += _row_lines(even, odd, list(zip(a, bi)), p, n0)
        even, odd = odd, even
    return s, even, odd


def _fold_lines(r, even, odd) -> list[str]:
    """r = even + (odd >> 32), the accumulators' value (below 2^(32L))."""
    L = len(r)
    s = [f"add.cc.u32 {r[0]}, {even[0]}, {odd[1]};"]
    s += [f"addc.cc.u32 {r[k]}, {even[k]}, {odd[k + 1]};" for k in range(1, L - 1)]
    s.append(f"addc.u32 {r[L - 1]}, {even[L - 1]}, 0;")
    return s


def _merge_lines(out, even, odd, p) -> list[str]:
    """out = (even + (odd >> 32)) mod p, the sum below 2p."""
    r = [f"%v{j}" for j in range(len(p))]
    return _fold_lines(r, even, odd) + _minus_p_if_not_below(out, r, "0", p)


def _check_even(p):
    if len(p) % 2:
        raise ValueError(f"ops.ptx: the even/odd product needs an even limb count, got {len(p)}")


def montgomery_mul_asm(p: Sequence[int], n0: int) -> str:
    """PTX of the Montgomery product a·b·R⁻¹ mod p for the L-limb modulus p
    (L even): L CIOS rows in the even/odd layout (``_row_lines``), the two
    accumulators merged, one conditional subtraction (the sum of one
    product, ``montgomery_dot_asm``)."""
    return montgomery_dot_asm(p, n0, 1)


def montgomery_dot_asm(p: Sequence[int], n0: int, terms: int = 2) -> str:
    """PTX of Σ_t a_t·b_t·R⁻¹ mod p for ``terms`` pairs (operands: result,
    then a_1, b_1, a_2, b_2, …; one pair is the product): every row adds all
    the products' row before one reduction (``_row_lines``), so a sum of two products costs
    3L² wide multiply-adds instead of 4L² and one subtraction instead of
    two (sppark's ``dot_product``).  Valid where (terms + 1)·p < R = 2^(32L)
    (``dot_terms``): a row leaves T < T/2^32 + (terms + 1)·p, which must stay
    below R for T·2^32 to fit the L + 1 words, and the result
    (Σ a_t·b_t + M·p)/R < terms·p²/R + p < 2p needs one subtraction."""
    _check_even(p)
    if terms > dot_terms(p):
        raise ValueError(f"montgomery_dot_asm: {terms} products exceed this modulus's "
                         f"{dot_terms(p)} ((terms + 1)·p must stay below 2^(32L))")
    L = len(p)
    groups = _operands(L, *([L] * 2 * terms))
    out, ab = groups[0], groups[1:]
    even, odd = [f"%e{j}" for j in range(L)], [f"%o{j}" for j in range(L)]
    s = [f"{{ .reg .u32 %e<{L}>, %o<{L}>, %v<{L}>, %m, %top; .reg .pred %c;"]
    s += [f"mov.u32 {x}, 0;" for x in even + odd]
    rows, even, odd = _rows_lines(even, odd, ab[0::2], ab[1::2], p, n0)
    s += rows + _merge_lines(out, even, odd, p)
    s.append("}")
    return "\n".join(s)


def dot_terms(p: Sequence[int]) -> int:
    """How many products ``montgomery_dot_asm`` may sum for the limbs p: the
    largest k with (k + 1)·p + 2^(32(L−1)) < 2^(32L), the rows' bound
    (Fq: 8; Fr: 1, so no sum)."""
    v, L = sum(x << (32 * j) for j, x in enumerate(p)), len(p)
    k = 0
    while (k + 2) * v + (1 << (32 * (L - 1))) < 1 << (32 * L):   # T/2^32 < 2^(32(L−1))
        k += 1
    return k


def montgomery_sqr_asm(p: Sequence[int], n0: int) -> str:
    """PTX of a²·R⁻¹ mod p (sppark's ``wide_t`` square, then ``mul_by_1``):

    1. the cross products a_i·a_j (i < j) once each into a 2L-word sum, the
       row of a_i in two carry chains, one per parity of i + j (``E`` holds
       the pairs starting on even words, ``O`` those on odd words, so a
       product's halves stay adjacent), each chain ending by carrying into
       the next word, which no earlier row reached past;
    2. S = 2·(E + O) + Σ a_i²·2^(64i) = a², in 2L words;
    3. Montgomery reduction of S's low half: L rows m·p without products
       (``_redc_row_lines``) leave (S_lo + M·p)/R ≤ p; plus S's high half
       (< p²/R < p) that is below 2p, then one conditional subtraction.

    L(L−1)/2 + L wide products for the square and L² for the reduction
    against the product's 2L²: Fq 222 against 288."""
    _check_even(p)
    L = len(p)
    out, a = _operands(L, L)
    E, O, S = ([f"%{x}{w}" for w in range(2 * L)] for x in "EOS")
    even, odd = [f"%e{j}" for j in range(L)], [f"%o{j}" for j in range(L)]
    s = [f"{{ .reg .u32 %E<{2 * L}>, %O<{2 * L}>, %S<{2 * L}>, %e<{L}>, %o<{L}>, "
         f"%v<{L}>, %m, %t, %top; .reg .pred %c;"]
    written = set()

    def word(x, w):           # a word's register, or 0 while nothing was added to it
        return x[w] if x[w] in written else "0"

    for i in range(L - 1):
        for X, first in ((E, i + 2), (O, i + 1)):
            js = range(first, L, 2)
            for n, j in enumerate(js):
                w = i + j
                s.append(f"{'mad' if n == 0 else 'madc'}.lo.cc.u32 {X[w]}, {a[i]}, {a[j]}, "
                         f"{word(X, w)};")
                s.append(f"madc.hi.cc.u32 {X[w + 1]}, {a[i]}, {a[j]}, {word(X, w + 1)};")
                written.update((X[w], X[w + 1]))
            if js:
                top = i + js[-1] + 2
                s.append(f"addc.u32 {X[top]}, {word(X, top)}, 0;")
                written.add(X[top])
    # S = E + O (no word 0 in either), doubled, plus the squares a_i²
    s.append(f"mov.u32 {S[0]}, 0;")
    s.append(f"add.cc.u32 {S[1]}, {word(E, 1)}, {word(O, 1)};")
    s += [f"addc.cc.u32 {S[w]}, {word(E, w)}, {word(O, w)};" for w in range(2, 2 * L - 1)]
    s.append(f"addc.u32 {S[2 * L - 1]}, {word(E, 2 * L - 1)}, {word(O, 2 * L - 1)};")
    s += _chain("add", S[1:], S[1:], S[1:], carry_out=False)
    for i in range(L):
        s.append(f"{'mad' if i == 0 else 'madc'}.lo.cc.u32 {S[2 * i]}, {a[i]}, {a[i]}, {S[2 * i]};")
        s.append(f"madc.hi{'.cc' if i < L - 1 else ''}.u32 {S[2 * i + 1]}, {a[i]}, {a[i]}, "
                 f"{S[2 * i + 1]};")
    # (S_lo + M·p)/R, then + S_hi
    s += [f"mov.u32 {x}, {y};" for x, y in zip(even, S[:L])]
    s += [f"mov.u32 {x}, 0;" for x in odd]
    for _ in range(L):
        s += _redc_row_lines(even, odd, p, n0)
        even, odd = odd, even
    r, hi = [f"%v{j}" for j in range(L)], S[L:]
    s += _fold_lines(r, even, odd)
    s += _chain("add", r, r, hi, carry_out=True)
    s.append("addc.u32 %top, 0, 0;")
    s += _minus_p_if_not_below(out, r, "%top", p)
    s.append("}")
    return "\n".join(s)


def montgomery_rows_asm(p: Sequence[int], n0: int, k: int) -> str:
    """PTX of k CIOS rows (k even), for a product kept as a loop (``Unroll.mul``
    off).  Operands: even', odd' (L words each), then even, odd, a (L each),
    b_i .. b_(i+k−1); the accumulators start at zero and end in
    ``merge_asm``."""
    _check_even(p)
    if k < 2 or k % 2:
        raise ValueError(f"montgomery_rows_asm: rows must be even and positive, got {k}")
    L = len(p)
    eo, oo, even, odd, a, bs = _operands(L, L, L, L, L, k)
    e, o = [f"%e{j}" for j in range(L)], [f"%o{j}" for j in range(L)]
    s = [f"{{ .reg .u32 %e<{L}>, %o<{L}>, %m;"]
    s += [f"mov.u32 {x}, {y};" for x, y in zip(e + o, even + odd)]
    rows, e, o = _rows_lines(e, o, a, bs, p, n0)
    s += rows + [f"mov.u32 {x}, {y};" for x, y in zip(eo + oo, e + o)]
    s.append("}")
    return "\n".join(s)


def merge_asm(p: Sequence[int]) -> str:
    """PTX of (even + (odd >> 32)) mod p, the rolled product's last step
    (operands: result, then even, odd)."""
    L = len(p)
    out, even, odd = _operands(L, L, L)
    s = [f"{{ .reg .u32 %v<{L}>, %top; .reg .pred %c;"]
    s += _merge_lines(out, even, odd, p)
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


MAX_REGISTERS = (24, 255)      # what ptxas accepts as .maxnreg (sm_90: 255 at most)


def default_max_registers() -> int | None:
    """The register cap of kernels whose ``KernelConfig`` names none:
    ``$JAXPROVE_MAX_REGISTERS`` (an int, or unset / empty for none; read
    once, when ``ops.elementwise`` is imported)."""
    v = os.environ.get("JAXPROVE_MAX_REGISTERS", "").strip()
    if not v:
        return None
    try:
        n = int(v)
    except ValueError:
        raise ValueError(f"JAXPROVE_MAX_REGISTERS: an int in {list(MAX_REGISTERS)} or empty, "
                         f"got {v!r}") from None
    check_max_registers(n)
    return n


max_registers_p = _core.Primitive("jaxprove_max_registers") if AVAILABLE else None
if AVAILABLE:
    @max_registers_p.def_abstract_eval
    def _max_registers_abstract_eval(aval, *, n):
        del n
        return aval

    @_triton_lowering.register_lowering(max_registers_p)
    def _lower_max_registers(ctx, x, *, n):
        """x itself; the enclosing kernel function gets ``nvvm.maxnreg = n``."""
        del ctx
        op = _ir.InsertionPoint.current.block.owner
        while op is not None and op.operation.name != "tt.func":
            op = op.operation.parent
        if op is None:                    # pragma: no cover - Pallas always lowers into a tt.func
            raise ValueError("cap_registers: not inside a Triton kernel function")
        op.operation.attributes["nvvm.maxnreg"] = _ir.IntegerAttr.get(
            _ir.IntegerType.get_signless(32), n)
        return x


def check_max_registers(n) -> None:
    """ValueError unless n is None or a register cap ptxas accepts."""
    lo, hi = MAX_REGISTERS
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or not lo <= n <= hi):
        raise ValueError(f"max_registers: None or an int in [{lo}, {hi}] (registers per thread, "
                         f"the PTX .maxnreg), got {n!r}")


def cap_registers(x, config):
    """x, unchanged; in a kernel compiled for CUDA with ``config.max_registers``
    set, the kernel's threads are held to that many registers (``.maxnreg``).
    Bind it on a value the kernel uses (a kernel's unused values are dropped
    before lowering).  Interpret mode and the CPU: nothing."""
    n = config.max_registers
    if n is None or config.interpret or not AVAILABLE:
        return x
    return max_registers_p.bind(x, n=n)


def call(asm: str, n_out: int, rows: Sequence) -> list:
    """Run the PTX program ``asm`` per lane: ``n_out`` uint32 result rows from
    the input rows (broadcast to one shape).  Inside CUDA Pallas kernels only."""
    rows = [jnp.asarray(r).astype(jnp.uint32) for r in rows]
    shape = jnp.broadcast_shapes(*(r.shape for r in rows))
    rows = [jnp.broadcast_to(r, shape) for r in rows]
    return list(ptx_asm_p.bind(*rows, asm=asm, n_out=n_out))


@functools.lru_cache(maxsize=None)
def _programs(p: tuple, n0: int):
    return montgomery_mul_asm(p, n0), add_mod_asm(p), sub_mod_asm(p), merge_asm(p)


@functools.lru_cache(maxsize=None)
def _rows_program(p: tuple, n0: int, k: int):
    return montgomery_rows_asm(p, n0, k)


def montgomery_mul(a, b, p: Sequence[int], n0: int, rolled: bool = True,
                   rows_per_step: int = 2) -> list:
    """a·b·R⁻¹ mod p.  Unrolled: one program of L rows (~2L² wide
    multiply-adds, fastest alone); rolled: a loop over the rows of b,
    ``rows_per_step`` row programs' worth per step (k: the largest even
    divisor of L not above max(rows_per_step, 2); b's limbs rotating by k
    through the loop carry, L register moves a step), then the merge and
    conditional subtraction: a formula with a dozen products stays a few
    thousand instructions instead of ~10k."""
    progs = _programs(tuple(p), n0)
    if not rolled:
        return call(progs[0], len(p), list(a) + list(b))
    L = len(p)
    k = max(d for d in range(2, max(rows_per_step, 2) + 1, 2) if L % d == 0)
    rows = _rows_program(tuple(p), n0, k)
    a = [jnp.asarray(x).astype(jnp.uint32) for x in a]
    zero = jnp.zeros(jnp.broadcast_shapes(*(x.shape for x in list(a) + list(b))), jnp.uint32)

    def step(_, state):
        even, odd, bb = state
        eo = call(rows, 2 * L, even + odd + a + bb[:k])
        return eo[:L], eo[L:], bb[k:] + bb[:k]

    b = [jnp.broadcast_to(jnp.asarray(x).astype(jnp.uint32), zero.shape) for x in b]
    even, odd, _ = jax.lax.fori_loop(0, L // k, step, ([zero] * L, [zero] * L, b))
    return call(progs[3], L, even + odd)


@functools.lru_cache(maxsize=None)
def _sqr_program(p: tuple, n0: int):
    return montgomery_sqr_asm(p, n0)


@functools.lru_cache(maxsize=None)
def _dot_program(p: tuple, n0: int, terms: int):
    return montgomery_dot_asm(p, n0, terms)


def montgomery_sqr(a, p: Sequence[int], n0: int) -> list:
    """a²·R⁻¹ mod p (``montgomery_sqr_asm``)."""
    return call(_sqr_program(tuple(p), n0), len(p), list(a))


def montgomery_dot(pairs, p: Sequence[int], n0: int) -> list:
    """Σ a·b·R⁻¹ mod p over ``pairs`` of limb lists, one reduction for all
    (``montgomery_dot_asm``; at most ``dot_terms(p)`` pairs)."""
    return call(_dot_program(tuple(p), n0, len(pairs)), len(p),
                [x for a, b in pairs for x in list(a) + list(b)])


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
