"""Booleans as tensors: bellperson's ``Boolean`` (constant, ``Is(bit)``,
``Not(bit)``) and ``AllocatedBit`` with the same constant folding.

A ``Bits`` tensor has a static ``kind`` per element (``CONST0``, ``CONST1``,
``IS``, ``NOT``; numpy, identical in both modes) plus, in record mode, the
variable id of each non-constant element and, in witness mode, the value of
each element as ``uint32`` 0/1 (the Boolean's value, negation and constants
included).  Every operation works elementwise on any shape; where bellperson
folds a constant case the element allocates nothing, elsewhere it allocates
one variable and one row, numbered in row-major element order.

The rows are bellperson's (``x`` the lc of a Boolean: x, 1 - x or a constant):
* alloc:  (1 - v)·v = 0
* and:    x·y = r            (AND-NOT and NOR: the Is operand in A)
* xor:    (2a)·b = a + b - r (on the underlying variables a, b)
* ch:     (b - c)·a = r - c
* maj:    b·c = bc, then (2bc - b - c)·a = bc - r

``CONSTX`` (witness mode only) is a constant whose value is known only at run
time: the per-step inputs of a ``cs.loop`` that is run as ``lax.scan`` (round
constants, message words).  It may meet variables only where bellperson's
folding does not depend on a constant's value (``uint32.addmany``); an
operation whose allocations would depend on it raises.  Operations on
constants alone stay constant (no allocation either way).
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from circuits.cs import LC, NOVAR, ONE, select_lc, stack_lcs

CONST0, CONST1, IS, NOT, CONSTX = 0, 1, 2, 3, 4
_NOT_KIND = np.array([CONST1, CONST0, NOT, IS, CONSTX], np.int8)


def _xp(a):
    return np if isinstance(a, np.ndarray) else jnp


@dataclasses.dataclass(frozen=True)
class Bits:
    """A tensor of Booleans of shape ``kind.shape``."""
    kind: np.ndarray                  # int8: CONST0 / CONST1 / IS / NOT / CONSTX
    var: np.ndarray | None = None     # int64 ids (record mode; NOVAR for constants)
    value: object = None              # uint32 0/1 (witness mode; numpy when static)

    @property
    def shape(self) -> tuple:
        return self.kind.shape

    @property
    def is_constant(self) -> np.ndarray:
        return (self.kind <= CONST1) | (self.kind == CONSTX)

    def constant_value(self) -> np.ndarray:
        """uint32 0/1 of the static constant elements (0 elsewhere)."""
        return (self.kind == CONST1).astype(np.uint32)

    def _map(self, f):
        return Bits(f(self.kind), None if self.var is None else f(self.var),
                    None if self.value is None else f(self.value))

    def __getitem__(self, idx) -> "Bits":
        return self._map(lambda a: a[idx])

    def reshape(self, *shape) -> "Bits":
        return self._map(lambda a: a.reshape(*shape))

    def roll(self, shift: int, axis: int = -1) -> "Bits":
        return self._map(lambda a: _xp(a).roll(a, shift, axis))

    def flip(self, axis: int = -1) -> "Bits":
        return self._map(lambda a: _xp(a).flip(a, axis))

    def broadcast_to(self, shape) -> "Bits":
        shape = tuple(shape)
        if shape == self.shape:
            return self
        return self._map(lambda a: _xp(a).broadcast_to(a, shape))

    def not_(self) -> "Bits":
        """Negation (free: Is <-> Not, constants flipped)."""
        return Bits(_NOT_KIND[self.kind], self.var,
                    None if self.value is None else 1 - self.value)

    def lc(self, cs, coeff=1) -> LC:
        """bellperson's ``Boolean::lc(one, coeff)`` per element: coeff·x for
        Is, coeff·ONE - coeff·x for Not, coeff·ONE or nothing for constants
        (``coeff`` an int or an int array broadcastable to the shape)."""
        k = self.kind
        ids = np.broadcast_to(cs.coeffs.ids(coeff), k.shape)
        neg = cs.coeffs.neg(ids)
        zero = np.zeros(k.shape, np.int32)
        var = np.stack([np.where(k == IS, self.var, ONE), np.where(k == NOT, self.var, ONE)], -1)
        coef = np.stack([np.where(k == CONST0, zero, ids), np.where(k == NOT, neg, zero)], -1)
        return LC(var, coef.astype(np.int32), cs.coeffs)


class _Static:
    """A numpy array as hashable static pytree data (compared by content)."""

    def __init__(self, a):
        self.a = a
        self._key = (a.shape, a.dtype.str, a.tobytes())

    def __eq__(self, other):
        return isinstance(other, _Static) and self._key == other._key

    def __hash__(self):
        return hash(self._key)


# witness mode: a Bits is a pytree whose leaf is its value and whose static
# part is its kind, so two Bits have the same tree structure iff same kinds
jax.tree_util.register_pytree_node(
    Bits, lambda b: ((b.value,), _Static(b.kind)), lambda st, ch: Bits(st.a, None, ch[0]))


def concat(parts, axis: int = -1) -> Bits:
    """Concatenate Bits tensors (one mode) along an axis."""
    kind = np.concatenate([p.kind for p in parts], axis)
    var = None if parts[0].var is None else np.concatenate([p.var for p in parts], axis)
    value = None
    if parts[0].value is not None:
        vals = [p.value for p in parts]
        xp = np if all(isinstance(v, np.ndarray) for v in vals) else jnp
        value = xp.concatenate(vals, axis)
    return Bits(kind, var, value)


def constant(cs, bits) -> Bits:
    """Constant Booleans from a bool/0-1 array (static)."""
    b = np.asarray(bits).astype(bool)
    kind = np.where(b, CONST1, CONST0).astype(np.int8)
    if cs.recording:
        return Bits(kind, np.full(b.shape, NOVAR, np.int64), None)
    return Bits(kind, None, b.astype(np.uint32))


def opaque(cs, x: Bits) -> Bits:
    """Witness mode: the constant elements of x become run-time constants
    (``CONSTX``), for use as per-step inputs of a scanned ``cs.loop``;
    record mode: x unchanged."""
    if cs.recording:
        return x
    return Bits(np.where(x.is_constant, CONSTX, x.kind).astype(np.int8), None, x.value)


def _fold_kinds(*xs):
    """Static kinds for the folding rules, and the mask of elements whose
    operands are all constant with a run-time constant among them (their
    result is a run-time constant).  Raises where a run-time constant meets a
    variable."""
    opq = np.logical_or.reduce([x.kind == CONSTX for x in xs])
    if opq.any():
        allc = np.logical_and.reduce([x.is_constant for x in xs])
        if (opq & ~allc).any():
            raise ValueError("a run-time constant (a scanned loop input) meets a variable in a "
                             "gadget whose constraints depend on the constant's value; keep it "
                             "out of the loop inputs")
    return [np.where(x.kind == CONSTX, CONST0, x.kind).astype(np.int8) for x in xs], opq


def _result(cs, kind, r, choices, value, opq) -> Bits:
    """Result of a folding gadget: ``kind`` per element (``CONSTX`` where
    ``opq``).  Record mode: the variable comes from the first matching
    (mask, var) of ``choices``, else the new variables ``r``.  Witness mode:
    the value is ``value()`` (static numpy when every element is a static
    constant)."""
    kind = np.where(opq, CONSTX, kind).astype(np.int8)
    if not cs.recording:
        if (kind <= CONST1).all():
            return Bits(kind, None, (kind == CONST1).astype(np.uint32))
        return Bits(kind, None, value())
    var = np.asarray(r)
    for mask, v in reversed(choices):
        var = np.where(mask, v, var)
    return Bits(kind, np.where(kind <= CONST1, NOVAR, var), None)


def _broadcast(*xs):
    shape = np.broadcast_shapes(*[x.shape for x in xs])
    return [x.broadcast_to(shape) for x in xs], shape


def alloc_bits(cs, shape, value=None) -> Bits:
    """``AllocatedBit::alloc`` over a tensor: one variable and one row
    (1 - v)·v = 0 per element, in row-major order.  ``value`` returns the
    0/1 values (witness mode)."""
    shape = tuple(shape)
    r = cs.alloc(shape, value, bit=True)
    cs.enforce(lambda: (cs.lc(ONE) - cs.lc(r), cs.lc(r), cs.zero_lc(shape)))
    return Bits(np.full(shape, IS, np.int8), r if cs.recording else None,
                None if cs.recording else r)


# ---------------------------------------------------------------- AND
def _and_fold(x: Bits, y: Bits):
    """Boolean::and's cases: (result kind where folded, copy-x mask, copy-y
    mask, allocation mask)."""
    kx, ky = x.kind, y.kind
    false = (kx == CONST0) | (ky == CONST0)
    copy_y = ~false & (kx == CONST1)
    copy_x = ~false & ~copy_y & (ky == CONST1)
    alloc = ~false & ~copy_x & ~copy_y
    kind = np.select([false, copy_y, copy_x], [CONST0, ky, kx], IS).astype(np.int8)
    return kind, copy_x, copy_y, alloc


def _and_ab(cs, x: Bits, y: Bits):
    """A and B of the and row: x·y, with the Is operand first for AND-NOT."""
    swap = (x.kind == NOT) & (y.kind == IS)
    a, b = x.lc(cs), y.lc(cs)
    return select_lc(swap.astype(np.int8), [a, b]), select_lc(swap.astype(np.int8), [b, a])


def _static(xs):
    """Operands with run-time constants read as CONST0 for the folding rules
    (only all-constant elements may hold them), and the mask of those."""
    kinds, opq = _fold_kinds(*xs)
    return [dataclasses.replace(x, kind=k) for x, k in zip(xs, kinds)], opq


def and_(cs, x: Bits, y: Bits) -> Bits:
    """Boolean::and elementwise."""
    (x, y), shape = _broadcast(x, y)
    (x, y), opq = _static([x, y])
    kind, copy_x, copy_y, alloc = _and_fold(x, y)
    r = cs.alloc(shape, lambda: x.value & y.value, where=alloc, bit=True)
    if cs.recording and alloc.any():
        cs.enforce(lambda: (*_and_ab(cs, x, y), cs.lc(r)), where=alloc)
    return _result(cs, kind, r, [(copy_x, x.var), (copy_y, y.var)], lambda: r, opq)


# ---------------------------------------------------------------- XOR
def xor(cs, x: Bits, y: Bits) -> Bits:
    """Boolean::xor elementwise (free when either side is constant)."""
    (x, y), shape = _broadcast(x, y)
    (x, y), opq = _static([x, y])
    kx, ky = x.kind, y.kind
    copy_y = kx == CONST0
    copy_x = ~copy_y & (ky == CONST0)
    not_y = ~copy_y & ~copy_x & (kx == CONST1)
    not_x = ~copy_y & ~copy_x & ~not_y & (ky == CONST1)
    alloc = ~(copy_y | copy_x | not_y | not_x)
    mixed = alloc & (kx != ky)
    kind = np.select([copy_y, copy_x, not_y, not_x, mixed],
                     [ky, kx, _NOT_KIND[ky], _NOT_KIND[kx], NOT], IS).astype(np.int8)
    # the new variable is the xor of the underlying variables: ¬(x ⊕ y) when mixed
    r = cs.alloc(shape, lambda: x.value ^ y.value ^ jnp.asarray(mixed, jnp.uint32),
                 where=alloc, bit=True)
    if cs.recording and alloc.any():
        # the Is operand is `a` when the kinds differ
        swap = mixed & (kx == NOT)
        a = np.where(swap, y.var, x.var)
        b = np.where(swap, x.var, y.var)
        cs.enforce(lambda: (cs.lc(a, 2), cs.lc(b), cs.lc(a) + cs.lc(b) - cs.lc(r)), where=alloc)
    return _result(cs, kind, r, [(copy_y | not_y, y.var), (copy_x | not_x, x.var)],
                   lambda: x.value ^ y.value, opq)


# ---------------------------------------------------------------- SHA-256 Ch and Maj
def _pick(cases, options) -> Bits:
    """Per element, the Bits of options[cases[e]] (kind and var; static)."""
    kind = np.choose(cases, [o.kind for o in options]).astype(np.int8)
    var = None if options[0].var is None else np.choose(cases, [o.var for o in options])
    return Bits(kind, var, None)


def _case(conds) -> np.ndarray:
    """Index of the first true condition per element (len(conds) if none)."""
    return np.select(conds, list(range(len(conds))), len(conds)).astype(np.int8)


def sha256_ch(cs, a: Bits, b: Bits, c: Bits) -> Bits:
    """Boolean::sha256_ch elementwise: (a ∧ b) ⊕ (¬a ∧ c), with bellperson's
    folding (all constant; a = 0; b = 0; c = 0; c = 1; b = 1; else one row)."""
    (a, b, c), shape = _broadcast(a, b, c)
    (a, b, c), opq = _static([a, b, c])
    ka, kb, kc = a.kind, b.kind, c.kind
    allc = (ka <= CONST1) & (kb <= CONST1) & (kc <= CONST1)
    case = _case([allc, ka == CONST0, kb == CONST0, kc == CONST0, kc == CONST1, kb == CONST1])
    # cases 2..5 are an AND of (x, y), negated in cases 4, 5
    na, nb, nc = a.not_(), b.not_(), c.not_()
    sub = np.clip(case - 2, 0, 3)
    x = _pick(sub, [na, a, a, na])
    y = _pick(sub, [c, b, nb, nc])
    in_and = (case >= 2) & (case <= 5)
    neg = (case == 4) | (case == 5)
    and_kind, copy_x, copy_y, and_alloc = _and_fold(x, y)
    general = case == 6
    alloc = (in_and & and_alloc) | general
    cv = ((a.constant_value() & b.constant_value()) ^ ((1 - a.constant_value()) & c.constant_value()))
    kind = np.select([case == 0, case == 1, in_and & neg, in_and],
                     [cv, kc, _NOT_KIND[and_kind], and_kind], IS).astype(np.int8)

    def value():
        return (a.value & b.value) ^ ((1 - a.value) & c.value)

    # a negated AND allocates the AND itself, i.e. ¬ch
    r = cs.alloc(shape, lambda: value() ^ jnp.asarray(neg, jnp.uint32), where=alloc, bit=True)
    if cs.recording and alloc.any():
        def rows():
            ax, bx = _and_ab(cs, x, y)
            g = general.astype(np.int8)
            lr = cs.lc(r)
            return (select_lc(g, [ax, b.lc(cs) - c.lc(cs)]), select_lc(g, [bx, a.lc(cs)]),
                    select_lc(g, [lr, lr - c.lc(cs)]))
        cs.enforce(rows, where=alloc)
    return _result(cs, kind, r, [(case == 1, c.var), (in_and & copy_x, x.var),
                                 (in_and & copy_y, y.var)], value, opq)


def sha256_maj(cs, a: Bits, b: Bits, c: Bits) -> Bits:
    """Boolean::sha256_maj elementwise: (a ∧ b) ⊕ (a ∧ c) ⊕ (b ∧ c), with
    bellperson's folding; the general case allocates bc = b ∧ c and then maj
    (two variables and two rows per element, in that order)."""
    (a, b, c), shape = _broadcast(a, b, c)
    (a, b, c), opq = _static([a, b, c])
    ka, kb, kc = a.kind, b.kind, c.kind
    allc = (ka <= CONST1) & (kb <= CONST1) & (kc <= CONST1)
    case = _case([allc, ka == CONST0, kb == CONST0, kc == CONST0, kc == CONST1, kb == CONST1,
                  ka == CONST1])
    na, nb, nc = a.not_(), b.not_(), c.not_()
    sub = np.clip(case - 1, 0, 6)          # cases 1..7 (7: the general bc)
    x = _pick(sub, [b, a, a, na, na, nb, b])
    y = _pick(sub, [c, c, b, nb, nc, nc, c])
    in_and = case >= 1
    neg = (case >= 4) & (case <= 6)
    and_kind, copy_x, copy_y, and_alloc = _and_fold(x, y)
    general = case == 7
    slots = np.stack([in_and & and_alloc, general], -1)
    av, bv, cv = a.constant_value(), b.constant_value(), c.constant_value()
    const = (av & bv) ^ (av & cv) ^ (bv & cv)
    kind = np.select([case == 0, general, neg], [const, IS, _NOT_KIND[and_kind]],
                     and_kind).astype(np.int8)

    def value():
        """slot 0: the AND (b ∧ c in the general case, else maj or ¬maj);
        slot 1: maj."""
        maj = (a.value & b.value) ^ (a.value & c.value) ^ (b.value & c.value)
        first = jnp.where(general, b.value & c.value, maj ^ jnp.asarray(neg, jnp.uint32))
        return jnp.stack([first, maj], -1)

    r = cs.alloc(shape + (2,), value, where=slots, bit=True)
    if cs.recording and slots.any():
        def rows():
            ax, bx = _and_ab(cs, x, y)
            bc, m = cs.lc(r[..., 0]), cs.lc(r[..., 1])
            a1 = bc.scale(2) - b.lc(cs) - c.lc(cs)
            return (stack_lcs([ax, a1]), stack_lcs([bx, a.lc(cs)]), stack_lcs([bc, bc - m]))
        cs.enforce(rows, where=slots)
    r_var = None if not cs.recording else np.where(general, r[..., 1], r[..., 0])
    return _result(cs, kind, r_var, [(in_and & copy_x, x.var), (in_and & copy_y, y.var)],
                   lambda: r[..., 1], opq)
