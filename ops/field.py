"""Prime fields in Montgomery form: BLS12-381 Fr (255-bit) and Fq (381-bit).

Two layers:

* ``FpArith`` — the *formula layer*: arithmetic on limb lists (``ops.limbs``),
  used inside kernels and composed into curve formulas.
* ``PrimeField`` — the *array API*: elements are ``uint32`` arrays of shape
  ``(L, *batch)`` (limb-major, least significant limb first, Montgomery form,
  canonical in [0, p)), every operation elementwise over any batch shape, each
  one a single kernel (``ops.elementwise``), all of them jit-able, vmap-able
  and usable on the CPU; plus host conversions (Python ints, numpy object
  arrays, little/big-endian bytes) that validate their input.

Math: x is stored as x·R mod p, R = 2^(32L); mul(a, b) = a·b·R⁻¹ (CIOS);
inverse by Fermat (x^(p-2), 0 -> 0); batch inverse by Montgomery's trick.
"""
from __future__ import annotations

import dataclasses
import functools
import secrets
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ops import limbs, ptx
from ops.elementwise import DEFAULT, KernelConfig, elementwise
from ops.limbs import Unroll, to_limbs, u32

P_FQ = 0x1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab
R_FR = 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001


def _bits_msb_first(e: int) -> list[int]:
    return [int(b) for b in bin(e)[2:]]


def pow_by_constant(ar, a, e: int):
    """a^e in any arithmetic ``ar`` (Fp, Fp2, or a recorder of either) that
    has one, sqr, mul, select, loop and exp_bit."""
    if e < 0:
        raise ValueError("pow: negative exponent; use inv")
    if e == 0:
        return ar.one(ar.like(a))
    bits = tuple(_bits_msb_first(e))

    def body(i, acc):
        sq = ar.sqr(acc)
        return ar.select(ar.exp_bit(bits, i + 1), ar.mul(sq, a), sq)

    return ar.loop(len(bits) - 1, body, a)


@functools.lru_cache(maxsize=None)
def _jitted(fn, static: tuple):
    return jax.jit(lambda *xs: fn(*xs, *static))


def _traced_once(fn, static: tuple, *xs):
    """fn(*xs, *static), as a call of a jitted function when every operand
    is an array: a formula calls the same limb routine hundreds of times on
    operands of one shape, and jit traces it once and reuses the jaxpr (the
    Pallas form of the GPU's merged MSM traced in 14.6 s with every call
    traced, bench/NOTES.md session 14); the Triton lowering inlines the
    call.  Operands holding Python or numpy ints (constants) are traced
    inline: jit would make them int32 arguments."""
    if all(isinstance(v, jax.Array) for x in xs for v in x):
        return _jitted(fn, static)(*xs)
    return fn(*xs, *static)


def term_sign(term) -> int:
    """A ``dots`` term's sign: (a, b) adds a·b, (a, b, -1) subtracts it."""
    s = term[2] if len(term) > 2 else 1
    if s not in (1, -1):
        raise ValueError(f"dots: a term's sign is 1 or -1, got {s!r}")
    return s


def dots_by_products(F, groups) -> list:
    """[Σ_(a,b,±) ∈ g ±a·b for g in groups] over any field arithmetic F: all
    the products as one group (``F.muls``), then the sums and differences."""
    prods = F.muls([t[:2] for g in groups for t in g])
    out, k = [], 0
    for g in groups:
        acc = prods[k] if term_sign(g[0]) > 0 else F.neg(prods[k])
        for t in g[1:]:
            k += 1
            acc = (F.add if term_sign(t) > 0 else F.sub)(acc, prods[k])
        k += 1
        out.append(acc)
    return out


@dataclasses.dataclass(frozen=True)
class FpArith:
    """Arithmetic of F_p on limb lists (the formula layer).  Values are lists
    of L rows (Montgomery form, canonical); ``like`` is any row whose shape
    constants should take.  The formulas (``ops.tower``, ``ops.curve``,
    ``ops.fq12``) see only this interface, which the recorders stand in for
    (``ops.interpret.Recorder``, ``ops.fq12.RoundRecorder``): a new operation
    (as ``dots`` and ``dot_terms``) goes into all three."""
    p: int
    unroll: Unroll = Unroll()
    ptx: tuple = ()         # operations done as inline PTX (CUDA kernels only: ops.ptx)

    @functools.cached_property
    def L(self) -> int:
        return -(-self.p.bit_length() // 32)

    @functools.cached_property
    def pl(self) -> tuple:
        return tuple(to_limbs(self.p, self.L))

    @functools.cached_property
    def n0(self) -> int:
        return (-pow(self.p, -1, 1 << 32)) % (1 << 32)

    @functools.cached_property
    def R(self) -> int:
        return (1 << (32 * self.L)) % self.p

    @property
    def _rolled(self) -> bool:
        return not self.unroll.chains

    # ---- constants
    def const(self, x: int, like):
        """Montgomery form of the integer x as rows shaped like ``like``."""
        z = jnp.zeros_like(like)
        return [z + u32(v) for v in to_limbs(x % self.p * self.R % self.p, self.L)]

    def zero(self, like):
        return [jnp.zeros_like(like)] * self.L

    def one(self, like):
        return self.const(1, like)

    # ---- ring operations (traced once per operand shape: ``_traced_once``)
    def add(self, a, b):
        if "add" in self.ptx:
            return ptx.add_mod(a, b, self.pl)
        return _traced_once(limbs.add_mod, (self.pl, self._rolled), a, b)

    def sub(self, a, b):
        if "sub" in self.ptx:
            return ptx.sub_mod(a, b, self.pl)
        return _traced_once(limbs.sub_mod, (self.pl, self._rolled), a, b)

    def neg(self, a):
        if "sub" in self.ptx:
            return ptx.sub_mod([0] * self.L, a, self.pl)
        return _traced_once(limbs.neg_mod, (self.pl, self._rolled), a)

    def dbl(self, a):
        return self.add(a, a)

    def mul(self, a, b):
        if "mul" in self.ptx:
            return ptx.montgomery_mul(a, b, self.pl, self.n0, rolled=not self.unroll.mul,
                                      rows_per_step=self.unroll.mul_rows)
        return _traced_once(limbs.montgomery_mul, (self.pl, self.n0, self.unroll), a, b)

    def sqr(self, a):
        if "sqr" in self.ptx:
            return ptx.montgomery_sqr(a, self.pl, self.n0)
        return self.mul(a, a)

    @functools.cached_property
    def dot_terms(self) -> int:
        """The most products a sum computes with one reduction (``dots``): 1
        without PTX ``dot`` (a sum is its products' sum), else as the modulus
        leaves room (``ops.ptx.dot_terms``: Fq 8, Fr 1)."""
        return ptx.dot_terms(self.pl) if "dot" in self.ptx else 1

    def dots(self, groups):
        """[Σ_(a,b,±) ∈ g ±a·b for g in groups], a term (a, b) or (a, b, -1):
        with PTX ``dot``, each sum of products in one Montgomery reduction
        (``ops.ptx.montgomery_dot``, a subtracted term's a negated; where the
        modulus leaves room: Fq up to 8 products, Fr none), else
        ``dots_by_products``."""
        if max(len(g) for g in groups) <= self.dot_terms > 1:
            return [ptx.montgomery_dot([(t[0] if term_sign(t) > 0 else self.neg(t[0]), t[1])
                                        for t in g], self.pl, self.n0)
                    if len(g) > 1 else dots_by_products(self, [g])[0] for g in groups]
        return dots_by_products(self, groups)

    def mul_small(self, a, k: int):
        """k·a for a small positive integer constant k, by doubling and adding."""
        if k < 1:
            raise ValueError("mul_small needs k >= 1")
        acc = a
        for bit in _bits_msb_first(k)[1:]:
            acc = self.dbl(acc)
            if bit:
                acc = self.add(acc, a)
        return acc

    def muls(self, pairs):
        """A group of independent products.  Inline, or (``unroll.table``) one
        loop over the group whose step j picks its operands by a select chain
        over the group's distinct inputs."""
        if not self.unroll.table or len(pairs) < 2:
            return [self.mul(x, y) for x, y in pairs]
        regs, slot = [], {}
        for v in (v for ab in pairs for v in ab):
            if id(v) not in slot:
                slot[id(v)] = len(regs)
                regs.append(v)
        ia = [slot[id(x)] for x, _ in pairs]
        ib = [slot[id(y)] for _, y in pairs]

        def pick(j, table):
            out = regs[table[0]]
            for s in range(1, len(table)):
                if table[s] != table[s - 1]:
                    out = self.select(j >= s, regs[table[s]], out)
            return out

        def step(j, res):
            return res[1:] + [self.mul(pick(j, ia), pick(j, ib))]

        zero = self.zero(self.like(pairs[0][0]))
        return lax.fori_loop(0, len(pairs), step, [zero] * len(pairs))

    # ---- predicates and selection
    def is_zero(self, a):
        return limbs.is_zero(a)

    def eq(self, a, b):
        return limbs.eq(a, b)

    def select(self, c, a, b):
        return limbs.select(c, a, b)

    # ---- control flow (kernels: rolled loops; ops.interpret: unrolled at record time)
    def like(self, v):
        """A row with the batch shape of the value v (for constants)."""
        return v[0]

    def loop(self, n: int, body, init):
        """carry = body(i, carry) for i in 0..n-1, kept as ONE loop."""
        return lax.fori_loop(0, n, body, init)

    def exp_bit(self, bits: tuple, i):
        """bits[i] for a constant bit tuple and a (traced) loop index i: the
        32-bit word holding it is picked by a select chain."""
        nw = -(-len(bits) // 32)
        words = [int("".join(map(str, bits[32 * w:32 * w + 32])).ljust(32, "0"), 2)
                 for w in range(nw)]
        w = u32(words[0])
        for k in range(1, nw):
            w = jnp.where(i >= 32 * k, u32(words[k]), w)
        return ((w >> (u32(31) - (i & 31).astype(jnp.uint32))) & u32(1)) != 0

    def scalar_bit(self, k, pos):
        """Per lane: bit ``pos`` of the integer held in raw limb rows k."""
        if isinstance(pos, int):                     # a constant position: no select chain
            return ((k[pos // 32] >> u32(pos % 32)) & u32(1)) != 0
        word = k[0]
        for w in range(1, len(k)):
            word = jnp.where(pos >= 32 * w, k[w], word)
        return ((word >> (pos & 31).astype(jnp.uint32)) & u32(1)) != 0

    # ---- exponentiation
    def pow(self, a, e: int):
        """a^e for a constant e >= 0: left-to-right square-and-multiply as ONE
        loop over the bits of e, so the loop body (a square and a product)
        appears once in a kernel."""
        return pow_by_constant(self, a, e)

    def inv(self, a):
        """a^(p-2): the inverse for a != 0, and 0 for a = 0."""
        return self.pow(a, self.p - 2)

    def sqrt(self, a):
        """(root, exists) for p ≡ 3 mod 4: root = a^((p+1)/4), exists iff root² = a."""
        if self.p % 4 != 3:
            raise ValueError("sqrt is implemented for p ≡ 3 mod 4 (Fq, Fq2); this field needs "
                             "Tonelli–Shanks, which is not implemented")
        r = self.pow(a, (self.p + 1) // 4)
        return r, self.eq(self.sqr(r), a)

    # ---- representation changes (inside formulas)
    def to_montgomery(self, v):
        """Canonical integer limbs v < p -> Montgomery form: v·(R² mod p)·R⁻¹."""
        return self.mul(v, self.const(self.R, self.like(v)))

    def from_montgomery(self, a):
        """Montgomery form -> canonical integer limbs: a·1·R⁻¹."""
        return self.mul(a, self.const(pow(self.R, -1, self.p), self.like(a)))

    def lt_p(self, v):
        """Lanes where the integer limbs v are < p (canonical)."""
        _, borrow = limbs.sub_raw(v, list(self.pl), self._rolled)
        return borrow != 0


class FieldOps:
    """The elementwise array operations every field shares.  A subclass has
    ``prefix`` (its element layout), ``base_arith`` (the FpArith its formulas
    reduce to), ``lift(ar)`` (its arithmetic over a base arithmetic), a
    ``name`` and a ``config``.  Every method is one jitted kernel."""

    def _ew(self, op, n_in, out="e", name=None, extra_in=()):
        """Elementwise kernel of ``op``: a method name of the arithmetic, or a
        formula(ar, *xs).  out: one letter per output, 'e' element, 'b' bool,
        'f' base-field element; extra_in: prefixes of further arguments."""
        f = op if callable(op) else (lambda ar, *xs: getattr(self.lift(ar), op)(*xs))
        L = self.base_arith.L
        types = {"e": (tuple(self.prefix), jnp.uint32), "b": ((), jnp.bool_), "f": ((L,), jnp.uint32)}
        return elementwise(f, [tuple(self.prefix)] * n_in + list(extra_in), [types[o] for o in out],
                           self.base_arith, self.config, name=f"{self.name}_{name or op}")

    @functools.partial(jax.jit, static_argnums=0)
    def add(self, a, b):
        return self._ew("add", 2)(a, b)

    @functools.partial(jax.jit, static_argnums=0)
    def sub(self, a, b):
        return self._ew("sub", 2)(a, b)

    @functools.partial(jax.jit, static_argnums=0)
    def neg(self, a):
        return self._ew("neg", 1)(a)

    @functools.partial(jax.jit, static_argnums=0)
    def double(self, a):
        return self._ew("dbl", 1)(a)

    @functools.partial(jax.jit, static_argnums=0)
    def mul(self, a, b):
        return self._ew("mul", 2)(a, b)

    @functools.partial(jax.jit, static_argnums=0)
    def square(self, a):
        return self._ew("sqr", 1)(a)

    @functools.partial(jax.jit, static_argnums=(0, 2))
    def pow(self, a, e: int):
        """a^e for a constant integer e >= 0 (one kernel: a loop over e's bits)."""
        if e < 0:
            raise ValueError("pow: negative exponent; use inv")
        return self._ew(lambda ar, x: self.lift(ar).pow(x, e), 1, name="pow")(a)

    @functools.partial(jax.jit, static_argnums=0)
    def inv(self, a):
        """Fermat inverse a^(p-2); maps 0 to 0."""
        return self._ew("inv", 1)(a)

    @functools.partial(jax.jit, static_argnums=0)
    def sqrt(self, a):
        """(root, exists): a square root where one exists (p ≡ 3 mod 4)."""
        return self._ew("sqrt", 1, out="eb")(a)

    @functools.partial(jax.jit, static_argnums=0)
    def eq(self, a, b):
        return self._ew("eq", 2, out="b")(a, b)

    @functools.partial(jax.jit, static_argnums=0)
    def is_zero(self, a):
        return self._ew("is_zero", 1, out="b")(a)

    @staticmethod
    def select(c, a, b):
        """Per element: a where c else b (c has the batch shape)."""
        return jnp.where(c, a, b)



@dataclasses.dataclass(frozen=True)
class PrimeField(FieldOps):
    """A prime field as an array API (see the module docstring).

    Arrays: ``(L, *batch)`` uint32, Montgomery form.  Every device method is
    jitted with the field as a static argument and is one elementwise kernel
    unless its docstring says otherwise.
    """
    name: str
    p: int
    config: KernelConfig = DEFAULT

    def __repr__(self):
        return f"PrimeField({self.name})"

    # ---------------------------------------------------------- structure
    @functools.cached_property
    def arith(self) -> FpArith:
        return FpArith(self.p, self.config.unroll)

    @property
    def L(self) -> int:
        return self.arith.L

    @property
    def prefix(self) -> tuple:
        return (self.L,)

    @property
    def nbytes(self) -> int:
        return (self.p.bit_length() + 7) // 8

    @property
    def R(self) -> int:
        return self.arith.R

    @property
    def base_arith(self) -> FpArith:
        """The prime-field arithmetic every formula of this field reduces to."""
        return self.arith

    def lift(self, ar):
        """The arithmetic of this field over base arithmetic ``ar`` (itself)."""
        return ar

    # ---------------------------------------------------------- host side
    def from_int(self, xs) -> np.ndarray:
        """Python int(s) (any nesting, or a numpy object array) in [0, p) ->
        Montgomery limbs ``(L, *shape)`` as a numpy uint32 array."""
        obj = np.asarray(xs, dtype=object)
        flat = obj.reshape(-1)
        out = np.empty((flat.size, self.L), dtype=np.uint32)
        for i, x in enumerate(flat):
            if not isinstance(x, (int, np.integer)) or isinstance(x, bool):
                raise TypeError(f"{self.name}.from_int: element {i} is {type(x).__name__}, not an int")
            x = int(x)
            if not 0 <= x < self.p:
                raise ValueError(f"{self.name}.from_int: element {i} = {x} is outside [0, p)")
            out[i] = to_limbs(x * self.R % self.p, self.L)
        return np.ascontiguousarray(out.T.reshape((self.L,) + obj.shape))

    def _raw_int(self, arr) -> np.ndarray:
        arr = np.asarray(arr)
        if arr.dtype != np.uint32 or arr.shape[:1] != (self.L,):
            raise ValueError(f"{self.name}: expected a uint32 array of shape ({self.L}, ...), "
                             f"got {arr.dtype} {arr.shape}")
        flat = arr.reshape(self.L, -1)
        vals = np.zeros(flat.shape[1], dtype=object)
        for j in range(self.L):
            vals = vals + (flat[j].astype(object) << (32 * j))
        return vals.reshape(arr.shape[1:])

    def to_int(self, arr):
        """Montgomery limbs -> canonical Python ints (numpy object array of the
        batch shape; a plain int for a single element)."""
        vals = self._raw_int(arr)
        if np.any(vals >= self.p):
            raise ValueError(f"{self.name}.to_int: array holds non-canonical limbs (>= p)")
        rinv = pow(self.R, -1, self.p)
        out = np.vectorize(lambda v: v * rinv % self.p, otypes=[object])(vals) if vals.size else vals
        return int(out) if out.ndim == 0 else out

    def from_bytes(self, data, byteorder: str = "little") -> np.ndarray:
        """Bytes of k canonical elements (each ``nbytes`` long) -> limbs
        ``(L,)`` for one element or ``(L, k)``.  Accepts ``bytes`` or a uint8
        array ``(*shape, nbytes)``."""
        if byteorder not in ("little", "big"):
            raise ValueError("byteorder must be 'little' or 'big'")
        single = isinstance(data, (bytes, bytearray, memoryview))
        buf = np.frombuffer(bytes(data), dtype=np.uint8) if single else np.asarray(data, np.uint8)
        if single:
            if len(buf) % self.nbytes or len(buf) == 0:
                raise ValueError(f"{self.name}.from_bytes: {len(buf)} bytes is not a positive "
                                 f"multiple of {self.nbytes}")
            buf = buf.reshape(-1, self.nbytes)
            if buf.shape[0] == 1:
                buf = buf[0]
        if buf.shape[-1:] != (self.nbytes,):
            raise ValueError(f"{self.name}.from_bytes: last axis must be {self.nbytes} bytes, "
                             f"got shape {buf.shape}")
        ints = np.empty(buf.shape[:-1], dtype=object)
        flat = buf.reshape(-1, self.nbytes)
        for i, row in enumerate(flat):
            ints.reshape(-1)[i] = int.from_bytes(row.tobytes(), byteorder)
        bad = [i for i, v in enumerate(ints.reshape(-1)) if v >= self.p]
        if bad:
            raise ValueError(f"{self.name}.from_bytes: element {bad[0]} is not canonical (>= p)")
        return self.from_int(ints)

    def to_bytes(self, arr, byteorder: str = "little"):
        """Canonical encoding: ``bytes`` for one element, else a uint8 array
        ``(*batch, nbytes)``."""
        ints = np.asarray(self.to_int(arr), dtype=object)
        out = np.zeros(ints.shape + (self.nbytes,), dtype=np.uint8)
        for idx, v in np.ndenumerate(ints):
            out[idx] = np.frombuffer(int(v).to_bytes(self.nbytes, byteorder), dtype=np.uint8)
        return out.tobytes() if ints.ndim == 0 else out

    def random_ints(self, n: int, rng=None) -> list[int]:
        """n uniform elements as Python ints; ``secrets`` (a CSPRNG) unless a
        ``random.Random`` is given (tests only)."""
        if rng is None:
            return [secrets.randbelow(self.p) for _ in range(n)]
        return [rng.randrange(self.p) for _ in range(n)]

    # ---------------------------------------------------------- device side
    @functools.partial(jax.jit, static_argnums=0)
    def to_montgomery(self, v):
        """Canonical integer limbs (< p) -> Montgomery form."""
        return self._ew("to_montgomery", 1)(v)

    @functools.partial(jax.jit, static_argnums=0)
    def from_montgomery(self, a):
        """Montgomery form -> canonical integer limbs (e.g. scalar bits)."""
        return self._ew("from_montgomery", 1)(a)

    @functools.partial(jax.jit, static_argnums=0)
    def is_canonical(self, v):
        """Lanes whose integer limbs are < p."""
        return self._ew("lt_p", 1, out="b")(v)

    def zeros(self, shape=()):
        return jnp.zeros((self.L,) + tuple(shape), jnp.uint32)

    def ones(self, shape=()):
        return self.constant(1, shape)

    def constant(self, x: int, shape=()):
        """The field element x (an int, reduced mod p) broadcast to ``shape``."""
        v = np.array(to_limbs(x % self.p * self.R % self.p, self.L), dtype=np.uint32)
        return jnp.broadcast_to(jnp.asarray(v).reshape((self.L,) + (1,) * len(shape)),
                                (self.L,) + tuple(shape))

    @functools.partial(jax.jit, static_argnums=(0, 2))
    def random(self, key, shape=()):
        """Uniform elements (exact: rejection sampling of top-masked limbs).
        For secrets use host CSPRNG ints (``random_ints``) instead of a key."""
        shape = tuple(shape)
        top_bits = self.p.bit_length() - 32 * (self.L - 1)
        mask = np.array([0xFFFFFFFF] * (self.L - 1) + [(1 << top_bits) - 1],
                        dtype=np.uint32).reshape((self.L,) + (1,) * len(shape))

        def draw(k):
            return jax.random.bits(k, (self.L,) + shape, jnp.uint32) & mask

        def cond(st):
            return ~jnp.all(st[1])

        def body(st):
            v, ok, k = st
            k, sub = jax.random.split(k)
            w = draw(sub)
            v = jnp.where(ok, v, w)
            return v, self.is_canonical(v), k

        k0, k1 = jax.random.split(key)
        v0 = draw(k0)
        v, _, _ = lax.while_loop(cond, body, (v0, self.is_canonical(v0), k1))
        return self.to_montgomery(v)

    @functools.partial(jax.jit, static_argnums=(0, 2))
    def batch_inv(self, a, chunk: int = 32):
        """Inverse of every element by Montgomery's trick (zero-safe: 0 -> 0).

        The batch is flattened to N and viewed as (chunk, N/chunk): a scan over
        the chunk axis forms prefix products, the N/chunk column totals are
        inverted recursively, and a backward scan peels off each inverse.  About
        3 multiplications per element plus one Fermat inversion per level.
        """
        batch = a.shape[1:]
        x = a.reshape(self.L, -1)
        n = x.shape[1]
        zero = self.is_zero(x)
        x = jnp.where(zero, self.ones((n,)), x)
        out = self._batch_inv_nonzero(x, chunk)
        out = jnp.where(zero, jnp.uint32(0), out)
        return out.reshape((self.L,) + batch)

    def _batch_inv_nonzero(self, x, chunk):
        n = x.shape[1]
        if n <= chunk:
            return self.inv(x)
        b = -(-n // chunk)
        pad = b * chunk - n
        if pad:
            x = jnp.concatenate([x, self.ones((pad,))], axis=1)
        xs = x.reshape(self.L, chunk, b).transpose(1, 0, 2)       # (chunk, L, b)

        def fwd(acc, xk):
            return self.mul(acc, xk), acc                         # exclusive prefix

        total, pre = lax.scan(fwd, self.ones((b,)), xs)
        tinv = self._batch_inv_nonzero(total, chunk)

        def bwd(t, args):
            xk, pk = args
            return self.mul(t, xk), self.mul(t, pk)

        _, invs = lax.scan(bwd, tinv, (xs, pre), reverse=True)
        return invs.transpose(1, 0, 2).reshape(self.L, -1)[:, :n]


Fq = PrimeField("Fq", P_FQ)
Fr = PrimeField("Fr", R_FR)
