"""SDR labeling gadget (circuits.gadgets.sdr) against:

* rust-fil-proofs' create_label test [T]: 532,025 rows with the replica id
  and the 37 parents as 9,728 allocated bits, layer 3 and node 22 constant;
* the production shape (replica id and parents from field elements, node
  allocated, layer constant): 522,269 rows for the label itself, the same on
  every layer [D, research/filecoin-circuits.md §2.1];
* a hashlib reference of ``create_label_exp`` (SHA-256 over the 1,248-byte
  buffer, top two bits of the last byte cleared) for the witness's label,
  and the Python-integer checker for every row (a wrong label is rejected).

Compile discipline: one witness circuit (a batch of 2 labels, layer 2);
the production recording (~12 s on the CPU: 20 compressions) is shared by
a module fixture; the create_label test recording is another ~12 s and
runs with --runslow."""
from __future__ import annotations

import random

import jax.numpy as jnp
import numpy as np
import pytest

from circuits import cs as C
from circuits.gadgets import boolean as Bo
from circuits.gadgets import sdr
from circuits.gadgets.num import Num
from ops.field import Fr
from tests.conftest import R

LAYER = 2
B = 2


@pytest.mark.slow
def test_create_label_test_count():
    """create_label.rs test_create_label: bytes_into_boolean_vec_be inputs."""
    def circuit(cs, _):
        rid = Bo.alloc_bits(cs, (256,))
        parents = Bo.alloc_bits(cs, (sdr.TOTAL_PARENTS, 256))
        sdr.create_label(cs, rid, 3, 22, parents)
    assert C.record(circuit).num_constraints == 532_025


def label_circuit(cs, inputs, layer):
    """The labeling step of StackedCircuit for one layer: replica id and the
    37 expanded parents as field elements, the challenged node as UInt64."""
    w = not cs.recording
    rid = Num.alloc(cs, (), (lambda: inputs["replica_id"]) if w else None)
    parents = Num.alloc(cs, (sdr.TOTAL_PARENTS,), (lambda: inputs["parents"]) if w else None)
    rid_bits = sdr.fr_bytes_bits(cs, rid)
    parent_bits = sdr.fr_bytes_bits(cs, parents)
    node = sdr.uint64_alloc(cs, (), (lambda: inputs["node"]) if w else None)
    before = None if w else cs.num_constraints
    label = sdr.create_label(cs, rid_bits, layer, node, parent_bits)
    if not w:
        cs.label_rows = cs.num_constraints - before
    return label.value


@pytest.fixture(scope="module")
def production():
    cs = C.Recorder()
    label_circuit(cs, None, LAYER)
    return cs.label_rows, cs.finish("label")


def test_production_count(production):
    rows, r1cs = production
    assert rows == 522_269
    assert r1cs.num_constraints == 522_269 + 38 * 256 + 64


def test_label_matches_hashlib_and_satisfies(production):
    _, r1cs = production
    rnd = random.Random(7)
    rid = [rnd.randrange(R) for _ in range(B)]
    base = [[rnd.randrange(R) for _ in range(sdr.BASE_DEGREE + sdr.EXP_DEGREE)] for _ in range(B)]
    parents = [sdr.expand_parents(p, LAYER) for p in base]
    nodes = [rnd.randrange(1 << 32), (1 << 64) - 5]
    to_fr = lambda xs: jnp.asarray(Fr.from_int(np.asarray(xs, dtype=object)))
    halves = [[n & 0xFFFFFFFF, n >> 32] for n in nodes]
    inputs = {"replica_id": to_fr(rid), "parents": to_fr(parents),
              "node": jnp.asarray(np.asarray(halves, np.uint32))}
    w, out = C.witness_with_outputs(label_circuit, inputs, LAYER,
                                    in_axes={"replica_id": 1, "parents": 1, "node": 0})
    got = Fr.to_int(np.asarray(out).transpose(1, 0))
    b32 = lambda x: int(x).to_bytes(32, "little")
    for i in range(B):
        want = sdr.label_native(b32(rid[i]), LAYER, nodes[i], [b32(p) for p in parents[i]])
        assert int(got[i]) == want < 1 << 254
    w = np.asarray(w)
    ok, row = C.is_satisfied(r1cs, w[:, 1])
    assert ok and row is None
    bad = w[:, 0].copy()
    label_col = r1cs.num_vars - 1
    assert int(Fr.to_int(bad[:, label_col])) == int(got[0])
    bad[:, label_col] = np.asarray(Fr.from_int(int(got[0]) + 1))
    ok, row = C.is_satisfied(r1cs, bad)
    assert not ok and row == r1cs.num_constraints - 1


def test_native_label_spec():
    """The buffer layout and truncation, independently of label_native."""
    import hashlib
    rid = bytes(range(32))
    parents = [bytes([i]) * 32 for i in range(37)]
    buf = rid + (5).to_bytes(4, "big") + (9).to_bytes(8, "big") + bytes(20) + b"".join(parents)
    assert len(buf) == 1248
    d = hashlib.sha256(buf).digest()
    assert sdr.label_native(rid, 5, 9, parents) == int.from_bytes(d, "little") % (1 << 254)


def test_expand_parents_and_bad_inputs():
    assert sdr.expand_parents(list(range(6)), 1) == list(range(6)) * 6 + [0]
    assert sdr.expand_parents(list(range(14)), 3) == list(range(14)) * 2 + list(range(9))
    with pytest.raises(ValueError, match="needs 14 parents"):
        sdr.expand_parents(list(range(6)), 2)
    cs = C.Recorder()
    with pytest.raises(ValueError, match="parents"):
        sdr.create_label(cs, Bo.alloc_bits(cs, (256,)), 1, 0, Bo.alloc_bits(cs, (36, 256)))
    with pytest.raises(ValueError, match="replica id"):
        sdr.create_label(cs, Bo.alloc_bits(cs, (257,)), 1, 0, Bo.alloc_bits(cs, (37, 256)))
    with pytest.raises(ValueError, match="u64"):
        sdr.uint64_constant(cs, 1 << 64)
