"""The CPU path of every formula: record once, run as a register machine.

XLA:CPU compiles straight-line multi-limb code slowly (a G1 addition took ~6 s
and a G2 fixed-base multiplication 6 minutes with the formulas traced
directly).  So off the GPU a formula is not traced into XLA at all.  Instead:

1. ``Recorder`` stands in for ``FpArith``: every base-field operation a formula
   performs (through Fp2Arith, CurveArith, ... unchanged) appends one
   instruction to a straight-line program over virtual registers.  Loops are
   unrolled in Python and constant exponent bits decide at record time, so the
   program has no control flow.
2. Registers are allocated by liveness (a linear scan), so the register file
   stays small even for programs of 10⁵ instructions.
3. ``run`` executes the program with ONE ``lax.fori_loop`` whose body is a
   ``lax.switch`` over the dozen instruction kinds, each applied to whole
   ``(L, N)`` registers; the arithmetic kinds are written for XLA:CPU's fusion
   (lazy uint64 columns, see ``_mont_mul``), the rest reuse ``ops.limbs``.

The compiled XLA program is therefore the same small interpreter for every
formula of a field (compile ≈ 1–2 s), and the program is data.
"""
from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
from jax import lax

from ops import limbs
from ops.limbs import to_limbs, u32

# instruction kinds
MUL, ADD, SUB, NEG, SEL, ISZERO, EQ, AND, OR, NOT, BIT, LTP = range(12)


class Val:
    """A virtual register holding one base-field element (or raw limbs)."""
    __slots__ = ("rec", "id")

    def __init__(self, rec, id_):
        self.rec, self.id = rec, id_


class Flag(Val):
    """A virtual register holding a per-lane boolean (limb 0 is 0 or 1)."""
    __slots__ = ()

    def __and__(self, other):
        return self.rec._emit(AND, self, other, cls=Flag)

    def __or__(self, other):
        return self.rec._emit(OR, self, other, cls=Flag)

    def __invert__(self):
        return self.rec._emit(NOT, self, self, cls=Flag)


class Recorder:
    """Records the base-field operations of a formula (the FpArith interface)."""

    def __init__(self, base):
        self.base = base
        self.p, self.L, self.R = base.p, base.L, base.R
        self.code: list[tuple] = []          # (op, dst, a, b, c)
        self.n = 0                           # SSA values so far
        self.consts: dict[int, Val] = {}     # Montgomery value -> register
        self.const_vals: list[tuple[int, int]] = []

    # ---- values
    def _new(self, cls=Val):
        v = cls(self, self.n)
        self.n += 1
        return v

    def _emit(self, op, a, b=None, c=None, imm=0, cls=Val):
        v = self._new(cls)
        self.code.append((op, v.id, a.id, (b or a).id, c.id if c is not None else imm))
        return v

    def input(self):
        return self._new()

    def const(self, x: int, like=None):
        m = x % self.p * self.R % self.p
        if m not in self.consts:
            v = self._new()
            self.consts[m] = v
            self.const_vals.append((v.id, m))
        return self.consts[m]

    def zero(self, like=None):
        return self.const(0)

    def one(self, like=None):
        return self.const(1)

    def like(self, v):
        return None

    # ---- ring operations
    def add(self, a, b):
        return self._emit(ADD, a, b)

    def sub(self, a, b):
        return self._emit(SUB, a, b)

    def neg(self, a):
        return self._emit(NEG, a)

    def dbl(self, a):
        return self._emit(ADD, a, a)

    def mul(self, a, b):
        return self._emit(MUL, a, b)

    def sqr(self, a):
        return self._emit(MUL, a, a)

    # composite operations: FpArith's own definitions, run against the recorder
    def mul_small(self, a, k):
        return type(self.base).mul_small(self, a, k)

    def muls(self, pairs):
        return [self.mul(x, y) for x, y in pairs]

    dot_terms = 1       # a sum of products is recorded as its products and sums

    def dots(self, groups):
        from ops.field import dots_by_products   # ops.field imports this module
        return dots_by_products(self, groups)

    def pow(self, a, e):
        return type(self.base).pow(self, a, e)

    def inv(self, a):
        return type(self.base).inv(self, a)

    def sqrt(self, a):
        return type(self.base).sqrt(self, a)

    def to_montgomery(self, v):
        return type(self.base).to_montgomery(self, v)

    def from_montgomery(self, a):
        return type(self.base).from_montgomery(self, a)

    # ---- predicates, selection, bits
    def is_zero(self, a):
        return self._emit(ISZERO, a, cls=Flag)

    def eq(self, a, b):
        return self._emit(EQ, a, b, cls=Flag)

    def lt_p(self, v):
        return self._emit(LTP, v, cls=Flag)

    def select(self, c, a, b):
        if isinstance(c, (bool, np.bool_)):
            return a if c else b
        return self._emit(SEL, a, b, c)

    def scalar_bit(self, k, pos: int):
        return self._emit(BIT, k, imm=int(pos), cls=Flag)

    # ---- control flow: unrolled at record time
    def loop(self, n, body, init):
        carry = init
        for i in range(n):
            carry = body(i, carry)
        return carry

    def exp_bit(self, bits, i):
        return bool(bits[i])


@dataclasses.dataclass(frozen=True)
class Program:
    """A register-allocated straight-line program."""
    code: np.ndarray             # (T, 5) int32: op, dst, a, b, c/imm
    n_regs: int
    inputs: tuple                # physical register of each input value
    outputs: tuple               # physical register of each output value
    consts: tuple                # (physical register, Montgomery int)


def compile_program(rec: Recorder, inputs: list, outputs: list) -> Program:
    """Allocate physical registers by liveness (linear scan)."""
    code = rec.code
    last = {}
    for t, (op, d, a, b, c) in enumerate(code):
        last[a] = t
        last[b] = t
        if op == SEL:
            last[c] = t
    end = len(code)
    pinned = {v.id for v in outputs}
    for v in pinned:
        last[v] = end
    phys: dict[int, int] = {}
    free: list[int] = []
    n_regs = 0

    def alloc():
        nonlocal n_regs
        if free:
            return free.pop()
        n_regs += 1
        return n_regs - 1

    for v in inputs:
        phys[v.id] = alloc()
    for vid, _ in rec.const_vals:
        phys[vid] = alloc()
    out = np.zeros((len(code), 5), dtype=np.int32)
    for t, (op, d, a, b, c) in enumerate(code):
        srcs = {a, b} | ({c} if op == SEL else set())
        out[t] = (op, 0, phys[a], phys[b], phys[c] if op == SEL else c)
        for s in srcs:                       # sources that die here free their registers
            if last.get(s, -1) == t and s not in pinned:
                free.append(phys[s])
        phys[d] = alloc()
        out[t, 1] = phys[d]
        if last.get(d, -1) < t + 1 and d not in pinned:   # never read
            free.append(phys[d])
    return Program(out, max(n_regs, 1), tuple(phys[v.id] for v in inputs),
                   tuple(phys[v.id] for v in outputs),
                   tuple((phys[vid], m) for vid, m in rec.const_vals))


# ---------------------------------------------------------------- CPU arithmetic
# XLA:CPU evaluates every element of a fusion's output on its own and fuses a
# cheap producer into *each* consumer (no multi-output fusion), so limb code
# written as carry chains over rows (ops.limbs, right for one GPU thread per
# lane) makes every output limb recompute the whole chain: a 12-limb Montgomery
# product became ~31,000 fused ops per lane (12 outputs x the full CIOS).  The
# branches below are shaped for that compiler instead: columns are kept *lazy*
# (uint64 sums whose carries are not propagated, so each column is independent),
# and the few values many outputs share are stored once by ``_keep``.

def _keep(v):
    """v, computed once and stored.  XLA:CPU duplicates cheap producers into
    every consumer but never a reduce (``InstructionFusion::IsExpensive``), so a
    2-way sum with zero is a fusion boundary that costs one pass over v.
    (``lax.optimization_barrier`` is dropped before fusion on the CPU.)"""
    return jnp.sum(jnp.stack([v, jnp.zeros_like(v)]), axis=0, dtype=v.dtype)


def _canon(T, p):
    """Lazy columns -> canonical limbs.

    T: (L, N) int64 with t = sum_j T_j 2^(32j) in [0, 2p) (columns may exceed
    32 bits or be negative); returns t mod p as (L, N) uint32.  With
    P' = 2^(32L) - p, t >= p iff t + P' carries out of 2^(32L); both carry
    chains (of T and of T + P') are propagated one limb at a time into stored
    (2, N) rows, then every limb takes its carry from the chain q selects."""
    L = len(p)
    pn = to_limbs((1 << (32 * L)) - sum(v << (32 * j) for j, v in enumerate(p)), L)
    add = jnp.asarray(np.stack([np.zeros(L, np.int64), np.array(pn, np.int64)], 1))[:, :, None]
    cin = [jnp.zeros((2,) + T.shape[1:], jnp.int64)]          # carry into limb k: (T, T + P')
    for k in range(L - 1):
        cin.append(_keep((T[k] + add[k] + cin[-1]) >> 32))
    q = ((T[L - 1] + add[L - 1, 1] + cin[-1][1]) >> 32) != 0  # t >= p
    C = jnp.stack(cin)                                        # (L, 2, N)
    out = T + jnp.where(q, add[:, 1], add[:, 0]) + jnp.where(q, C[:, 1], C[:, 0])
    return (out & jnp.int64(0xFFFFFFFF)).astype(jnp.uint32)


def _mont_mul(x, y, p, n0: int):
    """x·y·R⁻¹ mod p for canonical (L, N) uint32 x, y: CIOS over the limbs of y
    with lazy columns.  Step i: T <- (T + x·y_i + m·p) / 2^32 with
    m = (T_0 + lo(x_0 y_i))·n0 mod 2^32; every product's low word goes to its
    column and its high word to the next one, only column 0's carry moves (it
    is exactly divisible), so each stored column is a sum of <= 4 words per
    step (< 2^38 after L steps).  The result (< 2p) is then ``_canon``-ed."""
    L, n = x.shape
    u64, mask = jnp.uint64, 0xFFFFFFFF
    a = x.astype(u64)
    pc = jnp.asarray(np.array(p, np.uint64))[:, None]                 # (L, 1)
    zrow = jnp.zeros((1, n), u64)
    a_up = jnp.concatenate([a[1:], zrow])                             # a_(j+1)
    p_up = jnp.concatenate([pc[1:], jnp.zeros((1, 1), u64)])          # p_(j+1)
    first = jnp.asarray(np.arange(L) == 0)[:, None]
    T = None
    for i in range(L):
        b = y[i].astype(u64)
        t0 = (a[0] * b) & mask if T is None else T[0] + ((a[0] * b) & mask)
        m = _keep(((t0 & mask) * u64(n0)) & mask)
        c0 = (t0 + ((m * pc[0]) & mask)) >> 32
        new = (jnp.where(first, c0, u64(0)) + ((a_up * b) & mask) + ((a * b) >> 32)
               + ((p_up * m) & mask) + ((pc * m) >> 32))
        if T is not None:
            new = new + jnp.concatenate([T[1:], zrow])
        T = _keep(new)
    return _canon(T.astype(jnp.int64), p)


def _branches(base):
    """One function per instruction kind: (x, y, z, imm) -> (L, N) register.

    MUL, ADD, SUB and NEG are the lazy-column forms above (ADD: t = x + y,
    SUB: t = x - y + p, NEG: t = p - x, each in [0, 2p), then ``_canon``); the
    predicates use the unrolled limb code of ``ops.limbs`` (one output row,
    nothing to duplicate)."""
    L, pl = base.L, base.pl
    rows = lambda x: [x[i] for i in range(L)]
    i64 = lambda v: v.astype(jnp.int64)
    pcol = jnp.asarray(np.array(pl, np.int64))[:, None]

    def flag(b):
        z = jnp.zeros((L - 1,) + b.shape, jnp.uint32)
        return jnp.concatenate([b.astype(jnp.uint32)[None], z])

    return [
        lambda x, y, z, i: _mont_mul(x, y, pl, base.n0),                         # MUL
        lambda x, y, z, i: _canon(i64(x) + i64(y), pl),                           # ADD
        lambda x, y, z, i: _canon(i64(x) - i64(y) + pcol, pl),                    # SUB
        lambda x, y, z, i: _canon(pcol - i64(x), pl),                             # NEG
        lambda x, y, z, i: jnp.where(z[0] != 0, x, y),                            # SEL
        lambda x, y, z, i: flag(limbs.is_zero(rows(x))),                          # ISZERO
        lambda x, y, z, i: flag(limbs.eq(rows(x), rows(y))),                      # EQ
        lambda x, y, z, i: x & y,                                                 # AND
        lambda x, y, z, i: x | y,                                                 # OR
        lambda x, y, z, i: flag(x[0] == 0),                                       # NOT
        lambda x, y, z, i: flag(((lax.dynamic_index_in_dim(x, i >> 5, 0, False)
                                  >> (i & 31).astype(jnp.uint32)) & u32(1)) != 0),  # BIT
        lambda x, y, z, i: flag(limbs.sub_raw(rows(x), list(pl), False)[1] != 0),   # LTP
    ]


BLOCK = 1 << 10     # lanes per pass: wider batches run block by block (cache-resident columns)


def run(base, prog: Program, inputs: list):
    """Execute ``prog`` on input registers ``(L, N)`` (uint32); must be traced
    with 64-bit types enabled.  Returns the output registers.

    Above ``BLOCK`` lanes the batch is padded to whole blocks and the program
    runs on one block after another (``lax.map``): the lazy columns of a block
    stay in cache, which more than pays the per-instruction cost per block
    (bench/interp.py: 2^13 and 2^16 lanes ran 2-3x slower per lane than 2^10)."""
    L = base.L
    n = inputs[0].shape[1] if inputs else 1
    if n <= BLOCK:
        return _run_block(base, prog, inputs, n)
    nb = -(-n // BLOCK)
    blocks = tuple(jnp.pad(x, ((0, 0), (0, nb * BLOCK - n))).reshape(L, nb, BLOCK).transpose(1, 0, 2)
                   for x in inputs)
    outs = lax.map(lambda xs: tuple(_run_block(base, prog, list(xs), BLOCK)), blocks)
    return [o.transpose(1, 0, 2).reshape(L, nb * BLOCK)[:, :n] for o in outs]


def _run_block(base, prog: Program, inputs: list, n: int):
    L = base.L
    regs = jnp.zeros((prog.n_regs, L, n), jnp.uint32)
    for r, x in zip(prog.inputs, inputs):
        regs = regs.at[r].set(x)
    for r, m in prog.consts:
        v = np.array(to_limbs(m, L), dtype=np.uint32)[:, None]
        regs = regs.at[r].set(jnp.broadcast_to(jnp.asarray(v), (L, n)))
    code = jnp.asarray(prog.code)
    branches = _branches(base)

    def step(t, regs):
        op, d, a, b, c = (code[t, j] for j in range(5))
        x, y = regs[a], regs[b]
        z = regs[jnp.clip(c, 0, prog.n_regs - 1)]
        v = lax.switch(op, branches, x, y, z, c)
        return lax.dynamic_update_index_in_dim(regs, v, d, 0)

    if len(prog.code):
        regs = lax.fori_loop(0, len(prog.code), step, regs)
    return [regs[r] for r in prog.outputs]
