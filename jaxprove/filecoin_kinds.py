"""Filecoin's proof kinds in the engine's registry (``jaxprove.engine``):
WinningPoSt, WindowPoSt, PoRep C2 and SnapDeals at every sector size.

Each (kind, sector size) is a ``CircuitSpec`` whose ``sector_size`` is the
sector's size in bytes (2KiB → 2048, …, 32GiB → 34359738368), whose
``topology`` names the size and every circuit parameter, and whose work
items are the proof's partitions:

=============  =========  =========================================  ==========
kind           priority   circuit (one partition)                    partitions
=============  =========  =========================================  ==========
winning-post   CRITICAL   ``post.fallback_post`` 66 sectors × 1      1
window-post    HIGH       ``post.fallback_post`` S sectors × 10      any ≥ 1
porep          NORMAL     ``porep.stacked_circuit``                  interactive or NI count
snap           NORMAL     ``snap.empty_sector_update``               the size's count
=============  =========  =========================================  ==========

so the engine runs WinningPoSt > WindowPoSt > PoRep / SnapDeals (issue 7).

**Input forms** (what a daemon client sends: JSON objects; a field element
is an integer or a decimal / "0x" hex string, value < r; paths list, per
challenge, per tree level leaves first, the a − 1 siblings in child order):

* PoSt: ``{"randomness": hex of 32 bytes (a field element, little-endian),
  "partitions": [{"index"?: k (default: its position), "sectors": [{"id":
  u64, "comm_r", "comm_c", "comm_r_last", "leaves": [K], "paths": [K ×
  levels × (a − 1)]}, … 1..S]}, …]}``.  The challenged leaves are derived
  from the randomness (``post.partition_challenges``), not sent; a partition
  with fewer than S sectors is padded by repeating its last (rust-fil-proofs'
  padding).  WinningPoSt: one partition of 66 entries of the one sector
  (1 challenge each), as rust-fil-proofs lays it out.  ``post_json(cases)``
  writes this form from ``post.synthetic_post`` cases.
* PoRep: the C1 output (``SealCommitPhase1Output`` JSON, or lotus-bench's
  ``{"Phase1Out": …}``) read by ``circuits.filecoin.c1``; in process also a
  list of ``porep_synthetic.VanillaPartition``.  Its registered proof must be
  this sector size, with the interactive or the non-interactive partition
  count.
* SnapDeals: ``{"comm_r_old", "comm_d_new", "comm_r_new", "comm_c",
  "root_r_old", "root_r_new", "h"? (default the size's h), "partitions":
  [{"k"? (default: its position), "apex_leaves": [A], "partition_path":
  [pbl], "leaf_r_old": [K], "leaf_d_new": [K], "path_r_old": [K × levels ×
  (a − 1)], "path_r_new": (same), "path_d": [K × hl × 1] (tree D below the
  apex leaf)}, … one per partition]}``.
  The challenges are derived inside the circuit from comm_r_new.
  ``snap_json(cases)`` writes it from ``snap.synthetic_snap`` cases.

``split`` parses and validates (ValueError naming the field and what is
wrong) into per-partition host values (canonical uint32 limbs, numpy);
``witness(parts)`` stacks them, converts to Montgomery Fr and runs the
circuit's jitted witness generator batched over the partitions
(``circuits.cs.witness`` with the circuit's ``in_axes``): Fr
``(8, len(parts), n_vars)``.  ``synthetic(rng)`` returns a job's inputs in
the JSON form, from the synthetic generators seeded from ``rng`` (PoSt: one
partition; PoRep / SnapDeals: every partition of one sector).

API: ``filecoin_specs(sizes=SIZES) -> list[CircuitSpec]``,
``filecoin_registry(sizes=SIZES, **builtin_args) -> Registry`` (the builtin
example kinds and these), ``named_registry(name) -> Registry`` ("builtin" or
"filecoin"), ``post_spec``, ``porep_spec``, ``snap_spec``, ``post_json``,
``snap_json``, ``parse_post`` / ``parse_porep`` / ``parse_snap`` (the
splits), ``post_inputs`` / ``snap_inputs`` (parsed partitions -> the
circuit's stacked witness inputs), ``PRIORITIES``, ``SIZES``.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from circuits.filecoin import sizes as Z
from jaxprove import engine as E
from jaxprove.engine import CircuitSpec, Priority
from ops.field import R_FR as _R

SIZES = tuple(Z.SIZES)
PRIORITIES = {"winning-post": Priority.CRITICAL, "window-post": Priority.HIGH,
              "porep": Priority.NORMAL, "snap": Priority.NORMAL}
_LIMBS = 8


# ---------------------------------------------------------------- value parsing
def _show(x) -> str:
    s = repr(x)
    return s if len(s) <= 60 else s[:57] + "..."


def _fr_int(x, what: str) -> int:
    """A field element from an int or a decimal / 0x-hex string."""
    if isinstance(x, str):
        try:
            v = int(x, 16) if x.lower().startswith("0x") else int(x, 10)
        except ValueError:
            raise ValueError(f"{what}: {_show(x)} is not an integer") from None
    elif isinstance(x, int) and not isinstance(x, bool):
        v = x
    else:
        raise ValueError(f"{what}: expected a field element (integer or string), got {_show(x)}")
    if not 0 <= v < _R:
        raise ValueError(f"{what}: {v:#x} is not a field element (must lie in [0, r))")
    return v


def _limbs(values, shape) -> np.ndarray:
    """Canonical ints -> little-endian uint32 limbs ``(*shape, 8)``."""
    raw = b"".join(int(v).to_bytes(32, "little") for v in values)
    return np.frombuffer(raw, "<u4").astype(np.uint32).reshape(tuple(shape) + (_LIMBS,))


def _fr_array(x, shape, what: str) -> np.ndarray:
    """Nested lists of field elements of ``shape`` -> limbs ``(*shape, 8)``."""
    out = []

    def walk(v, dims, where):
        if not dims:
            out.append(_fr_int(v, what + where))
            return
        if not isinstance(v, list) or len(v) != dims[0]:
            raise ValueError(f"{what}{where}: expected a list of {dims[0]}, got {_show(v)}")
        for i, e in enumerate(v):
            walk(e, dims[1:], f"{where}[{i}]")

    walk(x, tuple(shape), "")
    return _limbs(out, shape)


def _field(obj, key: str, where: str):
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected an object, got {_show(obj)}")
    if key not in obj:
        raise ValueError(f"{where}: missing field {key!r}")
    return obj[key]


def _int_in(x, lo: int, hi: int, what: str) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or not lo <= x < hi:
        raise ValueError(f"{what}: expected an integer in [{lo}, {hi}), got {_show(x)}")
    return x


def _partitions(inputs, kind: str, count: tuple | None = None) -> list:
    parts = _field(inputs, "partitions", kind)
    if not isinstance(parts, list) or not parts:
        raise ValueError(f"{kind}: 'partitions' must be a non-empty list")
    if count is not None and len(parts) not in count:
        raise ValueError(f"{kind}: {len(parts)} partitions, expected "
                         f"{' or '.join(map(str, count))}")
    return parts


def _paths(x, per: int, arities, what: str) -> tuple:
    """[per × levels × (a − 1)] -> per level limbs (per, a − 1, 8)."""
    if not isinstance(x, list) or len(x) != per:
        raise ValueError(f"{what}: expected a list of {per} paths, got {_show(x)}")
    levels = []
    for i, p in enumerate(x):
        if not isinstance(p, list) or len(p) != len(arities):
            raise ValueError(f"{what}[{i}]: expected {len(arities)} levels, got {_show(p)}")
        levels.append([_fr_array(s, (a - 1,), f"{what}[{i}][{lv}]")
                       for lv, (s, a) in enumerate(zip(p, arities))])
    return tuple(np.stack([lv[j] for lv in levels]) for j in range(len(arities)))


def _to_ints(a) -> list:
    """Montgomery Fr ``(8, ...)`` -> nested lists of canonical ints."""
    from ops.field import Fr
    return np.asarray(Fr.to_int(np.asarray(a)), dtype=object).tolist()


def _seed(rng) -> int:
    return rng.randrange(1 << 63)


# ---------------------------------------------------------------- PoSt
class PoStPart(NamedTuple):
    """One parsed PoSt partition, padded to S sectors: limbs comm_r, comm_c,
    comm_r_last (S, 8), leaves (S, K, 8); index (S, K) uint32 challenged
    leaves; siblings per level (S, K, a − 1, 8); public the partition's
    public inputs (rust-fil-proofs' order)."""
    comm_r: np.ndarray
    comm_c: np.ndarray
    comm_r_last: np.ndarray
    leaves: np.ndarray
    index: np.ndarray
    siblings: tuple
    public: list


def _parse_randomness(x, kind: str) -> bytes:
    try:
        r = bytes.fromhex(x) if isinstance(x, str) else None
    except ValueError:
        r = None
    if r is None or len(r) != 32:
        raise ValueError(f"{kind}: randomness must be a hex string of 32 bytes, got {_show(x)}")
    if int.from_bytes(r, "little") >= _R:
        raise ValueError(f"{kind}: randomness is not a field element (little-endian ≥ r)")
    return r


def parse_post(inputs, p: Z.SectorSize, kind: str) -> list:
    """PoSt JSON (module docstring) -> [PoStPart] (``kind`` "winning" or "window")."""
    from circuits.filecoin import post as P
    name = f"{kind}-post {p.name}"
    S, K = p.post(kind)
    arities = p.tree_r_arities
    randomness = _parse_randomness(_field(inputs, "randomness", name), name)
    out = []
    for j, part in enumerate(_partitions(inputs, name, (1,) if kind == "winning" else None)):
        where = f"{name} partition {j}"
        sectors = _field(part, "sectors", where)
        k = _int_in(part.get("index", j), 0, 1 << 32, f"{where} index")
        if not isinstance(sectors, list) or not 1 <= len(sectors) <= S:
            raise ValueError(f"{where}: 'sectors' must list 1 to {S} sectors, got "
                             f"{len(sectors) if isinstance(sectors, list) else _show(sectors)}")
        ids, comms, leaves, sibs = [], [], [], []
        for i, s in enumerate(sectors):
            w = f"{where} sector {i}"
            ids.append(_int_in(_field(s, "id", w), 0, 1 << 64, f"{w} id"))
            comms.append([_fr_int(_field(s, f, w), f"{w} {f}")
                          for f in ("comm_r", "comm_c", "comm_r_last")])
            leaves.append(_fr_array(_field(s, "leaves", w), (K,), f"{w} leaves"))
            sibs.append(_paths(_field(s, "paths", w), K, arities, f"{w} paths"))
        if kind == "winning" and len(set(ids)) != 1:
            raise ValueError(f"{where}: WinningPoSt proves one sector; its {S} entries must "
                             f"share one id, got {len(set(ids))} ids")
        pad = np.asarray(P.pad_sectors(list(range(len(ids))), S))
        ch = P.partition_challenges(randomness, ids, p.nodes, S, K, k)
        c = _limbs([x for row in comms for x in row], (len(ids), 3))
        public = P.partition_public_inputs(
            randomness, [P.PublicSector(i, row[0]) for i, row in zip(ids, comms)], p.nodes, S,
            K, k)
        out.append(PoStPart(c[pad, 0], c[pad, 1], c[pad, 2], np.stack(leaves)[pad],
                            ch[pad].astype(np.uint32),
                            tuple(np.stack([s[lv] for s in sibs])[pad]
                                  for lv in range(len(arities))), public))
    return out


def post_inputs(parts: list):
    """``post.PoStInputs`` of parsed partitions stacked on the instance axis
    (``post.in_axes``): Fr (8, B, S), (8, B, S, K), index (B, S, K), ..."""
    import jax.numpy as jnp

    from circuits.filecoin import post as P
    from circuits.filecoin import synthetic as Y
    from circuits.gadgets.merkle import MerklePath
    st = lambda f: Y.to_fr(np.stack([getattr(x, f) for x in parts]))      # noqa: E731
    return P.PoStInputs(
        st("comm_r"), st("comm_c"), st("comm_r_last"), st("leaves"),
        MerklePath(jnp.asarray(np.stack([x.index for x in parts])),
                   tuple(Y.to_fr(np.stack([x.siblings[lv] for x in parts]))
                         for lv in range(len(parts[0].siblings)))))


def post_witness(parts: list, arities, sectors: int, challenges: int):
    """Fr witnesses (8, len(parts), n_vars) of parsed PoSt partitions."""
    from circuits import cs as C
    from circuits.filecoin import post as P
    return C.witness(P.fallback_post, post_inputs(parts), tuple(arities), sectors, challenges,
                     in_axes=P.in_axes(len(arities)))


def post_json(cases: list) -> dict:
    """The PoSt JSON form of ``post.synthetic_post`` cases (one per
    partition, all from one randomness; a case's ``index`` is its position)."""
    from circuits.filecoin import synthetic as Y
    if not cases or len({c.randomness for c in cases}) != 1:
        raise ValueError("post_json: need cases sharing one randomness")
    parts = []
    for case in cases:
        ints = lambda v: [str(x) for x in np.asarray(Y.ints(v)).reshape(-1)]   # noqa: E731
        sectors = []
        for i, s in enumerate(case.sectors):
            sibs = [[[str(x) for x in Y.ints(lv[i, j]).reshape(-1)] for lv in case.paths.siblings]
                    for j in range(case.paths.leaves.shape[1])]
            sectors.append({"id": int(s.id), "comm_r": str(s.comm_r),
                            "comm_c": ints(case.comm_c[i])[0],
                            "comm_r_last": ints(case.comm_r_last[i])[0],
                            "leaves": ints(case.paths.leaves[i]), "paths": sibs})
        parts.append({"sectors": sectors})
    return {"randomness": cases[0].randomness.hex(), "partitions": parts}


def post_spec(size: str, kind: str) -> CircuitSpec:
    """WinningPoSt (``kind`` "winning") or WindowPoSt ("window") at ``size``."""
    p = Z.params(size)
    S, K = p.post(kind)
    arities = p.tree_r_arities
    topology = (f"{kind}-post-{size}-n{p.nodes}-tree{'.'.join(map(str, arities))}"
                f"-s{S}-c{K}")

    def record():
        from circuits import cs as C
        from circuits.filecoin import post as P
        return C.record(P.fallback_post, arities, S, K, name=topology)

    def synthetic(rng):
        from circuits.filecoin import post as P
        return post_json([P.synthetic_post(arities, S, K, _seed(rng), kind=kind)])

    return CircuitSpec(f"{kind}-post", p.sector_bytes, topology, record,
                       lambda inputs: parse_post(inputs, p, kind),
                       lambda parts: post_witness(parts, arities, S, K),
                       PRIORITIES[f"{kind}-post"], 1 if kind == "winning" else None, synthetic)


# ---------------------------------------------------------------- PoRep
def parse_porep(inputs, p: Z.SectorSize) -> list:
    """A C1 output dict (or [VanillaPartition]) -> [VanillaPartition] of
    this size, with the interactive or the NI partition count."""
    from circuits.filecoin import c1
    from circuits.filecoin import porep as PR
    from circuits.filecoin.porep_synthetic import VanillaPartition
    name = f"porep {p.name}"
    cfg = PR.CONFIGS[p.name]
    if isinstance(inputs, dict):
        try:
            parts = c1.from_json(inputs).partitions
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from None
    elif isinstance(inputs, (list, tuple)) and inputs and \
            all(isinstance(x, VanillaPartition) for x in inputs):
        parts = list(inputs)
    else:
        raise ValueError(f"{name}: inputs must be a C1 output (SealCommitPhase1Output JSON "
                         f"object), got {_show(inputs)}")
    got = {vp.cfg.name for vp in parts}
    if got != {cfg.name} or any(vp.cfg != cfg for vp in parts):
        raise ValueError(f"{name}: the C1 output is for {sorted(got)}, not {p.name}")
    if len(parts) not in (p.porep_partitions, p.porep_partitions_ni):
        raise ValueError(f"{name}: {len(parts)} partitions, expected {p.porep_partitions} "
                         f"(interactive) or {p.porep_partitions_ni} (non-interactive)")
    for k, vp in enumerate(parts):
        if vp.k != k:
            raise ValueError(f"{name}: partition {k} has index {vp.k}")
    return parts


def porep_witness(parts: list, cfg):
    """Fr witnesses (8, len(parts), n_vars) of VanillaPartitions."""
    from circuits import cs as C
    from circuits.filecoin import porep as PR
    from circuits.filecoin import porep_synthetic as PS
    batch = PS.stack_inputs([PS.to_inputs(vp) for vp in parts], cfg)
    return C.witness(PR.stacked_circuit, batch, cfg, in_axes=PR.stacked_in_axes(cfg))


def porep_spec(size: str) -> CircuitSpec:
    """PoRep C2 at ``size``: one work item per partition."""
    from circuits.filecoin import porep as PR
    p = Z.params(size)
    cfg = PR.CONFIGS[size]
    topology = (f"porep-{size}-n{cfg.nodes}-tree{'.'.join(map(str, cfg.arities))}"
                f"-l{cfg.layers}-c{cfg.challenges}")

    def record():
        from circuits import cs as C
        return C.record(PR.stacked_circuit, cfg, name=topology)

    def synthetic(rng):
        from circuits.filecoin import c1
        from circuits.filecoin import porep_synthetic as PS
        return c1.to_json(PS.generate_sector(cfg, _seed(rng), p.porep_partitions))

    return CircuitSpec("porep", p.sector_bytes, topology, record,
                       lambda inputs: parse_porep(inputs, p),
                       lambda parts: porep_witness(parts, cfg), PRIORITIES["porep"], None,
                       synthetic)


# ---------------------------------------------------------------- SnapDeals
class SnapPart(NamedTuple):
    """One parsed SnapDeals partition: limbs of the sector's scalars
    (k_and_h_select, comm_r_old, comm_d_new, comm_r_new, comm_c, root_r_old,
    root_r_new) (7, 8), apex_leaves (A, 8), partition_path per level (1, 8),
    leaf_r_old / leaf_d_new (K, 8), path_r_old / path_r_new per level
    (K, a − 1, 8), path_d per level (K, 1, 8); public [k_and_h_select,
    comm_r_old, comm_d_new, comm_r_new]."""
    scalars: np.ndarray
    apex_leaves: np.ndarray
    partition_path: tuple
    leaf_r_old: np.ndarray
    leaf_d_new: np.ndarray
    path_r_old: tuple
    path_r_new: tuple
    path_d: tuple
    public: list


_SNAP_SCALARS = ("comm_r_old", "comm_d_new", "comm_r_new", "comm_c", "root_r_old", "root_r_new")


def parse_snap(inputs, shape, size: str) -> list:
    """SnapDeals JSON (module docstring) -> [SnapPart]."""
    name = f"snap {size}"
    sc = {f: _fr_int(_field(inputs, f, name), f"{name} {f}") for f in _SNAP_SCALARS}
    h = inputs.get("h", shape.h)
    if h not in shape.hs or isinstance(h, bool):
        raise ValueError(f"{name}: h = {_show(h)} is not one of the allowed {shape.hs}")
    K, A, pbl, hl = shape.challenges, shape.apex_leaves, shape.pbl, shape.hl
    out, seen = [], set()
    for j, part in enumerate(_partitions(inputs, name, (shape.partitions,))):
        where = f"{name} partition {j}"
        k = _int_in(_field(part, "k", where) if isinstance(part, dict) and "k" in part else j,
                    0, shape.partitions, f"{where} k")
        if k in seen:
            raise ValueError(f"{where}: partition k = {k} appears twice")
        seen.add(k)
        khs = k | (1 << shape.hs.index(h)) << pbl
        ppath = _fr_array(_field(part, "partition_path", where), (pbl,), f"{where} partition_path")
        path_d = _paths(_field(part, "path_d", where), K, (2,) * hl, f"{where} path_d")
        out.append(SnapPart(
            _limbs([khs] + [sc[f] for f in _SNAP_SCALARS], (7,)),
            _fr_array(_field(part, "apex_leaves", where), (A,), f"{where} apex_leaves"),
            tuple(ppath[lv:lv + 1] for lv in range(pbl)),
            _fr_array(_field(part, "leaf_r_old", where), (K,), f"{where} leaf_r_old"),
            _fr_array(_field(part, "leaf_d_new", where), (K,), f"{where} leaf_d_new"),
            _paths(_field(part, "path_r_old", where), K, shape.arities, f"{where} path_r_old"),
            _paths(_field(part, "path_r_new", where), K, shape.arities, f"{where} path_r_new"),
            path_d, [khs, sc["comm_r_old"], sc["comm_d_new"], sc["comm_r_new"]]))
    return out


def snap_inputs(parts: list, shape):
    """``snap.SnapInputs`` of parsed partitions stacked on the instance axis
    (axis 1 of every Fr array, ``snap.in_axes``)."""
    from circuits.filecoin import snap as SN
    from circuits.filecoin import synthetic as Y
    st = lambda f: np.stack([getattr(x, f) for x in parts])                # noqa: E731
    lv = lambda f, n: tuple(Y.to_fr(np.stack([getattr(x, f)[i] for x in parts]))  # noqa: E731
                            for i in range(n))
    scalars = Y.to_fr(st("scalars"))                                       # (8, B, 7)
    return SN.SnapInputs(
        *(scalars[:, :, i] for i in range(7)), Y.to_fr(st("apex_leaves")),
        lv("partition_path", shape.pbl), Y.to_fr(st("leaf_r_old")), Y.to_fr(st("leaf_d_new")),
        lv("path_r_old", len(shape.arities)), lv("path_r_new", len(shape.arities)),
        lv("path_d", shape.hl))


def snap_witness(parts: list, shape):
    """Fr witnesses (8, len(parts), n_vars) of parsed SnapDeals partitions."""
    from circuits import cs as C
    from circuits.filecoin import snap as SN
    return C.witness(SN.empty_sector_update, snap_inputs(parts, shape), shape,
                     in_axes=SN.in_axes(shape))


def snap_json(cases: list) -> dict:
    """The SnapDeals JSON form of ``snap.synthetic_snap`` cases of one sector
    (one per partition)."""
    first = cases[0]
    if any(c.public[1:] != first.public[1:] or c.comm_c != first.comm_c for c in cases):
        raise ValueError("snap_json: the cases must be partitions of one sector")

    def flat(a):
        return [str(x) for x in np.asarray(_to_ints(a), dtype=object).reshape(-1)]

    def paths(levels):
        """Per level Fr (8, K, a − 1) -> [K × levels × (a − 1)] strings."""
        ints = [np.asarray(_to_ints(lv), dtype=object) for lv in levels]
        return [[[str(x) for x in lv[j]] for lv in ints] for j in range(ints[0].shape[0])] \
            if ints else None

    parts = []
    for c in cases:
        inp = c.inputs
        parts.append({
            "k": int(c.k), "apex_leaves": flat(inp.apex_leaves),
            "partition_path": [flat(s)[0] for s in inp.partition_path],
            "leaf_r_old": flat(inp.leaf_r_old), "leaf_d_new": flat(inp.leaf_d_new),
            "path_r_old": paths(inp.path_r_old), "path_r_new": paths(inp.path_r_new),
            "path_d": paths(inp.path_d) or [[] for _ in range(len(c.challenges))]})
    return {"comm_r_old": str(first.public[1]), "comm_d_new": str(first.public[2]),
            "comm_r_new": str(first.public[3]), "comm_c": str(first.comm_c),
            "root_r_old": str(first.root_r_old), "root_r_new": str(first.root_r_new),
            "partitions": parts}


def snap_spec(size: str) -> CircuitSpec:
    """SnapDeals at ``size``: one work item per partition, every partition
    of the sector in one job."""
    from circuits.filecoin import snap as SN
    p = Z.params(size)
    shape = SN.size_shape(size)
    topology = (f"snap-{size}-n{shape.nodes}-tree{'.'.join(map(str, shape.arities))}"
                f"-p{shape.partitions}-c{shape.challenges}-apex{shape.apex_leaves}"
                f"-hs{'.'.join(map(str, shape.hs))}")

    def record():
        from circuits import cs as C
        return C.record(SN.empty_sector_update, shape, name=topology)

    def synthetic(rng):
        seed = _seed(rng)
        return snap_json([SN.synthetic_snap(shape, seed, k) for k in range(shape.partitions)])

    return CircuitSpec("snap", p.sector_bytes, topology, record,
                       lambda inputs: parse_snap(inputs, shape, size),
                       lambda parts: snap_witness(parts, shape), PRIORITIES["snap"],
                       shape.partitions, synthetic)


# ---------------------------------------------------------------- registries
def filecoin_specs(sizes=SIZES) -> list[CircuitSpec]:
    """winning-post, window-post, porep and snap at each sector size
    (names of ``circuits.filecoin.sizes.SIZES``).  Nothing is recorded or
    compiled until the engine needs it."""
    sizes = tuple(sizes)
    for s in sizes:
        Z.params(s)                                     # ValueError for an unknown size
    if len(set(sizes)) != len(sizes):
        raise ValueError(f"filecoin_specs: sector sizes repeat: {sizes}")
    return [spec for s in sizes for spec in (post_spec(s, "winning"), post_spec(s, "window"),
                                             porep_spec(s), snap_spec(s))]


def filecoin_registry(sizes=SIZES, **builtin_args) -> E.Registry:
    """The builtin example kinds (``engine.builtin_registry(**builtin_args)``)
    and the Filecoin kinds at ``sizes``."""
    return E.Registry(list(E.builtin_registry(**builtin_args)) + filecoin_specs(sizes))


REGISTRIES = ("builtin", "filecoin")


def named_registry(name: str) -> E.Registry:
    """A registry by name (the daemon's and prove_batch's ``registry``
    option): "builtin" (the examples) or "filecoin" (the examples and every
    Filecoin kind at every size)."""
    if name == "builtin":
        return E.builtin_registry()
    if name == "filecoin":
        return filecoin_registry()
    raise ValueError(f"unknown registry {name!r}; known: {', '.join(REGISTRIES)}")


__all__ = ["filecoin_specs", "filecoin_registry", "named_registry", "post_spec", "porep_spec",
           "snap_spec", "post_json", "snap_json", "post_inputs", "snap_inputs", "parse_post",
           "parse_porep", "parse_snap", "PoStPart", "SnapPart", "PRIORITIES", "SIZES", "REGISTRIES"]
