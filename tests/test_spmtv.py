"""ops.spmtv: Mᵀ·x over Fr against Python integers."""
from __future__ import annotations

import random

import jax.numpy as jnp
import numpy as np
import pytest

from conftest import R
from ops import spmtv as T
from ops.field import Fr


def _random_csr(rng, rows, n_cols, n_coeffs, heavy=()):
    """A random CSR (indptr, cols, ids); columns in ``heavy`` occur in most rows."""
    indptr, cols, ids = [0], [], []
    for _ in range(rows):
        row = set(rng.sample(range(n_cols), rng.randrange(0, 4)))
        row |= {h for h in heavy if rng.random() < 0.8}
        for j in sorted(row):
            cols.append(j)
            ids.append(rng.randrange(n_coeffs))
        indptr.append(len(cols))
    return np.array(indptr), np.array(cols, np.int64), np.array(ids, np.int64)


def _reference(indptr, cols, ids, coeffs, x, n_cols):
    y = [0] * n_cols
    for i in range(len(indptr) - 1):
        for e in range(indptr[i], indptr[i + 1]):
            y[cols[e]] = (y[cols[e]] + coeffs[ids[e]] * x[i]) % R
    return y


@pytest.mark.parametrize("chunk", [None, 4, 16])
def test_spmtv_matches_python_integers(chunk):
    """Columns that span several chunks (``heavy``: ONE-like columns in most
    rows), empty columns, coefficients up to r − 1."""
    rng = random.Random(11)
    rows, n_cols = 37, 23
    coeffs = [1, R - 1, 2, R - 2, rng.randrange(R)]
    indptr, cols, ids = _random_csr(rng, rows, n_cols, len(coeffs), heavy=(0, 7))
    assert len(set(range(n_cols)) - set(cols.tolist())) > 0           # some empty column
    x = [rng.randrange(R) for _ in range(rows)]
    got = T.spmtv(indptr, cols, ids, jnp.asarray(Fr.from_int(coeffs)),
                  jnp.asarray(Fr.from_int(x)), n_cols, chunk)
    assert [int(v) for v in Fr.to_int(np.asarray(got))] == \
        _reference(indptr, cols, ids, coeffs, x, n_cols)


def test_segmented_scan_sums_within_runs_of_equal_keys():
    rng = random.Random(2)
    keys = np.array([0, 0, 0, 3, 3, 4, 5, 5], np.int32)
    vals = [rng.randrange(R) for _ in keys]
    got = Fr.to_int(np.asarray(T.segmented_scan(jnp.asarray(keys), jnp.asarray(Fr.from_int(vals)))))
    want, run = [], 0
    for e, k in enumerate(keys):
        run = vals[e] if e == 0 or keys[e - 1] != k else (run + vals[e]) % R
        want.append(run)
    assert [int(v) for v in got] == want


def test_spmtv_empty_and_bad_input():
    table = jnp.asarray(Fr.from_int([1]))
    x = jnp.asarray(Fr.from_int([5, 6]))
    empty = T.spmtv(np.zeros(3, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                    table, x, 4)
    assert empty.shape == (Fr.L, 4) and not np.any(np.asarray(empty))
    ok = (np.array([0, 1, 2]), np.array([0, 3]), np.array([0, 0]))
    with pytest.raises(ValueError, match="column indices"):
        T.spmtv(*ok, table, x, 3)
    with pytest.raises(ValueError, match="coefficient ids"):
        T.spmtv(ok[0], ok[1], np.array([0, 1]), table, x, 4)
    with pytest.raises(ValueError, match="not a CSR"):
        T.spmtv(np.array([0, 2, 1]), ok[1], ok[2], table, x, 4)
    with pytest.raises(ValueError, match="x must be"):
        T.spmtv(*ok, table, x[:, :1], 4)
    with pytest.raises(ValueError, match="power of two"):
        T.spmtv(*ok, table, x, 4, chunk=3)
