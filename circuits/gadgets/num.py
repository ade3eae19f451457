"""Field elements as tensors: bellperson's ``AllocatedNum``.

A ``Num`` of shape S holds, in record mode, the variable ids ``(*S)`` and, in
witness mode, the Fr values ``(8, *S)`` (Montgomery limbs).  Every operation
is elementwise and, per element, allocates and constrains exactly as
bellperson does (rows listed with each method); a tensor of elements is done
element by element in row-major order.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from circuits.cs import LC, ONE, concat_lcs
from circuits.gadgets.boolean import IS, Bits
from ops.field import R_FR, Fr

NUM_BITS = R_FR.bit_length()          # 255
_POW2 = [1 << i for i in range(NUM_BITS)]


@dataclasses.dataclass(frozen=True)
class Num:
    """A tensor of allocated field elements."""
    shape: tuple
    var: np.ndarray | None = None     # int64 ids (record mode)
    value: object = None              # Fr (8, *shape) (witness mode)

    def lc(self, cs, coeff=1) -> LC:
        return cs.lc(self.var, coeff)

    def __getitem__(self, idx) -> "Num":
        var = None if self.var is None else self.var[idx]
        value = None
        if self.value is not None:
            idx = idx if isinstance(idx, tuple) else (idx,)
            value = self.value[(slice(None),) + idx]
        shape = (var if var is not None else value[0]).shape
        return Num(tuple(shape), var, value)

    # -- allocation
    @staticmethod
    def alloc(cs, shape, value=None) -> "Num":
        """AllocatedNum::alloc: one aux variable per element, no row."""
        shape = tuple(shape)
        r = cs.alloc(shape, value)
        return Num(shape, *((r, None) if cs.recording else (None, r)))

    @staticmethod
    def alloc_input(cs, shape, value=None) -> "Num":
        """AllocatedNum::alloc_input: one public input per element, no row."""
        shape = tuple(shape)
        r = cs.alloc_input(shape, value)
        return Num(shape, *((r, None) if cs.recording else (None, r)))

    def inputize(self, cs) -> "Num":
        """AllocatedNum::inputize: a public input per element and the row
        input·1 = x.  Returns the inputs."""
        inp = Num.alloc_input(cs, self.shape, lambda: self.value)
        cs.enforce(lambda: (inp.lc(cs), cs.lc(np.full(self.shape, ONE)), self.lc(cs)))
        return inp

    # -- arithmetic
    def _binary(self, cs, other, value, rows) -> "Num":
        r = Num.alloc(cs, self.shape, value)
        cs.enforce(lambda: rows(r))
        return r

    def mul(self, cs, other: "Num") -> "Num":
        """x·y: row x·y = r."""
        return self._binary(cs, other, lambda: Fr.mul(self.value, other.value),
                            lambda r: (self.lc(cs), other.lc(cs), r.lc(cs)))

    def square(self, cs) -> "Num":
        """x²: row x·x = r."""
        return self._binary(cs, self, lambda: Fr.square(self.value),
                            lambda r: (self.lc(cs), self.lc(cs), r.lc(cs)))

    def add(self, cs, other: "Num") -> "Num":
        """x + y: row (x + y)·1 = r."""
        return self._binary(cs, other, lambda: Fr.add(self.value, other.value),
                            lambda r: (self.lc(cs) + other.lc(cs),
                                       cs.lc(np.full(self.shape, ONE)), r.lc(cs)))

    # -- bits
    def to_bits_le(self, cs) -> Bits:
        """AllocatedNum::to_bits_le (not strict: a value's representation
        x + r would also pass if it fit in 255 bits): the 255 little-endian
        bits, each with its boolean row, then 0·0 = Σ 2^i·b_i - x.
        Returns Bits ``(*shape, 255)``."""
        shape = self.shape
        b = cs.alloc(shape + (NUM_BITS,), lambda: canonical_bits(self.value, NUM_BITS), bit=True)

        def rows():
            bits = cs.lc(b)
            zero = cs.zero_lc(shape + (1,))
            pack = (cs.lc(b, _POW2).sum(-1) - self.lc(cs))[..., None]
            return (concat_lcs([cs.lc(ONE) - bits, zero]), concat_lcs([bits, zero]),
                    concat_lcs([cs.zero_lc(shape + (NUM_BITS,)), pack]))
        cs.enforce(rows)
        return _bits(cs, b)

    def to_bits_le_strict(self, cs) -> Bits:
        """AllocatedNum::to_bits_le_strict: the 255 little-endian bits with the
        comparison against r - 1 (bits under a run of ones of r - 1 are
        allocated, each run is AND-ed with the previous runs, bits under a
        zero of r - 1 must be 0 when all bits above matched r - 1), then
        0·0 = Σ 2^i·b_i - x.  Returns Bits ``(*shape, 255)``."""
        t = _strict_template()
        shape = self.shape
        n = t.kind.size

        def value():
            bits = canonical_bits(self.value, NUM_BITS)                     # (*S, 255)
            ands = jnp.sum(bits[..., :, None] * jnp.asarray(t.and_sets), -2) == t.and_sets.sum(0)
            allv = jnp.concatenate([bits, ands.astype(jnp.uint32)], -1)
            return allv[..., t.source]

        v = cs.alloc(shape + (n,), value, bit=True)

        def rows():
            def side(src, coef):
                var = np.where(src < 0, ONE, v[..., np.maximum(src, 0)])
                ids = np.broadcast_to(cs.coeffs.ids(coef), var.shape)
                return LC(var, ids, cs.coeffs)
            pack = (cs.lc(v[..., t.bit_slot], _POW2).sum(-1) - self.lc(cs))[..., None]
            zero = cs.zero_lc(shape + (1,))
            return (concat_lcs([side(*t.a), zero]), concat_lcs([side(*t.b), zero]),
                    concat_lcs([side(*t.c), pack]))
        cs.enforce(rows)
        return _bits(cs, v[..., t.bit_slot])


jax.tree_util.register_pytree_node(
    Num, lambda x: ((x.value,), x.shape), lambda shape, ch: Num(shape, None, ch[0]))


def _bits(cs, r) -> Bits:
    kind = np.full(np.shape(r), IS, np.int8)
    return Bits(kind, r, None) if cs.recording else Bits(kind, None, r)


def canonical_bits(value, n: int):
    """Witness mode: Fr values ``(8, *S)`` -> the low n bits of their
    canonical integers, little-endian, uint32 ``(*S, n)``."""
    limbs = Fr.from_montgomery(value)                                    # (8, *S)
    sh = jnp.arange(32, dtype=jnp.uint32)
    bits = (jnp.moveaxis(limbs, 0, -1)[..., None] >> sh) & 1             # (*S, 8, 32)
    return bits.reshape(bits.shape[:-2] + (Fr.L * 32,))[..., :n].astype(jnp.uint32)


class _Template(NamedTuple):
    """The fixed allocation sequence of to_bits_le_strict for Fr: one slot per
    allocated variable, in bellperson's order, each with its row."""
    kind: np.ndarray        # (n,) 0 bit, 1 AND, 2 conditional bit
    a: tuple                # (src (n, 3), coeff (n, 3)): src -1 = ONE, else a slot
    b: tuple                # (src (n, 1), coeff (n, 1))
    c: tuple                # (src (n, 1), coeff (n, 1))
    bit_slot: np.ndarray    # (255,) the slot of bit i (little-endian)
    and_sets: np.ndarray    # (255, n_and) 0/1: the bits each AND covers
    source: np.ndarray      # (n,) index into [bits ‖ AND values] of each slot's value


@functools.lru_cache(maxsize=1)
def _strict_template() -> _Template:
    """Walk the bits of r - 1 from the top as bellperson does: under a one,
    allocate the bit (row (1 - b)·b = 0) and add it to the current run; at a
    zero, first AND the current run (plus the previous runs' AND) into one bit
    (rows x·y = z), then allocate the bit conditionally: (1 - run - b)·b = 0."""
    rm1 = R_FR - 1
    kinds, a_src, a_co, b_src, c_src, source = [], [], [], [], [], []
    bit_slot = np.zeros(NUM_BITS, np.int64)
    covers, slot_cover = [], {}

    def new(kind, a, b, c, src):
        kinds.append(kind)
        a_src.append([s for s, _ in a] + [-1] * (3 - len(a)))
        a_co.append([co for _, co in a] + [0] * (3 - len(a)))
        b_src.append(b)
        c_src.append(c)
        source.append(src)
        return len(kinds) - 1

    last_run, run = None, []
    for pos in range(NUM_BITS - 1, -1, -1):
        if (rm1 >> pos) & 1:
            s = len(kinds)
            new(0, [(-1, 1), (s, -1)], s, -1, pos)
            slot_cover[s] = {pos}
            run.append(s)
            bit_slot[pos] = s
            continue
        if run:
            if last_run is not None:
                run.append(last_run)
            cur = run[0]
            for other in run[1:]:
                s = len(kinds)
                cov = slot_cover[cur] | slot_cover[other]
                covers.append(cov)
                new(1, [(cur, 1)], other, s, NUM_BITS + len(covers) - 1)
                slot_cover[s] = cov
                cur = s
            last_run, run = cur, []
        s = len(kinds)
        new(2, [(-1, 1), (last_run, -1), (s, -1)], s, -1, pos)
        bit_slot[pos] = s
    if run:
        raise AssertionError("r - 1 must end in a run of zeros")
    and_sets = np.zeros((NUM_BITS, len(covers)), np.uint32)
    for j, cov in enumerate(covers):
        and_sets[sorted(cov), j] = 1
    c_src = np.asarray(c_src)[:, None]
    return _Template(np.asarray(kinds), (np.asarray(a_src), np.asarray(a_co, dtype=object)),
                     (np.asarray(b_src)[:, None], np.ones((len(kinds), 1), dtype=object)),
                     (c_src, np.where(c_src < 0, 0, 1).astype(object)),
                     bit_slot, and_sets, np.asarray(source))
