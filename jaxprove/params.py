"""bellperson's Groth16 parameter file (``.params``) for our setups.

Layout (bellperson src/groth16/{params,verifying_key,generator}.rs;
research/filecoin-circuits.md §4).  Every integer is a u32 big-endian, every
point the zcash/bellperson *uncompressed* encoding (``ops.encoding``: G1 96
bytes x ‖ y, G2 192 bytes x.c1 ‖ x.c0 ‖ y.c1 ‖ y.c0, big-endian coordinates):

    vk    α₁ β₁ β₂ γ₂ δ₁ δ₂ (G1 G1 G2 G2 G1 G2), u32 n_in, IC[n_in]  (G1)
    h     u32, m − 1 G1          τ^i·Z(τ)/δ
    l     u32, num_aux G1        (β·u_j(τ) + α·v_j(τ) + w_j(τ))/δ
    a     u32, G1                u_j(τ) for the inputs, then the A-dense aux
    b_g1  u32, G1                v_j(τ) for the B-dense inputs, then B-dense aux
    b_g2  u32, G2                the same variables as b_g1

Density compression.  bellperson's generator computes the A and B queries for
every variable and drops the points at infinity; a variable's query is the
identity exactly when it has no entry in that matrix (u_j is then the zero
polynomial; a non-zero u_j vanishes at a random τ with probability < m/r),
so the file keeps the variables of the density bitmaps (``pce.Matrices``:
every input for A — bellperson's input rows give them full A-density —
``a_aux_density``, ``b_input_density``, ``b_aux_density``) in variable order.
Our ``groth16.ProvingKey`` holds uncompressed vectors over all n_vars
variables with the identity as (0, 0): ``to_params`` drops the identities
(checking, given the matrices, that what remains is exactly the dense
variables) and ``from_params`` scatters the file's points back to the dense
positions of the matrices, so write → read is the identity on our keys.

Reading checks what bellperson's checked reader checks, and reports the
file, the field and the point: truncation, lengths inconsistent with each
other or with the circuit, flags, non-canonical coordinates, points off the
curve, outside the prime-order subgroup (on the device, in fixed-size
chunks) or at infinity (rejected everywhere: bellperson rejects it in every
vector and the generator never writes one), and trailing bytes.  Writing is
atomic (temporary name, fsync, rename).

API: ``write_params(path, pk, vk, matrices=None) -> bytes written``,
``read_params(path, matrices) -> (pk, vk)``, ``read_params_file(path) ->
Params`` (no circuit needed), and the steps: ``to_params``/``from_params``
(our keys <-> the compressed content), ``to_bytes``/``from_bytes``,
``density(matrices)``.

Point conversion runs per point on the host (``ops.encoding``, about 35 µs a
G1 point both ways on this CPU): minutes for a few million points, not meant
for Filecoin's 47 GB files (bellperson maps those lazily).
"""
from __future__ import annotations

import struct
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxprove import atomic, pce
from jaxprove import groth16 as G
from ops import encoding
from ops.curve import G1, G2

G1_BYTES, G2_BYTES = encoding.sizes(G1)[1], encoding.sizes(G2)[1]      # 96, 192
VK_POINTS = (("alpha_g1", G1), ("beta_g1", G1), ("beta_g2", G2), ("gamma_g2", G2),
             ("delta_g1", G1), ("delta_g2", G2))
VECTORS = (("ic", G1), ("h", G1), ("l", G1), ("a", G1), ("b_g1", G1), ("b_g2", G2))


class Params(NamedTuple):
    """A .params file's content (bellperson's ``Parameters``): affine device
    points ``(2, 12)`` / ``(2, 2, 12)``, vectors with the count last;
    a, b_g1, b_g2 density-compressed."""
    alpha_g1: jnp.ndarray
    beta_g1: jnp.ndarray
    beta_g2: jnp.ndarray
    gamma_g2: jnp.ndarray
    delta_g1: jnp.ndarray
    delta_g2: jnp.ndarray
    ic: jnp.ndarray            # (2, 12, num_inputs)
    h: jnp.ndarray             # (2, 12, m − 1)
    l: jnp.ndarray             # (2, 12, num_aux)
    a: jnp.ndarray             # (2, 12, n_a)
    b_g1: jnp.ndarray          # (2, 12, n_b)
    b_g2: jnp.ndarray          # (2, 2, 12, n_b)


# ------------------------------------------------------------------ density
def _nonidentity(C, pts) -> np.ndarray:
    """bool (k,): which affine points of ``(2, *fp, k)`` are not (0, 0)."""
    x = np.asarray(pts)
    return np.any(x.reshape(-1, x.shape[-1]) != 0, axis=0)


def density(matrices: pce.Matrices) -> tuple[np.ndarray, np.ndarray]:
    """(A, B) density over all variables (bool (num_vars,) each), bellperson's:
    A = every input, then ``a_aux_density``; B = ``b_input_density`` ‖
    ``b_aux_density``."""
    a = np.concatenate([np.ones(matrices.num_inputs, bool), np.asarray(matrices.a_aux_density)])
    b = np.concatenate([np.asarray(matrices.b_input_density), np.asarray(matrices.b_aux_density)])
    return a, b


def _same(x, y) -> bool:
    return np.array_equal(np.asarray(x), np.asarray(y))


def to_params(pk: G.ProvingKey, vk: G.VerifyingKey, matrices: pce.Matrices | None = None) -> Params:
    """Our keys -> the file's content: the A/B queries without their points at
    infinity (bellperson's generator).  With ``matrices``, the kept variables
    must be exactly the density bitmaps' (else the key is not this circuit's,
    or τ hit a root of some u_j: draw the setup again).  ValueError if pk and
    vk disagree on α₁, β₂ or δ₂, or h, l or IC hold the identity."""
    for f in ("alpha_g1", "beta_g2", "delta_g2"):
        if not _same(getattr(pk, f), getattr(vk, f)):
            raise ValueError(f"params: proving and verifying keys differ in {f}")
    n_vars = pk.a.shape[-1]
    if vk.ic.shape[-1] + pk.l.shape[-1] != n_vars:
        raise ValueError(f"params: IC ({vk.ic.shape[-1]}) + L ({pk.l.shape[-1]}) points do not "
                         f"cover the key's {n_vars} variables")
    for name, x in (("ic", vk.ic), ("h", pk.h), ("l", pk.l)):
        bad = np.flatnonzero(~_nonidentity(G1, x))
        if bad.size:
            raise ValueError(f"params: {name}[{bad[0]}] is the point at infinity, which bellperson "
                             f"cannot read (an unconstrained variable?)")
    keep_a, keep_b = _nonidentity(G1, pk.a), _nonidentity(G1, pk.b_g1)
    if not np.array_equal(keep_b, _nonidentity(G2, pk.b_g2)):
        raise ValueError("params: B's G1 and G2 queries are the identity at different variables")
    if matrices is not None:
        if matrices.num_vars != n_vars or matrices.num_inputs != vk.ic.shape[-1]:
            raise ValueError(f"params: key for {n_vars} variables ({vk.ic.shape[-1]} inputs), "
                             f"circuit {matrices.name!r} has {matrices.num_vars} "
                             f"({matrices.num_inputs})")
        for name, keep, want in zip("AB", (keep_a, keep_b), density(matrices)):
            diff = np.flatnonzero(keep != want)
            if diff.size:
                raise ValueError(f"params: the {name} query of variable {diff[0]} is "
                                 f"{'non-zero' if keep[diff[0]] else 'the identity'} but its "
                                 f"{name}-density is {int(want[diff[0]])} in circuit "
                                 f"{matrices.name!r}")
    ia, ib = np.flatnonzero(keep_a), np.flatnonzero(keep_b)
    return Params(pk.alpha_g1, pk.beta_g1, pk.beta_g2, vk.gamma_g2, pk.delta_g1, pk.delta_g2,
                  vk.ic, pk.h, pk.l, pk.a[..., ia], pk.b_g1[..., ib], pk.b_g2[..., ib])


def from_params(p: Params, matrices: pce.Matrices, name: str = "params"):
    """The file's content -> (``groth16.ProvingKey``, ``groth16.VerifyingKey``)
    for circuit ``matrices``: the compressed A/B queries go to the dense
    variables, the identity (0, 0) elsewhere.  ValueError (naming ``name``
    and the field) if a count does not fit the circuit."""
    n_in, n_aux = matrices.num_inputs, matrices.num_aux
    m = 1 << G.domain_log(matrices.rows)
    dens_a, dens_b = density(matrices)
    want = {"ic": n_in, "l": n_aux, "h": m - 1, "a": int(dens_a.sum()), "b_g1": int(dens_b.sum()),
            "b_g2": int(dens_b.sum())}
    for f, n in want.items():
        got = getattr(p, f).shape[-1]
        if got != n:
            raise ValueError(f"{name}: {f} has {got} points, circuit {matrices.name!r} needs {n}")

    def scatter(pts, dens):
        full = jnp.zeros(pts.shape[:-1] + (dens.size,), pts.dtype)
        return full.at[..., np.flatnonzero(dens)].set(pts)

    pk = G.ProvingKey(alpha_g1=p.alpha_g1, beta_g1=p.beta_g1, beta_g2=p.beta_g2,
                      delta_g1=p.delta_g1, delta_g2=p.delta_g2, a=scatter(p.a, dens_a),
                      b_g1=scatter(p.b_g1, dens_b), b_g2=scatter(p.b_g2, dens_b), l=p.l, h=p.h)
    vk = G.VerifyingKey(alpha_g1=p.alpha_g1, beta_g2=p.beta_g2, gamma_g2=p.gamma_g2,
                        delta_g2=p.delta_g2, ic=p.ic)
    return pk, vk


# ------------------------------------------------------------------ bytes
def _enc(C, pts) -> bytes:
    return b"".join(encoding.encode(C, pts, compressed=False, projective=False))


def to_bytes(p: Params) -> bytes:
    """The .params bytes of ``p``."""
    out = [_enc(C, getattr(p, f)) for f, C in VK_POINTS]
    for f, C in VECTORS:
        pts = getattr(p, f)
        out.append(struct.pack(">I", pts.shape[-1]) + (_enc(C, pts) if pts.shape[-1] else b""))
    return b"".join(out)


SUBGROUP_CHUNK = 1 << 14      # points per device subgroup check (bounded memory, one shape)


def _in_subgroup(C, A: np.ndarray) -> np.ndarray:
    """bool (k,): [r]P = O for affine host limbs A ``(2, *fp, k)``, on the
    device in chunks of one padded power-of-two size (≤ SUBGROUP_CHUNK)."""
    k = A.shape[-1]
    size = min(SUBGROUP_CHUNK, max(8, 1 << (k - 1).bit_length()))
    ok = []
    for lo in range(0, k, size):
        part = A[..., lo:lo + size]
        n = part.shape[-1]
        part = np.concatenate([part, np.zeros(part.shape[:-1] + (size - n,), np.uint32)], -1)
        ok.append(np.asarray(C.in_subgroup(C.from_affine(jnp.asarray(part))))[:n])
    return np.concatenate(ok)


def _checked_arrays(C, host: dict, fields: list, name: str) -> dict:
    """The host points of ``fields`` (all on curve C) -> {field: affine device
    array (2, *fp, k)}, after the subgroup check of them all."""
    flat = [(f, i) for f in fields for i in range(len(host[f]))]
    A = C.from_affine_ints([host[f][i] for f, i in flat])
    ok = _in_subgroup(C, A)
    if not ok.all():
        f, i = flat[int(np.argmin(ok))]
        raise ValueError(f"{name}: {f}: point {i} is not in the prime-order subgroup")
    out, o = {}, 0
    for f in fields:
        k = len(host[f])
        out[f] = jnp.asarray(A[..., o:o + k])
        o += k
    return out


def from_bytes(data: bytes, name: str = "params") -> Params:
    """Parse and check .params bytes (see the module docstring); ValueError
    naming ``name``, the field and the point on any defect."""
    pos = 0
    host = {}            # field -> list of host affine points

    def take(n: int, what: str) -> bytes:
        nonlocal pos
        if pos + n > len(data):
            raise ValueError(f"{name}: truncated in {what}: needs {n} bytes at offset {pos}, "
                             f"{len(data) - pos} left")
        pos += n
        return data[pos - n:pos]

    def points(C, count: int, what: str) -> list:
        size = G1_BYTES if C is G1 else G2_BYTES
        if count == 0:
            return []
        raw = take(size * count, f"{what} ({count} points)")
        try:
            pts = encoding.decode_ints(C, [raw[i * size:(i + 1) * size] for i in range(count)])
        except ValueError as e:      # "G1: encoding i: reason"
            raise ValueError(f"{name}: {what}: {str(e).replace('encoding', 'point', 1)}") from None
        for i, pt in enumerate(pts):
            if pt is None:
                raise ValueError(f"{name}: {what}: point {i} is the point at infinity "
                                 f"(bellperson rejects it)")
        return pts

    for f, C in VK_POINTS:
        host[f] = points(C, 1, f)
    for f, C in VECTORS:
        (count,) = struct.unpack(">I", take(4, f"{f} (count)"))
        if count * (G1_BYTES if C is G1 else G2_BYTES) > len(data) - pos:
            raise ValueError(f"{name}: truncated in {f}: {count} points declared, "
                             f"{len(data) - pos} bytes left")
        host[f] = points(C, count, f)
    if pos != len(data):
        raise ValueError(f"{name}: {len(data) - pos} bytes after the last vector (b_g2)")
    n_ic, n_h, n_l, n_a, n_b1, n_b2 = (len(host[f]) for f, _ in VECTORS)
    if n_ic < 1:
        raise ValueError(f"{name}: ic is empty (needs ONE's point at least)")
    if n_h < 1 or (n_h + 1) & n_h:
        raise ValueError(f"{name}: h has {n_h} points; expected m − 1 for a power of two m ≥ 2")
    if not n_ic <= n_a <= n_ic + n_l:
        raise ValueError(f"{name}: a has {n_a} points; expected every input ({n_ic}) and at most "
                         f"the {n_l} aux variables")
    if n_b1 != n_b2 or n_b1 > n_ic + n_l:
        raise ValueError(f"{name}: b_g1 ({n_b1}) and b_g2 ({n_b2}) must be the same variables, "
                         f"at most {n_ic + n_l}")
    arrays = {}
    for C in (G1, G2):
        arrays.update(_checked_arrays(C, host, [f for f, c in VK_POINTS + VECTORS if c is C], name))
    return Params(*(arrays[f][..., 0] for f, _ in VK_POINTS), *(arrays[f] for f, _ in VECTORS))


# ------------------------------------------------------------------ files
def write_params(path, pk: G.ProvingKey, vk: G.VerifyingKey,
                 matrices: pce.Matrices | None = None) -> int:
    """Write our keys as a bellperson .params file (``to_params``: with
    ``matrices`` the density is checked); atomic: a temporary name in the same
    directory, fsync, rename.  Returns the number of bytes written."""
    return atomic.write_bytes(path, to_bytes(to_params(pk, vk, matrices)))


def read_params_file(path) -> Params:
    """A .params file's checked content (no circuit needed)."""
    with open(path, "rb") as f:
        return from_bytes(f.read(), str(path))


def read_params(path, matrices: pce.Matrices):
    """A .params file -> (ProvingKey, VerifyingKey) for circuit ``matrices``
    (whose density bitmaps place the compressed A/B queries)."""
    return from_params(read_params_file(path), matrices, str(path))
