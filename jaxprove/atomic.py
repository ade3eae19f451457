"""Atomic file writes: nothing half-written is ever visible under the final name.

``write_bytes(path, data)`` writes a temporary file beside ``path``, fsyncs it,
renames it over ``path`` (atomic on POSIX) and fsyncs the directory, so after
a crash the file holds either its old or its new contents; on any error the
temporary file is removed and the error re-raised.
"""
from __future__ import annotations

import os
import secrets


def write_bytes(path, data: bytes) -> int:
    """Atomically replace ``path`` with ``data``; returns the bytes written."""
    path = os.fspath(path)
    d = os.path.dirname(path) or "."
    tmp = os.path.join(d, f".{os.path.basename(path)}.tmp-{secrets.token_hex(6)}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:             # some filesystems do not open directories
        return len(data)
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
    return len(data)
