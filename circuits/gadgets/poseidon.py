"""The Poseidon hash gadget: neptune's legacy circuit (src/circuit.rs
``poseidon_hash``), the one Filecoin's trusted setups use.

It follows the optimized-static permutation of ``ops.poseidon`` (compressed
round keys, pre-sparse and sparse matrices) and keeps the state as linear
combinations wherever neptune does.  Per instance, in neptune's order:

* round 0: the tag's S-box is a constant; for each preimage element x_i
  (already allocated, i = 1..arity) with keys c_i (before) and c'_i (after):
  (x_i + c_i)² = a, a·a = b, (x_i + c_i)·b = d − c'_i  (3 rows, 3 variables);
* every other full round, for each of the t elements e (an LC):
  e·1 = l, l·l = l2, l2·l2 = l4, l·l4 = l5 − c'  (4 rows; no key after the
  last round);
* each partial round: the same 4 rows for element 0 only;
* the output: state[1]·1 = out.

The state after a matrix is a linear combination (dense matrices: t terms;
the sparse matrices of the partial rounds add one term per round to the
other elements).  Rows: 3·arity + 4·t·(R_F − 1) + 4·R_P + 1
= 4(8t + R_P) − t − 2: 311 / 377 / 505 / 598 for arity 2 / 4 / 8 / 11, and
as many aux variables.

Tensors: the preimage is a ``Num`` of shape (*S, arity) (any batch shape S);
the result a ``Num`` (*S,).  Each round is one ``alloc`` of (*S, t, 4) (or
(*S, 4)) slots and one ``enforce`` over the same slots, so a batch allocates
op by op (``circuits.cs``).  Witness values are the intermediates of the
native permutation (``ops.poseidon.permutation_trace``), computed once.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from circuits.cs import ONE, stack_lcs
from circuits.gadgets.num import Num
from ops import poseidon as native
from ops.field import R_FR


def constraint_count(arity: int) -> int:
    """Rows of one hash: 4(8t + R_P) − t − 2 (neptune's test formula)."""
    c = native.constants(arity)
    t = c.width
    return 4 * (c.full_rounds * t + c.partial_rounds) - t - 2


def _slots(a):
    """Trace block (k, 8, *S, n) -> (8, *S, n, k): the slots last."""
    return jnp.moveaxis(a, 0, -1)


def poseidon_hash(cs, preimage: Num, tag: int | None = None) -> Num:
    """Poseidon of ``preimage`` (*S, arity) with domain tag ``tag``
    (default: the MerkleTree tag 2^arity − 1) -> Num (*S,)."""
    if len(preimage.shape) < 1:
        raise ValueError("poseidon_hash: the preimage needs a trailing arity axis")
    arity = preimage.shape[-1]
    c = native.constants(arity)
    t, h, rp = c.width, c.full_rounds // 2, c.partial_rounds
    S = tuple(preimage.shape[:-1])
    tag = native.merkle_tag(arity) if tag is None else tag
    if not 0 <= tag < R_FR:
        raise ValueError(f"poseidon_hash: the tag {tag} is not a field element")
    crc = c.compressed

    if not cs.recording:
        tr = native.permutation_trace(native.with_tag(preimage.value, tag))
        cs.alloc(S + (arity, 3), lambda: _slots(tr.first)[..., 1:, :])
        for r in range(1, c.full_rounds):
            cs.alloc(S + (t, 4), lambda r=r: _slots(tr.full[r - 1]))
            if r == h - 1:
                for k in range(rp):
                    cs.alloc(S + (4,), lambda k=k: _slots(tr.partial[k]))
        out = tr.out[..., 1]
        return Num(S, None, cs.alloc(S, lambda: out))

    one = lambda shape: cs.lc(np.full(shape, ONE))

    def ones_with(shape, coeffs):
        """The LCs coeff·ONE of shape (*S, n) for a coefficient vector (n,)."""
        return cs.lc(np.full(shape, ONE), [int(x) for x in coeffs])

    # round 0: (x + c)^2, ^4, (x + c)·^4 + c' for the preimage; the tag's S-box is constant
    pre, post = crc[:t], crc[t:2 * t]
    v = cs.alloc(S + (arity, 3))
    s = preimage.lc(cs) + ones_with(S + (arity,), pre[1:])
    l2, l4, l5 = (cs.lc(v[..., k]) for k in range(3))
    cs.enforce(lambda: (stack_lcs([s, l2, s]), stack_lcs([s, l2, l4]),
                        stack_lcs([l2, l4, l5 - ones_with(S + (arity,), post[1:])])))
    tag5 = (pow(tag + pre[0], 5, R_FR) + post[0]) % R_FR
    state = _State(np.concatenate([np.full(S + (1,), ONE), v[..., 2]], -1),
                   _transpose(c.mds, [tag5] + [1] * arity))

    off = 2 * t
    for r in range(1, c.full_rounds):
        last = r == c.full_rounds - 1
        keys = [0] * t if last else crc[off:off + t]
        off += 0 if last else t
        v = cs.alloc(S + (t, 4))
        e = state.lcs(cs)
        l, l2, l4, l5 = (cs.lc(v[..., k]) for k in range(4))
        cs.enforce(lambda: (stack_lcs([e, l, l2, l]), stack_lcs([one(S + (t,)), l, l2, l4]),
                            stack_lcs([l, l2, l4, l5 - ones_with(S + (t,), keys)])))
        state = _State(v[..., 3], _transpose(c.pre_sparse if r == h - 1 else c.mds))
        if r == h - 1:
            for k in range(rp):
                state = _partial_round(cs, state, crc[off], c.sparse[k], S)
                off += 1
    assert off == len(crc)
    res = cs.alloc(S)
    out = state.lcs(cs, 1)
    cs.enforce(lambda: (out, one(S), cs.lc(res)))
    return Num(S, res, None)


class _State:
    """The state as linear combinations (record mode): element j is
    Σ_b coef[j][b]·basis[..., b].  All instances share the coefficients
    (ints mod r); only the variables differ, so the bookkeeping of the
    partial rounds (one new basis variable per round) is independent of the
    batch size."""

    def __init__(self, basis, coef):
        self.basis = basis            # int64 ids (*S, n)
        self.coef = coef              # t lists of n ints

    def lcs(self, cs, j=None):
        """The LCs of all elements (*S, t), or of element j (*S,)."""
        if j is not None:
            return cs.lc(self.basis, self.coef[j]).sum(-1)
        return cs.lc(self.basis[..., None, :], self.coef).sum(-1)


def _transpose(m, scale=None):
    """Coefficients of y_j = Σ_i m[i][j]·s_i·x_i (row vector x times m)."""
    t = len(m)
    scale = scale or [1] * t
    return [[m[i][j] * scale[i] % R_FR for i in range(t)] for j in range(t)]


def _partial_round(cs, state, key, sparse, S):
    """Element 0: e·1 = l, l·l = l2, l2·l2 = l4, l·l4 = l5 − key; then the
    sparse matrix, y_0 = Σ_i ŵ_i·x_i (x_0 = l5), y_j = x_j + v_j·l5: l5
    joins the basis."""
    w_hat, v_rest = sparse
    v = cs.alloc(S + (4,))
    e0 = state.lcs(cs, 0)
    l, l2, l4, l5 = (cs.lc(v[..., k]) for k in range(4))
    ones = cs.lc(np.full(S, ONE))
    cs.enforce(lambda: (stack_lcs([e0, l, l2, l]), stack_lcs([ones, l, l2, l4]),
                        stack_lcs([l, l2, l4, l5 - cs.lc(np.full(S, ONE), int(key))])))
    t = len(w_hat)
    n = len(state.coef[0])
    y0 = [sum(w_hat[i] * state.coef[i][b] for i in range(1, t)) % R_FR for b in range(n)]
    coef = [y0 + [w_hat[0] % R_FR]] + [state.coef[j] + [v_rest[j - 1] % R_FR]
                                       for j in range(1, t)]
    return _State(np.concatenate([state.basis, v[..., 3:4]], -1), coef)
