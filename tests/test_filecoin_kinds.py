"""The Filecoin proof kinds in the engine (jaxprove.filecoin_kinds).

* the registry: every kind at every size, priorities WinningPoSt >
  WindowPoSt > PoRep = SnapDeals (also as the engine's scheduler ranks
  them), distinct topologies naming the size;
* the JSON input forms: bad inputs rejected with messages naming the field;
  the synthetic generators' JSON parses back to exactly the generators'
  circuit inputs (SnapDeals, PoRep via the C1 JSON);
* the engine path for the 2 KiB WindowPoSt (the cheapest registered
  circuit, 21,866 rows): synthetic JSON → split → batched witness → the
  reference checker ``circuits.cs.is_satisfied`` (Python integers) inside a
  stand-in prover (a real Groth16 proof of 2^15 rows is minutes on this CPU;
  ``test_engine`` proves the cubic circuit for real); public inputs against
  an independent computation (hashlib challenges, Python-integer Poseidon);
  a corrupted job fails without harming the others in its batch.

CPU: one synthetic WindowPoSt partition, one witness program (batch 2), one
synthetic SnapDeals sector (2 KiB: its sparse trees' Poseidon compiles); the
2 KiB WinningPoSt / SnapDeals / PoRep witnesses are slow-marked.
"""
from __future__ import annotations

import copy
import hashlib
import json
import random

import jax
import numpy as np
import pytest

from circuits import cs as C
from circuits.filecoin import c1
from circuits.filecoin import porep as PR
from circuits.filecoin import porep_synthetic as PS
from circuits.filecoin import sizes as Z
from jaxprove import engine as E
from jaxprove import filecoin_kinds as FK
from jaxprove.engine import Priority
from tests.conftest import R
from tests.test_poseidon import ref_poseidon

KIB2 = 2048


# ---------------------------------------------------------------- registry
def test_registry_priorities_and_topologies():
    reg = FK.filecoin_registry()
    specs = list(reg)
    fc = [s for s in specs if s.kind in FK.PRIORITIES]
    assert len(fc) == 4 * len(Z.SIZES)
    assert {s.kind for s in specs} >= {"cubic", "sha256-preimage"}        # the examples stay
    for name, p in Z.SIZES.items():
        get = lambda k: reg.get(k, p.sector_bytes)                        # noqa: E731
        assert p.sector_bytes == p.nodes * 32
        assert get("winning-post").priority > get("window-post").priority > \
            get("porep").priority == get("snap").priority
        for k in FK.PRIORITIES:
            assert f"-{name}-" in get(k).topology and get(k).topology.startswith(k)
        assert get("winning-post").partitions == 1 and get("window-post").partitions is None
    assert get("window-post").topology.endswith(f"-s{p.window_sectors}-c10")
    assert len({s.topology for s in specs}) == len(specs)
    # the scheduler ranks the kinds' default priorities as the issue asks
    sched = E.Scheduler()
    for seq, kind in enumerate(["porep", "snap", "window-post", "winning-post"]):
        spec = reg.get(kind, KIB2)
        sched.add(E.WorkItem(spec.priority, seq, 0, f"j{seq}", f"{kind}/{KIB2}", 0.0))
    order = [sched.next_batch(0.0)[0][0].group.split("/")[0] for _ in range(4)]
    assert order == ["winning-post", "window-post", "porep", "snap"]
    assert FK.PRIORITIES["winning-post"] == Priority.CRITICAL
    assert {s.kind for s in FK.named_registry("builtin")} == {"cubic", "sha256-preimage"}
    with pytest.raises(ValueError, match="unknown registry 'x'"):
        FK.named_registry("x")
    with pytest.raises(ValueError, match="unknown sector size '4KiB'"):
        FK.filecoin_specs(("4KiB",))
    with pytest.raises(ValueError, match="repeat"):
        FK.filecoin_specs(("2KiB", "2KiB"))


# ---------------------------------------------------------------- PoSt
def ref_challenge(randomness: bytes, sector_id: int, n: int, nodes: int) -> int:
    """vanilla.rs generate_leaf_challenge with hashlib."""
    d = hashlib.sha256(randomness + sector_id.to_bytes(8, "little") + n.to_bytes(8, "little"))
    return int.from_bytes(d.digest()[:8], "little") % nodes


def ref_public(inputs: dict, sectors: int, challenges: int, nodes: int, k: int = 0) -> list:
    """A PoSt partition's public inputs from its JSON: per sector comm_r
    (checked = Poseidon2(comm_c, comm_r_last)) and its challenged leaves;
    the last sector repeated to ``sectors``."""
    rand = bytes.fromhex(inputs["randomness"])
    blocks = []
    for i, s in enumerate(inputs["partitions"][k]["sectors"]):
        assert int(s["comm_r"]) == ref_poseidon([int(s["comm_c"]), int(s["comm_r_last"])])
        blocks.append([int(s["comm_r"])] + [ref_challenge(rand, s["id"], (k * sectors + i)
                                                          * challenges + j, nodes)
                                            for j in range(challenges)])
    blocks += [blocks[-1]] * (sectors - len(blocks))
    return [x for b in blocks for x in b]


@pytest.fixture(scope="module")
def window():
    """The 2 KiB WindowPoSt spec and one synthetic job (JSON, round-tripped)."""
    spec = FK.filecoin_registry(("2KiB",)).get("window-post", KIB2)
    return spec, json.loads(json.dumps(spec.synthetic(random.Random(7))))


def _bad(inputs, edit):
    out = copy.deepcopy(inputs)
    edit(out)
    return out


def test_post_split_rejects_bad_inputs(window):
    spec, good = window
    p = Z.params("2KiB")
    parts = spec.split(good)
    assert len(parts) == 1 and parts[0].index.shape == (2, 10)
    assert parts[0].public == ref_public(good, 2, 10, p.nodes)
    # partition 1 of a proof: its challenges come from its index
    two = _bad(good, lambda d: d["partitions"].append(d["partitions"][0]))
    assert [q.public for q in spec.split(two)] == [ref_public(two, 2, 10, p.nodes, k)
                                                   for k in (0, 1)]
    assert spec.split(two)[1].public != parts[0].public
    sec = lambda d: d["partitions"][0]["sectors"][0]                       # noqa: E731
    cases = [
        ([1, 2], "expected an object"),
        (_bad(good, lambda d: d.pop("randomness")), "missing field 'randomness'"),
        (_bad(good, lambda d: d.update(randomness="zz")), "hex string of 32 bytes"),
        (_bad(good, lambda d: d.update(randomness="ff" * 32)), "randomness is not a field"),
        (_bad(good, lambda d: d.update(partitions=[])), "non-empty list"),
        (_bad(good, lambda d: d["partitions"][0]["sectors"].append(sec(d))), "1 to 2 sectors"),
        (_bad(good, lambda d: sec(d)["leaves"].pop()), r"sector 0 leaves: expected a list of 10"),
        (_bad(good, lambda d: sec(d)["paths"][3][1].__setitem__(0, str(R))),
         r"sector 0 paths\[3\]\[1\]\[0\]: .* is not a field element"),
        (_bad(good, lambda d: sec(d)["paths"][2].pop()), r"paths\[2\]: expected 2 levels"),
        (_bad(good, lambda d: sec(d).update(id=-1)), "sector 0 id: expected an integer"),
        (_bad(good, lambda d: sec(d).update(comm_c="abc")), "comm_c: 'abc' is not an integer"),
        (_bad(good, lambda d: sec(d).pop("comm_r_last")), "missing field 'comm_r_last'"),
        (_bad(good, lambda d: d["partitions"][0].update(index=-2)), "index: expected an integer"),
    ]
    for bad, msg in cases:
        with pytest.raises(ValueError, match=msg):
            spec.split(bad)
    # WinningPoSt: one partition of 66 entries of one sector, one challenge each
    win = FK.filecoin_registry(("2KiB",)).get("winning-post", KIB2)
    one = {k: v for k, v in sec(good).items()}
    one.update(leaves=one["leaves"][:1], paths=one["paths"][:1])
    ok = {"randomness": good["randomness"], "partitions": [{"sectors": [one] * 66}]}
    assert win.split(ok)[0].public == ref_public(ok, 66, 1, p.nodes)
    mixed = _bad(ok, lambda d: d["partitions"][0]["sectors"].__setitem__(5, dict(one, id=1)))
    with pytest.raises(ValueError, match="share one id"):
        win.split(mixed)
    with pytest.raises(ValueError, match="2 partitions, expected 1"):
        win.split(_bad(ok, lambda d: d["partitions"].append(d["partitions"][0])))


class CheckingProver:
    """A stand-in prover around the reference checker: check is
    ``circuits.cs.is_satisfied`` per instance; the "proof" of an instance is
    SHA-256 of its public inputs (read from the witness) to 192 bytes."""

    def load(self, spec, device):
        return E.Resident(None, None, spec.record(), 0)

    def check(self, res, w):
        w = np.asarray(w)
        out = []
        for i in range(w.shape[1]):
            ok, row = C.is_satisfied(res.matrices, w[:, i])
            out.append(None if ok else f"the witness does not satisfy the circuit (row {row})")
        return out

    @staticmethod
    def _proof(pub):
        return (hashlib.sha256(repr(pub).encode()).digest() * 6)[:192]

    def prove(self, res, w, use, msm_budget_bytes, on_stage=None):
        from ops.field import Fr
        pub = Fr.to_int(np.asarray(w)[:, :, 1:res.matrices.num_inputs])
        public = [[int(v) for v in row] for row in pub]
        return [self._proof(p) for p in public], public, {"total": 0.0}

    def verify(self, res, public, proof):
        return [p == self._proof(x) for p, x in zip(proof, public)]

    def encode(self, proof):
        return list(proof)


def test_window_post_through_the_engine(window):
    """Four WindowPoSt jobs in two batches of two (one witness program):
    the synthetic job and the same sector alone (padded to 2) satisfy the
    circuit with the independent public inputs; a changed leaf and a changed
    comm_r fail their jobs only; unparsable inputs fail at submission."""
    spec, good = window
    nodes = Z.params("2KiB").nodes
    padded = _bad(good, lambda d: d["partitions"][0]["sectors"].pop())
    leaf = _bad(good, lambda d: d["partitions"][0]["sectors"][1]["leaves"].__setitem__(
        4, str((int(d["partitions"][0]["sectors"][1]["leaves"][4]) + 1) % R)))
    comm_r = _bad(good, lambda d: d["partitions"][0]["sectors"][0].update(
        comm_r=str((int(d["partitions"][0]["sectors"][0]["comm_r"]) + 1) % R)))
    eng = E.Engine(E.Registry([spec]), E.EngineConfig(max_batch_size=2), CheckingProver(),
                   devices=jax.devices()[:1])
    jobs = {name: eng.submit("window-post", KIB2, inp)
            for name, inp in (("good", good), ("leaf", leaf), ("padded", padded),
                              ("comm_r", comm_r))}
    jobs["garbled"] = eng.submit("window-post", KIB2, {"partitions": []})
    assert eng.status()["queues"]["by_priority"]["HIGH"] == 4
    eng.start()
    res = {k: eng.wait(j, timeout=600) for k, j in jobs.items()}
    eng.shutdown()
    assert res["good"].status == "done", res["good"].error
    assert res["good"].public == [ref_public(good, 2, 10, nodes)]
    assert res["padded"].status == "done", res["padded"].error
    assert res["padded"].public == [ref_public(padded, 2, 10, nodes)]
    assert res["padded"].public[0][11:] == res["padded"].public[0][:11]   # last sector repeated
    for k in ("leaf", "comm_r"):
        assert res[k].status == "failed" and "partition 0: the witness does not satisfy" \
            in res[k].error, k
    assert res["garbled"].status == "failed" and "missing field 'randomness'" in \
        res["garbled"].error
    assert res["good"].timings["batch_sizes"] == [2]


# ---------------------------------------------------------------- PoRep
def test_porep_split_c1_json():
    """2 KiB PoRep: the synthetic job is the C1 JSON of a generated sector
    and parses back to its partitions; wrong sizes, counts and fields are
    refused."""
    spec = FK.filecoin_registry(("2KiB", "8MiB")).get("porep", KIB2)
    cfg = PR.CONFIGS["2KiB"]
    seed = random.Random(3).randrange(1 << 63)
    vps = PS.generate_sector(cfg, seed, 1)
    job = json.loads(json.dumps(spec.synthetic(random.Random(3))))
    assert job == json.loads(c1.dumps(vps))
    assert spec.split(job) == vps and spec.split(vps) == vps
    assert vps[0].public_inputs()[:3] == [vps[0].replica_id, vps[0].comm_d, vps[0].comm_r]
    big = FK.filecoin_registry(("8MiB",)).get("porep", 8 << 20)
    with pytest.raises(ValueError, match=r"porep 8MiB: the C1 output is for \['2KiB'\]"):
        big.split(job)
    mini = c1.to_json(PS.generate_sector(PR.CONFIGS["mini-8-0-0"], 1, 1))
    with pytest.raises(ValueError, match=r"for \['mini-8-0-0'\], not 2KiB"):
        spec.split(mini)
    with pytest.raises(ValueError, match=r"2 partitions, expected 1 \(interactive\) or 13"):
        spec.split(c1.to_json(PS.generate_sector(cfg, 5, 2)))
    with pytest.raises(ValueError, match="comm_d must be 32 byte values"):
        spec.split(_bad(job, lambda d: d.update(comm_d="x")))
    with pytest.raises(ValueError, match="must be a C1 output"):
        spec.split("c1.json")


# ---------------------------------------------------------------- SnapDeals
def test_snap_json_round_trip_and_bad_inputs():
    """2 KiB SnapDeals: the synthetic job's JSON parses to exactly the
    generator's circuit inputs and public inputs (k_and_h_select recomputed
    by hand); bad fields are named."""
    from circuits.filecoin import snap as SN
    spec = FK.filecoin_registry(("2KiB",)).get("snap", KIB2)
    shape = SN.size_shape("2KiB")
    seed = random.Random(4).randrange(1 << 63)
    case = SN.synthetic_snap(shape, seed, 0)
    job = json.loads(json.dumps(spec.synthetic(random.Random(4))))
    assert job == json.loads(json.dumps(FK.snap_json([case])))
    parts = spec.split(job)
    assert len(parts) == spec.partitions == 1
    khs = 0 | 1 << (shape.pbl + shape.hs.index(shape.h))
    assert parts[0].public == case.public == [khs, int(job["comm_r_old"]),
                                              int(job["comm_d_new"]), int(job["comm_r_new"])]
    got = FK.snap_inputs(parts, shape)
    same = jax.tree_util.tree_map(lambda a, b: bool((np.asarray(a)[:, 0] == np.asarray(b)).all()),
                                  got, case.inputs)
    assert all(jax.tree_util.tree_leaves(same))
    part = lambda d: d["partitions"][0]                                     # noqa: E731
    cases = [
        (_bad(job, lambda d: d.pop("comm_c")), "snap 2KiB: missing field 'comm_c'"),
        (_bad(job, lambda d: d.update(h=5)), r"h = 5 is not one of the allowed \(1, 1"),
        (_bad(job, lambda d: d["partitions"].append(part(d))), "2 partitions, expected 1"),
        (_bad(job, lambda d: part(d).update(k=1)),
         r"partition 0 k: expected an integer in \[0, 1\)"),
        (_bad(job, lambda d: part(d)["leaf_r_old"].pop()), "leaf_r_old: expected a list of 10"),
        (_bad(job, lambda d: part(d)["path_d"][0].pop()), r"path_d\[0\]: expected 3 levels"),
        (_bad(job, lambda d: part(d)["apex_leaves"].__setitem__(2, -1)),
         r"apex_leaves\[2\]: -0x1 is not a field element"),
    ]
    for bad, msg in cases:
        with pytest.raises(ValueError, match=msg):
            spec.split(bad)


# ---------------------------------------------------------------- hooks
def test_daemon_and_prove_batch_pick_the_filecoin_registry(tmp_path):
    """``registry = "filecoin"`` in the daemon's configuration and
    ``--registry filecoin`` in prove_batch resolve the Filecoin kinds."""
    import os
    import subprocess
    import sys

    from jaxprove import daemon as D
    cfg = D.load_config(None, state_dir=str(tmp_path / "state"), registry="filecoin")
    svc = D.Service(cfg, prover=CheckingProver(), devices=jax.devices()[:1])
    assert svc.registry.get("winning-post", 32 << 30).priority == Priority.CRITICAL
    with pytest.raises(D.RequestError, match="unknown proof kind 'porep'"):
        D.Service(D.load_config(None, state_dir=str(tmp_path / "s2")),
                  prover=CheckingProver(), devices=jax.devices()[:1]).SubmitProof(
            {"kind": "porep", "sector_size": KIB2, "inputs": {}})
    with pytest.raises(ValueError, match="unknown registry"):
        D.Service(D.load_config(None, state_dir=str(tmp_path / "s3"), registry="x"),
                  prover=CheckingProver(), devices=jax.devices()[:1])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    empty = tmp_path / "in"
    empty.mkdir()
    run = subprocess.run([sys.executable, os.path.join(root, "scripts", "prove_batch.py"),
                          "--registry", "filecoin", "--kind", "window-post", "--sector_size",
                          str(KIB2), "--inputs_dir", str(empty), "--nocache"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "no .json input files" in run.stderr, run.stderr[-2000:]


# ---------------------------------------------------------------- slow: the other witnesses
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["winning-post", "snap", "porep"])
def test_2kib_witness_satisfies(kind):
    """The engine's witness builder on a synthetic 2 KiB job satisfies the
    recorded circuit (reference checker); public inputs match the parsed
    ones."""
    from ops.field import Fr
    spec = FK.filecoin_registry(("2KiB",)).get(kind, KIB2)
    parts = spec.split(json.loads(json.dumps(spec.synthetic(random.Random(11)))))
    w = np.asarray(spec.witness(parts[:1]))
    r1cs = spec.record()
    assert C.is_satisfied(r1cs, w[:, 0]) == (True, None)
    pub = [int(x) for x in Fr.to_int(w[:, 0, 1:r1cs.num_inputs])]
    want = parts[0].public if kind != "porep" else parts[0].public_inputs()
    assert pub == want
