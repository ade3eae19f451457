"""PoRep C2 partition (circuits.filecoin.porep: StackedCircuit), its synthetic
vanilla proofs (porep_synthetic) and the C1 JSON (c1), against:

* rust-fil-proofs' counts (research/filecoin-circuits.md §2.2, §5):
  storage-proofs-porep tests/stacked_circuit.rs [T] for the mini circuits
  (8-0-0: 1,199,620 rows, 21 + 1 inputs); 2 KiB: 2,687,921 rows, 39 + 1
  inputs, 2,685,673 aux; 8 MiB: 3,844,929 / 40 / 3,842,449; 32 GiB: the
  per-challenge formula, 7,237,665 a challenge (130,278,541 a partition
  [T]), and cuzk's measured non-zeros and densities of its matrices;
* bellperson's public-input order, and the public inputs' values computed on
  the host from the vanilla proof (challenges derived from replica_id and
  seed with hashlib as challenges.rs does, parent indices, replica_id,
  comm_d, and comm_r = Poseidon2(comm_c, comm_r_last) with the independent
  Python Poseidon of tests/test_poseidon.py);
* hashlib for the SDR labels (create_label_exp's 1,248-byte buffer) and the
  SHA tree; the Python-integer checker for every row: the synthetic
  inputs (read back from the C1 JSON the generator's output was written
  as) satisfy the mini circuit, and a corrupted parent column, data leaf,
  tree-R path or label leaves a failing row.

Compile discipline: ONE witness program (mini 8-0-0, a batch of 4; its
compile is most of this file's ~2 min of CPU time).  The 2 KiB recording
takes ~25 s; the 8 MiB recording, the one-challenge 32 GiB recording
(~65 s, 2 GB), the full 32 GiB synthetic partition and a 2 KiB witness
(two partitions, ~2.5 min) run with --runslow.
"""
from __future__ import annotations

import base64
import hashlib
import json

import numpy as np
import pytest

from circuits import cs as C
from circuits.filecoin import c1
from circuits.filecoin import porep as PR
from circuits.filecoin import porep_synthetic as S
from ops.field import Fr
from tests.conftest import R
from tests.test_poseidon import ref_poseidon

MINI = PR.CONFIGS["mini-8-0-0"]


def ref_label(replica_id: int, layer: int, node: int, parents) -> int:
    buf = (replica_id.to_bytes(32, "little") + layer.to_bytes(4, "big") + node.to_bytes(8, "big")
           + bytes(20) + b"".join(p.to_bytes(32, "little") for p in parents))
    return int.from_bytes(hashlib.sha256(buf).digest(), "little") & ((1 << 254) - 1)


def ref_sha2(a: int, b: int) -> int:
    d = hashlib.sha256(a.to_bytes(32, "little") + b.to_bytes(32, "little")).digest()
    return int.from_bytes(d, "little") & ((1 << 254) - 1)


def ref_root(leaf: int, index: int, sibs, arities, hash_fn) -> int:
    """Ascend a path: insert the node among its siblings at its position."""
    for s, a in zip(sibs, arities):
        index, pos = divmod(index, a)
        leaf = hash_fn(list(s[:pos]) + [leaf] + list(s[pos:]))
    return leaf


def check_vanilla(vp: S.VanillaPartition):
    """Every relation the circuit enforces, recomputed with hashlib and the
    reference Poseidon."""
    cfg = vp.cfg
    assert vp.comm_r == ref_poseidon([vp.comm_c, vp.comm_r_last])
    for i, c in enumerate(vp.challenges):
        cols = vp.parent_columns[i]
        for layer in range(1, cfg.layers + 1):
            ps = [col[layer - 1] for col in cols[:6]]
            if layer > 1:
                ps += [col[layer - 2] for col in cols[6:]]
            ps = ps * 6 + ps[:1] if layer == 1 else ps * 2 + ps[:9]
            assert vp.labels[i][layer - 1] == ref_label(vp.replica_id, layer, c, ps)
        assert ref_root(vp.data_leaves[i], c, vp.comm_d_paths[i], (2,) * cfg.depth_d,
                        lambda xs: ref_sha2(*xs)) == vp.comm_d
        replica = (vp.labels[i][-1] + vp.data_leaves[i]) % R
        assert ref_root(replica, c, vp.comm_r_last_paths[i], cfg.arities,
                        ref_poseidon) == vp.comm_r_last
        assert ref_root(ref_poseidon(vp.labels[i]), c, vp.comm_c_paths[i], cfg.arities,
                        ref_poseidon) == vp.comm_c
        for j, p in enumerate(vp.drg_parents[i] + vp.exp_parents[i]):
            assert ref_root(ref_poseidon(cols[j]), p, vp.parent_paths[i][j], cfg.arities,
                            ref_poseidon) == vp.comm_c


# ---------------------------------------------------------------- counts
@pytest.fixture(scope="module")
def mini():
    """The mini 8-0-0 recording and the circuit's record-mode outputs (ids)."""
    cs = C.Recorder()
    out = PR.stacked_circuit(cs, None, MINI)
    return cs.finish("mini-8-0-0"), out


def test_mini_counts_and_input_order(mini):
    r1cs, out = mini
    assert r1cs.num_constraints == 1_199_620 == PR.constraint_count(MINI)       # [T]
    assert r1cs.num_inputs == 21 + 1
    # the returned public inputs are inputs 1..21 in allocation order
    assert (out["public"] - C.INPUT_BASE).tolist() == list(range(1, 22))
    assert out["labels"].shape == (1, 2)


@pytest.mark.parametrize("name, want, inputs", [
    ("mini-8-0-0", 1_199_620, 21), ("mini-2-0-0", 1_206_212, 21),
    ("mini-8-4-0", 1_296_576, 21), ("mini-8-4-2", 1_346_982, 21),
    ("2KiB", 2_687_921, 39), ("8MiB", 3_844_929, 39), ("512MiB", 4_423_433, 39),
    ("32GiB", 130_278_541, 327), ("64GiB", 131_185_849, 327)])
def test_formula_table(name, want, inputs):
    """The configuration table reproduces the research note's counts."""
    cfg = PR.CONFIGS[name]
    assert PR.constraint_count(cfg) == want
    assert PR.num_public_inputs(cfg) == inputs


def test_2kib_record_counts():
    r1cs = C.record(PR.stacked_circuit, PR.CONFIGS["2KiB"])
    assert (r1cs.num_constraints, r1cs.num_inputs, r1cs.num_aux) == (2_687_921, 40, 2_685_673)


@pytest.mark.slow
def test_8mib_record_counts():
    r1cs = C.record(PR.stacked_circuit, PR.CONFIGS["8MiB"])
    assert (r1cs.num_constraints, r1cs.num_inputs, r1cs.num_aux) == (3_844_929, 40, 3_842_449)


@pytest.mark.slow
def test_32gib_one_challenge_counts():
    """One challenge of the 32 GiB partition: 571 + 7,237,665 rows."""
    cfg = PR.CONFIGS["32GiB"].with_challenges(1)
    r1cs = C.record(PR.stacked_circuit, cfg)
    assert r1cs.num_constraints == 571 + 7_237_665
    assert r1cs.num_inputs == 1 + 3 + 18
    assert 571 + 18 * 7_237_665 == 130_278_541                                # [T]
    # cuzk's measured matrix statistics of a 32 GiB partition (research note
    # §1): non-zeros A 309.4M, B 130.3M, C 282.7M (18 challenges; the top
    # level adds < 0.01M); A aux density 99.7%, B 25.4%; ONE the only input in B
    assert [round(18 * m.cols.size / 1e5) for m in (r1cs.a, r1cs.b, r1cs.c)] == [3094, 1303, 2827]
    ni = r1cs.num_inputs
    density = [np.unique(m.cols[m.cols >= ni]).size / r1cs.num_aux for m in (r1cs.a, r1cs.b)]
    assert [round(d * 1000) for d in density] == [997, 254]
    assert np.unique(r1cs.b.cols[r1cs.b.cols < ni]).tolist() == [0]


@pytest.mark.slow
def test_32gib_synthetic_partition_is_consistent():
    """A full 32 GiB partition (18 challenges, 11 layers, 2^30 nodes) from the
    sparse generator: every relation holds on the host."""
    vp = S.generate(PR.CONFIGS["32GiB"], 11)
    assert len(vp.comm_d_paths[0]) == 30 and len(vp.comm_c_paths[0]) == 10
    check_vanilla(vp)


# ---------------------------------------------------------------- synthetic inputs
def test_synthetic_is_consistent_and_deterministic():
    for name in ("mini-8-0-0", "mini-8-4-2", "2KiB"):
        vp = S.generate(PR.CONFIGS[name], 7)
        check_vanilla(vp)
        assert S.generate(PR.CONFIGS[name], 7) == vp
        assert S.generate(PR.CONFIGS[name], 8).replica_id != vp.replica_id
    many = S.generate_sector(PR.CONFIGS["mini-8-0-0"], 1, 40)     # repeated challenges
    assert len({vp.challenges[0] for vp in many}) < 40
    check_vanilla(many[39])


def test_sparse_tree_equals_full_tree():
    """With every leaf known, the sparse tree is the full tree."""
    import random
    rng = random.Random(4)
    leaves = {i: rng.randrange(R) for i in range(32)}
    arities = (8, 4)
    layer = [leaves[i] for i in range(32)]
    for a in arities:
        layer = [ref_poseidon(layer[g * a:(g + 1) * a]) for g in range(len(layer) // a)]
    root, paths = S.sparse_tree(leaves, arities, S.poseidon_native, rng)
    assert root == layer[0]
    for i in (0, 13, 31):
        assert ref_root(leaves[i], i, paths[i], arities, ref_poseidon) == root


# ---------------------------------------------------------------- C1 JSON
def test_c1_round_trip_and_layout(tmp_path):
    for name in ("mini-8-4-2", "2KiB"):
        cfg = PR.CONFIGS[name]
        parts = S.generate_sector(cfg, 20, 3)
        if name == "mini-8-4-2":
            check_vanilla(parts[2])                      # the trees are the sector's
        path = tmp_path / f"{name}.json"
        c1.write(str(path), parts)
        got = c1.read(str(path))
        assert got.partitions == parts and got.cfg == cfg
        if name == "2KiB":
            obj = json.loads(path.read_text())
            for reg in ("StackedDrg2KiBV1", "StackedDrg2KiBV1_2_Feat_SyntheticPoRep"):
                assert c1.from_json({**obj, "registered_proof": reg}).partitions == parts
        assert (got.comm_r, got.comm_d, got.replica_id, got.seed, got.ticket) == (
            parts[0].comm_r, parts[0].comm_d, parts[0].replica_id, parts[0].seed, parts[0].ticket)
    obj = json.loads(path.read_text())
    assert obj["registered_proof"] == "StackedDrg2KiBV1_1"
    proof = obj["vanilla_proofs"]["StackedDrg2KiBV1"][1][0]
    vp = parts[1]
    c = vp.challenges[0]
    assert bytes(obj["comm_d"]) == vp.comm_d.to_bytes(32, "little")
    assert bytes(obj["seed"]) == vp.seed
    assert proof["labeling_proofs"][1]["node"] == c
    assert len(proof["labeling_proofs"][1]["parents"]) == 37
    assert proof["encoding_proof"]["layer_index"] == 2
    single = proof["comm_d_proofs"]["data"]["Single"]
    assert [e["index"] for e in single["path"]["path"]] == [(c >> i) & 1 for i in range(6)]
    col = proof["replica_column_proofs"]["drg_parents"][3]["column"]
    assert col["index"] == vp.drg_parents[0][3] and col["_h"] is None


def test_c1_bad_inputs():
    cfg = PR.CONFIGS["mini-8-0-0"]
    vp = S.generate(cfg, 3)
    obj = c1.to_json([vp])
    wrapped = {"Phase1Out": base64.b64encode(json.dumps(obj).encode()).decode(), "SectorNum": 1}
    assert c1.from_json(wrapped).partitions == [vp]
    with pytest.raises(ValueError, match="Phase1Out is not base64"):
        c1.from_json({"Phase1Out": "%%%"})
    with pytest.raises(ValueError, match="unknown registered_proof"):
        c1.from_json({**obj, "registered_proof": "StackedDrg1KiBV1"})
    bad = json.loads(json.dumps(obj))
    bad["vanilla_proofs"]["jaxprove:mini-8-0-0"][0][0]["comm_d_proofs"]["data"]["Single"][
        "path"]["path"][0]["index"] ^= 1
    with pytest.raises(ValueError, match="paths prove nodes"):
        c1.from_json(bad)
    bad = json.loads(json.dumps(obj))
    bad["comm_d"] = [0] * 31
    with pytest.raises(ValueError, match="comm_d must be 32 byte"):
        c1.from_json(bad)
    bad = json.loads(json.dumps(obj))
    bad["vanilla_proofs"]["jaxprove:mini-8-0-0"][0][0]["replica_column_proofs"][
        "exp_parents"].pop()
    with pytest.raises(ValueError, match="8 exp_parents"):
        c1.from_json(bad)


# ---------------------------------------------------------------- satisfiability
def _corrupt(vp: S.VanillaPartition, what: str) -> S.VanillaPartition:
    if what == "column":
        cols = [[list(col) for col in row] for row in vp.parent_columns]
        cols[0][7][1] += 1                                   # an expander parent's label
        return vp._replace(parent_columns=cols)
    if what == "leaf":
        return vp._replace(data_leaves=[(vp.data_leaves[0] + 1) % R])
    paths = [[list(s) for s in p] for p in vp.comm_r_last_paths]
    paths[0][0][2] += 1
    return vp._replace(comm_r_last_paths=paths)


@pytest.fixture(scope="module")
def mini_witness(mini, tmp_path_factory):
    """Witnesses of: the generator's partition read back from its C1 JSON,
    and three corrupted copies (a parent column, the data leaf, a tree-R
    sibling)."""
    vp = S.generate(MINI, 12)
    path = tmp_path_factory.mktemp("c1") / "c1.json"
    c1.write(str(path), [vp])
    back = c1.read(str(path)).partitions[0]
    batch = [back] + [_corrupt(back, w) for w in ("column", "leaf", "path")]
    inputs = S.stack_inputs([S.to_inputs(x) for x in batch], MINI)
    w, out = C.witness_with_outputs(PR.stacked_circuit, inputs, MINI,
                                    in_axes=PR.stacked_in_axes(MINI))
    return vp, np.asarray(w), out


def test_synthetic_satisfies_mini(mini, mini_witness):
    r1cs, _ = mini
    vp, w, out = mini_witness
    assert w.shape == (8, 4, r1cs.num_vars)
    assert C.is_satisfied(r1cs, w[:, 0]) == (True, None)
    labels = Fr.to_int(np.asarray(out["labels"])[0])                    # (C, L)
    assert [[int(x) for x in row] for row in labels] == vp.labels


def ref_challenge(nodes: int, replica_id: int, seed: bytes, j: int) -> int:
    """challenges.rs derive_porep: SHA-256(replica_id ‖ seed ‖ j u32 LE) mod (N − 1) + 1."""
    h = hashlib.sha256(replica_id.to_bytes(32, "little") + seed + j.to_bytes(4, "little"))
    return int.from_bytes(h.digest(), "little") % (nodes - 1) + 1


def test_challenges_are_derived():
    cfg = PR.CONFIGS["2KiB"]
    parts = S.generate_sector(cfg, 5, 2)
    for vp in parts:
        assert vp.challenges == [ref_challenge(64, vp.replica_id, vp.seed, 2 * vp.k + i)
                                 for i in range(2)]


def test_public_inputs_match_host(mini_witness):
    vp, w, out = mini_witness
    got = [int(x) for x in Fr.to_int(w[:, 0, 1:22])]
    c = ref_challenge(MINI.nodes, vp.replica_id, vp.seed, 0)
    want = [vp.replica_id, vp.comm_d, ref_poseidon([vp.comm_c, vp.comm_r_last]), c,
            *vp.drg_parents[0], *vp.exp_parents[0], c, c, c]
    assert got == want == vp.public_inputs()
    assert [int(x) for x in Fr.to_int(np.asarray(out["public"])[0])] == want


@pytest.mark.parametrize("instance", [1, 2, 3])
def test_corrupted_inputs_fail(mini, mini_witness, instance):
    r1cs, _ = mini
    ok, row = C.is_satisfied(r1cs, mini_witness[1][:, instance])
    assert not ok and row is not None


def test_corrupted_label_fails(mini, mini_witness):
    """The layer-2 label variable (the encoding key) changed in the witness."""
    r1cs, out = mini
    w = mini_witness[1][:, 0].copy()
    col = int(out["labels"][0, 1]) + r1cs.num_inputs
    assert int(Fr.to_int(w[:, col])) == mini_witness[0].labels[0][1]
    w[:, col] = np.asarray(Fr.from_int(mini_witness[0].labels[0][1] + 1))
    ok, row = C.is_satisfied(r1cs, w)
    assert not ok


@pytest.mark.slow
def test_2kib_partitions_satisfy():
    """Two partitions of a synthetic 2 KiB sector (2 challenges each): every
    row holds and the 39 public inputs are the host's, challenge-major."""
    cfg = PR.CONFIGS["2KiB"]
    cs = C.Recorder()
    PR.stacked_circuit(cs, None, cfg)
    r1cs = cs.finish("2KiB")
    parts = S.generate_sector(cfg, 31, 2)
    inputs = S.stack_inputs([S.to_inputs(vp) for vp in parts], cfg)
    w = np.asarray(C.witness(PR.stacked_circuit, inputs, cfg, in_axes=PR.stacked_in_axes(cfg)))
    for b, vp in enumerate(parts):
        assert C.is_satisfied(r1cs, w[:, b]) == (True, None)
        want = [vp.replica_id, vp.comm_d, ref_poseidon([vp.comm_c, vp.comm_r_last])]
        for i in range(2):
            c = ref_challenge(64, vp.replica_id, vp.seed, 2 * vp.k + i)
            want += [c, *vp.drg_parents[i], *vp.exp_parents[i], c, c, c]
        assert [int(x) for x in Fr.to_int(w[:, b, 1:40])] == want


def test_bad_config():
    with pytest.raises(ValueError, match="layers"):
        C.record(PR.stacked_circuit, MINI._replace(layers=3))
    with pytest.raises(ValueError, match="public_inputs: 2 challenges"):
        PR.public_inputs(MINI, 1, 2, 3, [1, 2], [[0] * 6] * 2, [[0] * 8] * 2)
