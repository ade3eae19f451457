"""The C1 output JSON (``SealCommitPhase1Output``) that Filecoin's proving API
hands to C2, read into and written from ``porep_synthetic.VanillaPartition``.

Format (rust-filecoin-proofs-api seal.rs and rust-fil-proofs'
storage-proofs-porep stacked/vanilla/{params,column,column_proof,
labeling_proof,encoding_proof}.rs, storage-proofs-core merkle/proof.rs, as
serde_json writes them):

    {"registered_proof": "StackedDrg32GiBV1_1",
     "vanilla_proofs": {"StackedDrg32GiBV1": [[Proof, ...C], ...partitions]},
     "comm_r": D, "comm_d": D, "replica_id": D, "seed": D, "ticket": D}

    D (a domain / commitment / ticket) = 32 integers 0..255, the value's
        32-byte little-endian encoding
    Proof = {"comm_d_proofs": MerkleProof, "comm_r_last_proof": MerkleProof,
             "replica_column_proofs": {"c_x": ColumnProof,
                                       "drg_parents": [ColumnProof × 6],
                                       "exp_parents": [ColumnProof × 8]},
             "labeling_proofs": [{"parents": [D × 37], "layer_index": l,
                                  "node": c} for l = 1..L],
             "encoding_proof": {"parents": [D × 37], "layer_index": L,
                                "node": c}}
    ColumnProof = {"column": {"index": n, "rows": [D × L], "_h": null},
                   "inclusion_proof": MerkleProof}
    MerkleProof = {"data": {"Single": {"root": D, "leaf": D, "path": P}}}
               or {"data": {"Sub": {"base_proof": P, "sub_proof": P,
                                    "root": D, "leaf": D}}}
               or {"data": {"Top": {"base_proof": P, "sub_proof": P,
                                    "top_proof": P, "root": D, "leaf": D}}}
    P = {"path": [{"hashes": [D × (a − 1)], "index": position} per level]}

Mapping onto the circuit (``StackedCircuit``'s ``From<VanillaProof>``): the
challenge is ``labeling_proofs[0].node``; the data leaf, comm_d path and
comm_r_last path come from the two Merkle proofs; the parents' columns and
tree-C paths from ``drg_parents`` / ``exp_parents`` (their node indices from
``column.index``); comm_c is the root of ``c_x``'s inclusion proof and
comm_r_last the root of ``comm_r_last_proof``.  The reader checks what
StackedCompound checks before proving (one comm_c and one comm_r_last per
partition, the proofs' shapes) and that each path's positions spell its
node index.

Any registered proof "StackedDrg<size>V1…" (V1, V1_1, the V1_2 feature
variants: the same circuit) selects the size; lotus-bench's wrapper
{"Phase1Out": base64(JSON), ...} is unwrapped.  The writer writes V1_1.
The five sector sizes map to their registered proofs; the scaled-down test
configurations (``porep.CONFIGS`` "mini-…") are written with the
registered_proof "jaxprove:<name>" (not a Filecoin value).
API: ``to_json(partitions) -> dict``, ``dumps(partitions) -> str``,
``write(path, partitions)``; ``from_json(obj)``, ``loads(text)``,
``read(path)`` -> ``C1Output``.
"""
from __future__ import annotations

import base64
import json
import os
import tempfile
from typing import NamedTuple

from circuits.filecoin import porep as PR
from circuits.filecoin.porep_synthetic import VanillaPartition, poseidon_native
from circuits.gadgets import sdr
from ops.field import R_FR

_SIZES = ("2KiB", "8MiB", "512MiB", "32GiB", "64GiB")
TEST_PREFIX = "jaxprove:"


class C1Output(NamedTuple):
    """A parsed SealCommitPhase1Output."""
    registered_proof: str
    cfg: PR.PoRepConfig
    partitions: list            # [VanillaPartition]
    comm_r: int
    comm_d: int
    replica_id: int
    seed: bytes
    ticket: bytes


# ---------------------------------------------------------------- names
def registered_proof(cfg: PR.PoRepConfig) -> str:
    """RegisteredSealProof of a configuration (V1_1), or "jaxprove:<name>"."""
    return f"StackedDrg{cfg.name}V1_1" if cfg.name in _SIZES else TEST_PREFIX + cfg.name


def _config(reg: str) -> PR.PoRepConfig:
    if not isinstance(reg, str):
        raise ValueError(f"c1: registered_proof must be a string, got {reg!r}")
    if reg.startswith(TEST_PREFIX):
        name = reg[len(TEST_PREFIX):]
    else:
        name = reg.removeprefix("StackedDrg").partition("V1")[0]
        if not reg.startswith("StackedDrg") or "V1" not in reg or name not in _SIZES:
            raise ValueError(f"c1: unknown registered_proof {reg!r}")
    if name not in PR.CONFIGS:
        raise ValueError(f"c1: unknown configuration {name!r} in registered_proof {reg!r}")
    return PR.CONFIGS[name]


def _vanilla_key(cfg: PR.PoRepConfig) -> str:
    return f"StackedDrg{cfg.name}V1" if cfg.name in _SIZES else TEST_PREFIX + cfg.name


# ---------------------------------------------------------------- domains
def domain(x: int) -> list:
    """A value < 2^256 as the 32 little-endian bytes serde writes."""
    return list(int(x).to_bytes(32, "little"))


def _int(d, what: str) -> int:
    if not isinstance(d, list) or len(d) != 32 or \
            not all(isinstance(b, int) and 0 <= b < 256 for b in d):
        raise ValueError(f"c1: {what} must be 32 byte values, got {str(d)[:60]}")
    return int.from_bytes(bytes(d), "little")


def _fr(d, what: str) -> int:
    x = _int(d, what)
    if x >= R_FR:
        raise ValueError(f"c1: {what} = {x:#x} is not a field element")
    return x


# ---------------------------------------------------------------- writer
def _kind(cfg: PR.PoRepConfig, tree_d: bool) -> str:
    if tree_d or not cfg.sub:
        return "Single"
    return "Top" if cfg.top else "Sub"


def merkle_proof(cfg: PR.PoRepConfig, leaf: int, root: int, sibs, index: int,
                 tree_d: bool = False) -> dict:
    """MerkleProof JSON of a path (siblings per level, leaves first) of node
    ``index`` in tree D (binary) or a tree R / C of ``cfg``'s shape."""
    arities = (2,) * cfg.depth_d if tree_d else cfg.arities
    elems = []
    for s, a in zip(sibs, arities):
        index, pos = divmod(index, a)
        elems.append({"hashes": [domain(x) for x in s], "index": pos})
    kind = _kind(cfg, tree_d)
    if kind == "Single":
        body = {"root": domain(root), "leaf": domain(leaf), "path": {"path": elems}}
    elif kind == "Sub":
        body = {"base_proof": {"path": elems[:-1]}, "sub_proof": {"path": elems[-1:]},
                "root": domain(root), "leaf": domain(leaf)}
    else:
        body = {"base_proof": {"path": elems[:-2]}, "sub_proof": {"path": elems[-2:-1]},
                "top_proof": {"path": elems[-1:]}, "root": domain(root), "leaf": domain(leaf)}
    return {"data": {kind: body}}


def _column_proof(vp: VanillaPartition, node: int, rows, sibs) -> dict:
    return {"column": {"index": node, "rows": [domain(x) for x in rows], "_h": None},
            "inclusion_proof": merkle_proof(vp.cfg, poseidon_native(rows), vp.comm_c, sibs,
                                            node)}


def _labeling_parents(vp: VanillaPartition, i: int, layer: int) -> list:
    cols = vp.parent_columns[i]
    parents = [c[layer - 1] for c in cols[:sdr.BASE_DEGREE]]
    if layer > 1:
        parents += [c[layer - 2] for c in cols[sdr.BASE_DEGREE:]]
    return [domain(x) for x in sdr.expand_parents(parents, layer)]


def challenge_proof(vp: VanillaPartition, i: int) -> dict:
    """The vanilla ``Proof`` JSON of challenge i of a partition."""
    cfg, c, L = vp.cfg, vp.challenges[i], vp.cfg.layers
    replica = (vp.labels[i][-1] + vp.data_leaves[i]) % R_FR
    parents = vp.drg_parents[i] + vp.exp_parents[i]
    cols = [_column_proof(vp, p, vp.parent_columns[i][j], vp.parent_paths[i][j])
            for j, p in enumerate(parents)]
    labeling = [{"parents": _labeling_parents(vp, i, layer), "layer_index": layer, "node": c}
                for layer in range(1, L + 1)]
    return {
        "comm_d_proofs": merkle_proof(cfg, vp.data_leaves[i], vp.comm_d, vp.comm_d_paths[i], c,
                                      tree_d=True),
        "comm_r_last_proof": merkle_proof(cfg, replica, vp.comm_r_last, vp.comm_r_last_paths[i],
                                          c),
        "replica_column_proofs": {
            "c_x": _column_proof(vp, c, vp.labels[i], vp.comm_c_paths[i]),
            "drg_parents": cols[:sdr.BASE_DEGREE], "exp_parents": cols[sdr.BASE_DEGREE:]},
        "labeling_proofs": labeling,
        "encoding_proof": dict(labeling[-1]),
    }


def to_json(partitions) -> dict:
    """SealCommitPhase1Output of a sector's partitions 0, 1, ... (one replica
    id, seed, ticket, comm_d and comm_r) as a JSON-ready dict."""
    if not partitions:
        raise ValueError("c1: no partitions")
    first = partitions[0]
    for k, vp in enumerate(partitions):
        if (vp.cfg, vp.replica_id, vp.seed, vp.ticket, vp.comm_d, vp.comm_r) != \
                (first.cfg, first.replica_id, first.seed, first.ticket, first.comm_d,
                 first.comm_r):
            raise ValueError("c1: the partitions must share the configuration, replica id, "
                             "seed, ticket, comm_d and comm_r")
        if vp.k != k:
            raise ValueError(f"c1: partition {k} has index {vp.k}")
    for name, b in (("seed", first.seed), ("ticket", first.ticket)):
        if len(bytes(b)) != 32:
            raise ValueError(f"c1: the {name} must be 32 bytes")
    seed, ticket = first.seed, first.ticket
    return {"registered_proof": registered_proof(first.cfg),
            "vanilla_proofs": {_vanilla_key(first.cfg): [
                [challenge_proof(vp, i) for i in range(vp.cfg.challenges)] for vp in partitions]},
            "comm_r": domain(first.comm_r), "comm_d": domain(first.comm_d),
            "replica_id": domain(first.replica_id), "seed": list(bytes(seed)),
            "ticket": list(bytes(ticket))}


def dumps(partitions) -> str:
    return json.dumps(to_json(partitions))


def write(path: str, partitions) -> None:
    """Write the JSON atomically (a temporary file renamed into place)."""
    text = dumps(partitions)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# ---------------------------------------------------------------- reader
def _get(obj, key: str, where: str):
    if not isinstance(obj, dict) or key not in obj:
        raise ValueError(f"c1: {where} has no field {key!r}")
    return obj[key]


def _path(cfg: PR.PoRepConfig, proof, where: str, tree_d: bool = False):
    """MerkleProof JSON -> (leaf, root, siblings per level, node index)."""
    data = _get(proof, "data", where)
    kind = _kind(cfg, tree_d)
    if not isinstance(data, dict) or list(data) != [kind]:
        raise ValueError(f"c1: {where}: expected a {kind!r} proof, got {list(data)[:3]}")
    body = data[kind]
    parts = {"Single": ["path"], "Sub": ["base_proof", "sub_proof"],
             "Top": ["base_proof", "sub_proof", "top_proof"]}[kind]
    elems = []
    for part in parts:
        elems += _get(_get(body, part, where), "path", f"{where}.{part}")
    arities = (2,) * cfg.depth_d if tree_d else cfg.arities
    if len(elems) != len(arities):
        raise ValueError(f"c1: {where}: {len(elems)} path levels, the tree has {len(arities)}")
    sibs, index, scale = [], 0, 1
    for lv, (e, a) in enumerate(zip(elems, arities)):
        hashes = _get(e, "hashes", f"{where} level {lv}")
        pos = _get(e, "index", f"{where} level {lv}")
        if not isinstance(hashes, list) or len(hashes) != a - 1:
            raise ValueError(f"c1: {where} level {lv}: {a - 1} sibling hashes expected")
        if not isinstance(pos, int) or not 0 <= pos < a:
            raise ValueError(f"c1: {where} level {lv}: position {pos!r} outside 0..{a - 1}")
        sibs.append([_fr(h, f"{where} level {lv} hash") for h in hashes])
        index += pos * scale
        scale *= a
    return (_fr(_get(body, "leaf", where), f"{where} leaf"),
            _fr(_get(body, "root", where), f"{where} root"), sibs, index)


def _column(cfg, cp, where: str):
    col = _get(cp, "column", where)
    rows = _get(col, "rows", f"{where}.column")
    node = _get(col, "index", f"{where}.column")
    if not isinstance(rows, list) or len(rows) != cfg.layers:
        raise ValueError(f"c1: {where}: a column of {cfg.layers} rows expected")
    rows = [_fr(r, f"{where} row") for r in rows]
    leaf, root, sibs, index = _path(cfg, _get(cp, "inclusion_proof", where), where)
    if index != node:
        raise ValueError(f"c1: {where}: the path proves node {index}, the column is node {node}")
    return node, rows, root, sibs


def _partition(cfg, proofs, replica_id, seed, ticket, comm_d, comm_r, k) -> VanillaPartition:
    if not isinstance(proofs, list) or len(proofs) != cfg.challenges:
        raise ValueError(f"c1: partition {k}: {cfg.challenges} challenge proofs expected")
    out = {f: [] for f in VanillaPartition._fields}
    roots_r, roots_c = set(), set()
    for i, p in enumerate(proofs):
        where = f"partition {k} challenge {i}"
        labeling = _get(p, "labeling_proofs", where)
        if not isinstance(labeling, list) or len(labeling) != cfg.layers:
            raise ValueError(f"c1: {where}: {cfg.layers} labeling proofs expected")
        c = _get(labeling[0], "node", f"{where} labeling proof")
        leaf, root_d, d_sibs, d_index = _path(cfg, _get(p, "comm_d_proofs", where),
                                              f"{where} comm_d_proofs", tree_d=True)
        _, root_r, r_sibs, r_index = _path(cfg, _get(p, "comm_r_last_proof", where),
                                           f"{where} comm_r_last_proof")
        rcp = _get(p, "replica_column_proofs", where)
        node, labels, root_c, c_sibs = _column(cfg, _get(rcp, "c_x", where), f"{where} c_x")
        if not (c == d_index == r_index == node):
            raise ValueError(f"c1: {where}: challenge {c}, but the paths prove nodes "
                             f"{d_index} (D), {r_index} (R), {node} (C)")
        if root_d != comm_d:
            raise ValueError(f"c1: {where}: the comm_d proof's root is not comm_d")
        cols = []
        for name, n in (("drg_parents", sdr.BASE_DEGREE), ("exp_parents", sdr.EXP_DEGREE)):
            lst = _get(rcp, name, where)
            if not isinstance(lst, list) or len(lst) != n:
                raise ValueError(f"c1: {where}: {n} {name} column proofs expected")
            cols += [_column(cfg, cp, f"{where} {name}[{j}]") for j, cp in enumerate(lst)]
        roots_r.add(root_r)
        roots_c.update([root_c] + [col[2] for col in cols])
        out["challenges"].append(c)
        out["drg_parents"].append([col[0] for col in cols[:sdr.BASE_DEGREE]])
        out["exp_parents"].append([col[0] for col in cols[sdr.BASE_DEGREE:]])
        out["data_leaves"].append(leaf)
        out["comm_d_paths"].append(d_sibs)
        out["parent_columns"].append([col[1] for col in cols])
        out["parent_paths"].append([col[3] for col in cols])
        out["labels"].append(labels)
        out["comm_r_last_paths"].append(r_sibs)
        out["comm_c_paths"].append(c_sibs)
    if len(roots_r) != 1 or len(roots_c) != 1:
        raise ValueError(f"c1: partition {k}: inconsistent comm_r_last or comm_c roots")
    out.update(cfg=cfg, k=k, replica_id=replica_id, seed=seed, ticket=ticket,
               comm_d=comm_d, comm_r=comm_r,
               comm_r_last=roots_r.pop(), comm_c=roots_c.pop())
    return VanillaPartition(**out)


def from_json(obj: dict) -> C1Output:
    """Parse a SealCommitPhase1Output dict (see the module docstring), or
    lotus-bench's wrapper {"Phase1Out": base64 of that JSON, ...}."""
    if isinstance(obj, dict) and "Phase1Out" in obj:
        try:
            obj = json.loads(base64.b64decode(obj["Phase1Out"], validate=True))
        except (ValueError, TypeError) as e:
            raise ValueError(f"c1: Phase1Out is not base64 of a JSON document ({e})") from None
    reg = _get(obj, "registered_proof", "the C1 output")
    cfg = _config(reg)
    vanilla = _get(obj, "vanilla_proofs", "the C1 output")
    key = _vanilla_key(cfg)
    if not isinstance(vanilla, dict) or list(vanilla) != [key]:
        raise ValueError(f"c1: vanilla_proofs must hold {key!r} for {reg}, got "
                         f"{list(vanilla)[:3] if isinstance(vanilla, dict) else vanilla!r}")
    replica_id = _fr(_get(obj, "replica_id", "the C1 output"), "replica_id")
    comm_d = _fr(_get(obj, "comm_d", "the C1 output"), "comm_d")
    comm_r = _fr(_get(obj, "comm_r", "the C1 output"), "comm_r")
    seed = _int(_get(obj, "seed", "the C1 output"), "seed").to_bytes(32, "little")
    ticket = _int(_get(obj, "ticket", "the C1 output"), "ticket").to_bytes(32, "little")
    parts = vanilla[key]
    if not isinstance(parts, list) or not parts:
        raise ValueError("c1: vanilla_proofs holds no partitions")
    partitions = [_partition(cfg, p, replica_id, seed, ticket, comm_d, comm_r, k)
                  for k, p in enumerate(parts)]
    return C1Output(reg, cfg, partitions, comm_r, comm_d, replica_id, seed, ticket)


def loads(text: str) -> C1Output:
    return from_json(json.loads(text))


def read(path: str) -> C1Output:
    with open(path) as f:
        return loads(f.read())
