"""Atomic, checksummed storage of named arrays: device arrays with
orbax-checkpoint, host (numpy) arrays as ``.npy`` files.

An entry is a directory ``directory/key`` holding the device arrays (orbax's
``StandardCheckpointer``), the host arrays (``host/NAME.npy``, restored as
numpy arrays whatever their dtype, int64 included) and ``meta.json``: format
name, format version, key, caller metadata, and each array's shape, dtype,
placement and content checksum.
``save`` writes everything under a temporary name and renames it into place
(removing the temporary on any failure), so readers see a complete entry or
none; ``load`` checks format, version, key, shapes, dtypes and checksums and
raises ``ValueError`` naming the first mismatch.  Used by ``jaxprove.pce``
(matrices, recorded circuits) and ``jaxprove.groth16`` (keys).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import secrets
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

META = "meta.json"
ARRAYS = "arrays"
HOST = "host"


def _fmix(h):
    """MurmurHash3's 32-bit finaliser (a bijection of uint32)."""
    h = h ^ (h >> 16)
    h = h * jnp.uint32(0x85EBCA6B)
    h = h ^ (h >> 13)
    h = h * jnp.uint32(0xC2B2AE35)
    return h ^ (h >> 16)


@jax.jit
def _digest(x):
    """Content checksum of an array, on its device: two uint32 lanes, each
    Σ_i fmix(x_i ⊕ fmix(i + seed)) mod 2^32 (x viewed as uint32 words), so a
    change of any one element always changes both lanes."""
    v = x.reshape(-1)
    v = v.astype(jnp.uint32) if v.dtype == jnp.bool_ else jax.lax.bitcast_convert_type(v, jnp.uint32)
    i = jnp.arange(v.shape[0], dtype=jnp.uint32)
    return jnp.stack([jnp.sum(_fmix(v ^ _fmix(i + jnp.uint32(s))), dtype=jnp.uint32)
                      for s in (0x9E3779B9, 0x7F4A7C15)])


def _host_bytes(x: np.ndarray) -> np.ndarray:
    """The bytes of ``x`` (any shape and dtype) in C order, as a flat uint8
    array of ``x.nbytes`` elements: a view where ``x`` is C-contiguous (keys
    of tens of GiB are not copied), empty for a zero-size ``x`` (an empty
    part of a split key), which ``memoryview.cast`` refuses."""
    return np.ascontiguousarray(x).reshape(-1).view(np.uint8)


def checksum(x) -> str:
    """Content checksum: of a device array on its device (``_digest``), of a
    numpy array on the host (BLAKE2b of its bytes, any dtype; zero-size
    arrays included: the digest of no bytes)."""
    if isinstance(x, np.ndarray):
        return "b2:" + hashlib.blake2b(_host_bytes(x), digest_size=16).hexdigest()
    return "".join(f"{int(d):08x}" for d in np.asarray(_digest(x)))


def _write_arrays(path: str, arrays: dict):
    ck = ocp.StandardCheckpointer()
    try:
        ck.save(os.path.abspath(path), arrays)
        ck.wait_until_finished()
    finally:
        ck.close()


def _read_arrays(path: str, abstract: dict) -> dict:
    ck = ocp.StandardCheckpointer()
    try:
        return ck.restore(os.path.abspath(path), abstract)
    finally:
        ck.close()


def save(directory: str, key: str, arrays: dict, fmt: str, version: int, static: dict) -> str:
    """Store ``arrays`` (name -> array; numpy arrays are kept as host arrays)
    and ``static`` (JSON-able metadata) under ``directory/key``, replacing any
    entry there; returns its path."""
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, key)
    token = secrets.token_hex(6)
    tmp = os.path.join(directory, f".{key}.tmp-{token}")
    old = os.path.join(directory, f".{key}.old-{token}")
    try:
        os.makedirs(tmp)
        host = {k: v for k, v in arrays.items() if isinstance(v, np.ndarray)}
        stored = {k: v for k, v in arrays.items()
                  if k not in host and v.size}                     # orbax rejects empty arrays
        if stored:
            _write_arrays(os.path.join(tmp, ARRAYS), stored)
        if host:
            os.makedirs(os.path.join(tmp, HOST))
        for k, v in host.items():
            with open(os.path.join(tmp, HOST, f"{k}.npy"), "wb") as f:
                np.save(f, v, allow_pickle=False)
                f.flush()
                os.fsync(f.fileno())
        meta = {"format": fmt, "version": version, "key": key, "static": static,
                "arrays": {k: {"shape": list(v.shape), "dtype": str(v.dtype), "host": k in host,
                               "checksum": checksum(v)} for k, v in arrays.items()}}
        with open(os.path.join(tmp, META), "w") as f:
            json.dump(meta, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(final):
            os.rename(final, old)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load(directory: str, key: str, fmt: str, version: int, device=None):
    """(arrays, static) of the entry ``directory/key``: device arrays restored
    onto ``device`` (default: the first device), host arrays as numpy arrays;
    None if there is no entry; ValueError (or an orbax/OS error) if the entry
    is unusable."""
    path = os.path.join(directory, key)
    if not os.path.isdir(path):
        return None
    with open(os.path.join(path, META)) as f:
        meta = json.load(f)
    if meta.get("format") != fmt or meta.get("version") != version:
        raise ValueError(f"format/version {meta.get('format')}/{meta.get('version')}, "
                         f"expected {fmt}/{version}")
    if meta.get("key") != key:
        raise ValueError(f"entry is for key {meta.get('key')!r}")
    info = meta["arrays"]
    shape = {k: (tuple(v["shape"]), np.dtype(v["dtype"])) for k, v in info.items()}
    host = {k for k, v in info.items() if v.get("host")}
    abstract = {}
    if len(host) < len(info):
        sharding = jax.sharding.SingleDeviceSharding(device or jax.devices()[0])
        abstract = {k: jax.ShapeDtypeStruct(s, d, sharding=sharding)
                    for k, (s, d) in shape.items() if k not in host and math.prod(s)}
    arrays = _read_arrays(os.path.join(path, ARRAYS), abstract) if abstract else {}
    for k in host:
        arrays[k] = np.load(os.path.join(path, HOST, f"{k}.npy"), allow_pickle=False)
    for k, (s, d) in shape.items():
        if k not in host and not math.prod(s):
            arrays[k] = jax.device_put(jnp.zeros(s, d), sharding)
        if tuple(arrays[k].shape) != s or arrays[k].dtype != d:
            raise ValueError(f"array {k} restored as {arrays[k].dtype} {arrays[k].shape}")
        if checksum(arrays[k]) != info[k]["checksum"]:
            raise ValueError(f"checksum mismatch in array {k}")
    return arrays, meta["static"]
