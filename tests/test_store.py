"""jaxprove.store: host checksums against hashlib's BLAKE2b of the arrays'
bytes (zero-size arrays included), and a save/load round trip of an entry
holding zero-size arrays (the empty part of a split key: ``setup(positions=)``
on a circuit with no bit-valued MSM positions)."""
from __future__ import annotations

import hashlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxprove import store


def _blake(data: bytes) -> str:
    return "b2:" + hashlib.blake2b(data, digest_size=16).hexdigest()


@pytest.mark.parametrize("shape,dtype", [((0,), np.uint32), ((2, 12, 0), np.uint32),
                                         ((2, 2, 12, 0), np.uint32), ((0, 3), np.int64),
                                         ((0,), np.bool_)])
def test_checksum_of_zero_size_host_array(shape, dtype):
    """A zero-size host array hashes as no bytes (memoryview.cast refused it)."""
    assert store.checksum(np.zeros(shape, dtype)) == _blake(b"")


def test_checksum_of_host_array_is_blake2b_of_its_bytes():
    """Non-empty host arrays: BLAKE2b of their C-order bytes (unchanged from
    the stored entries' checksums), views and 0-d arrays included."""
    x = np.arange(2 * 12 * 5, dtype=np.uint32).reshape(2, 12, 5)
    assert store.checksum(x) == _blake(x.tobytes())
    assert store.checksum(x.transpose(2, 0, 1)) == _blake(x.transpose(2, 0, 1).tobytes())
    assert store.checksum(x[..., 1:3]) == _blake(x[..., 1:3].tobytes())
    assert store.checksum(np.array(7, np.int64)) == _blake(np.array(7, np.int64).tobytes())
    assert store.checksum(np.array([True, False])) == _blake(b"\x01\x00")
    assert store.checksum(x) != store.checksum(x + np.uint32(1))


def test_round_trip_with_zero_size_arrays(tmp_path):
    """An entry whose host and device arrays include zero-size ones is saved
    and comes back with every shape, dtype and value."""
    arrays = {"bits": np.zeros((2, 12, 0), np.uint32),
              "dense": np.arange(2 * 12 * 3, dtype=np.uint32).reshape(2, 12, 3),
              "flags": np.zeros((0,), np.bool_),
              "dev": jnp.arange(6, dtype=jnp.uint32).reshape(2, 3),
              "dev_empty": jnp.zeros((2, 0), jnp.uint32)}
    store.save(str(tmp_path), "k", arrays, "fmt", 1, {"split": {"a": 3}})
    got, static = store.load(str(tmp_path), "k", "fmt", 1)
    assert static == {"split": {"a": 3}} and sorted(got) == sorted(arrays)
    for k, v in arrays.items():
        assert isinstance(got[k], np.ndarray) == isinstance(v, np.ndarray), k
        assert got[k].shape == v.shape and got[k].dtype == v.dtype, k
        np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(v))
    assert isinstance(got["dev_empty"], jax.Array)
