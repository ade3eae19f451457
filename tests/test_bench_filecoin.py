"""bench/filecoin.py: the Filecoin proof benchmark's per-case function.

Default (CPU, 40 CPU-seconds; 4.5 min wall at load 8): record-only cases through the command line and
``run_case`` — counts against research/filecoin-circuits.md's published
constraint / input counts (2KiB WindowPoSt 21,866 / 22, WinningPoSt 90,750 /
132, PoRep 2,687,921 / 39, from which one PoRep challenge costs (2,687,921 −
571)/2 + 571 rows), ``--challenges`` scaling (the topology says so, the
recorded rows match the formulas), the ``.circuit`` JSON record, and the
memory plan refusing a case that cannot fit before recording anything.

Slow (``--runslow``; 8 CPU-minutes on the 2-core dev box, 26 min wall at
load 8: almost all XLA compiles of setup, the MSMs and the pairing): the whole proving path of the 2KiB
WindowPoSt scaled to one challenge per sector (2,755 rows) — setup, synthetic
job, witness, resident proof, the timing record, the saved snarkjs JSON
checked by our verifier reading it back and by ``snarkjs groth16 verify``
(when installed under ~/.cache/jaxprove/npm), both refusing it once a public
input is changed, the public challenge indices against hashlib, and the
planned key bytes against the real key; and the same kind in the 16 GB mode
(``--out-of-core-gib``: 5.6 CPU-minutes).
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from bench import filecoin as F
from jaxprove import formats as FM
from jaxprove import groth16 as G
from jaxprove import modes as MD
from jaxprove import pce

# research/filecoin-circuits.md §1: constraints / public inputs (ONE excluded)
PUBLISHED_2KIB = {"window-post": (21_866, 22), "winning-post": (90_750, 132),
                  "porep": (2_687_921, 39)}
POREP_TOP = 571                   # the PoRep partition's rows outside the challenges
SNARKJS = Path.home() / ".cache/jaxprove/npm/node_modules/.bin/snarkjs"


def _records(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_cli_record_only_counts_match_the_research_note(tmp_path):
    out = tmp_path / "r.jsonl"
    F.main(["--kinds", "window-post,winning-post", "--sizes", "2KiB", "--record-only",
            "--out", str(out)])
    recs = {r["kind"]: r for r in _records(out)}
    assert set(recs) == {"window-post", "winning-post"}
    for kind, r in recs.items():
        constraints, inputs = PUBLISHED_2KIB[kind]
        assert r["case"] == f"filecoin.{kind}.circuit" and r["size"] == "2KiB"
        assert (r["constraints"], r["num_inputs"]) == (constraints, inputs + 1)
        assert r["rows"] == r["est_rows"] == constraints + inputs + 1
        assert r["rows_match_estimate"] is True
        assert r["num_vars"] == r["num_inputs"] + r["num_aux"] and 0 < r["bit_vars"] < r["num_vars"]
        assert 2 ** (r["domain_log"] - 1) < r["rows"] <= 2 ** r["domain_log"]
        assert len(r["nnz"]) == 3 and min(r["nnz"]) >= r["rows"] - inputs - 1
        assert r["matrices_bytes"] > 0 and r["record_s"] > 0 and r["extract_s"] > 0
        assert "setup_s" not in r and "skipped" not in r
        assert r["plan_key_bytes"] > 96 * 2 ** (r["domain_log"] - 1)    # H alone
    assert recs["window-post"]["domain_log"] == 15 and recs["winning-post"]["domain_log"] == 17


def test_circuit_dir_stores_the_circuit_once(tmp_path):
    """--circuit-dir: the first run records, extracts and stores; the next
    loads the same circuit and matrices instead of recording them."""
    out, d = tmp_path / "r.jsonl", str(tmp_path / "circuits")
    args = ["--kinds", "window-post", "--sizes", "2KiB", "--challenges", "1", "--record-only",
            "--circuit-dir", d, "--out", str(out)]
    F.main(args)
    F.main(args)
    first, second = _records(out)
    assert first["record_s"] > 0 and first["extract_s"] > 0 and "r1cs_load_s" not in first
    assert second["r1cs_load_s"] > 0 and second["pce_load_s"] > 0
    assert "record_s" not in second and "extract_s" not in second
    same = ("rows", "constraints", "num_inputs", "num_aux", "bit_vars", "nnz", "matrices_bytes")
    assert {k: first[k] for k in same} == {k: second[k] for k in same}
    key = pce.cache_key(F.spec_for("window-post", "2KiB", 1).topology)
    assert sorted(os.listdir(d)) == sorted([key, key + ".r1cs"])


@pytest.mark.parametrize("kind", ["window-post", pytest.param("porep", marks=pytest.mark.slow), "snap"])
def test_challenges_scale_the_circuit(kind):
    rec = F.run_case(kind, "2KiB", record_only=True, challenges=1).record
    assert rec["topology"].endswith("-c1") or "-c1-" in rec["topology"]
    assert rec["rows_match_estimate"] is True
    full = F.counts(kind, "2KiB")[0]
    assert rec["constraints"] < full
    if kind == "window-post":            # S·(313 + K·P): 2 sectors, K 10 -> 1
        p = (PUBLISHED_2KIB[kind][0] // 2 - 313) // 10
        assert rec["constraints"] == 2 * (313 + p) and rec["num_inputs"] == 2 * 2 + 1
    if kind == "porep":                  # one of the 2 challenges
        assert rec["constraints"] == POREP_TOP + (PUBLISHED_2KIB[kind][0] - POREP_TOP) // 2
        assert rec["num_inputs"] == 3 + 18 + 1
    if kind == "snap":
        assert rec["num_inputs"] == 4 + 1


def test_key_resident_proofs_that_cannot_fit_stop_before_the_setup(tmp_path, monkeypatch):
    """--then-resident --streaming-reps 0 on a device that holds the streaming
    plan but not the key beside the prover's working set: refused with the
    reason after extraction, before any setup (the 32GiB WindowPoSt partition
    set up for 155 s, then ran out of memory in its SpMV, bench/NOTES.md
    session 13).  The SpMV stage is planned from the extracted matrices."""
    kw = dict(challenges=1, msm_budget=1 << 24, keys_in_host=True)
    probe = F.run_case("window-post", "2KiB", record_only=True, **kw).record
    fits = max(probe["plan_setup_peak_bytes"], probe["plan_prove_peak_bytes"]) + 1
    monkeypatch.setattr(F, "limits", lambda: {"device": fits, "host": 1 << 40})
    out = tmp_path / "r.jsonl"
    rec = F.run_case("window-post", "2KiB", out=str(out), then_resident=True,
                     streaming_reps=0, **kw).record
    assert rec["skipped"].startswith("with the key resident, prove needs about")
    assert "device memory" in rec["skipped"] and "setup_s" not in rec
    assert _records(out)[-1]["skipped"] == rec["skipped"]
    from jaxprove import pce
    m = pce.extract(F.spec_for("window-post", "2KiB", 1).record())
    assert pce.evaluate_bytes(m) > 32 * (m.num_vars + 3 * m.rows)   # the SpMV's own working set


def test_refusals_use_xlas_count_of_the_spmv_not_the_model(tmp_path, monkeypatch):
    """A case the plan would refuse on the SpMV model's figure (an upper bound
    on the GPU, ~2x at 32GiB WindowPoSt: bench/NOTES.md session 15) is planned
    again with XLA's own count (``pce.evaluate_xla_bytes``) before it is
    refused; recorded beside the model's.  Fits then: it goes on to its setup."""
    from jaxprove import pce
    kw = dict(challenges=1)
    probe = F.run_case("window-post", "2KiB", record_only=True, **kw).record
    xla = pce.evaluate_xla_bytes(pce.extract(F.spec_for("window-post", "2KiB", 1).record()))
    fits = max(probe["plan_setup_peak_bytes"], probe["plan_prove_peak_bytes"]) + 1
    monkeypatch.setattr(pce, "evaluate_bytes", lambda m, batch=1: 1 << 40)   # a model far off
    monkeypatch.setattr(F, "limits", lambda: {"device": fits, "host": 1 << 40})

    class ReachedSetup(Exception):
        pass

    def setup(*a, **k):
        raise ReachedSetup

    monkeypatch.setattr(F.G, "setup", setup)
    out = tmp_path / "r.jsonl"
    with pytest.raises(ReachedSetup):
        F.run_case("window-post", "2KiB", out=str(out), **kw)
    # the key-resident plan does not fit even with XLA's figure (a device that holds only
    # the streaming plan): refused, both figures on record
    stream = dict(msm_budget=1 << 24, keys_in_host=True, **kw)
    monkeypatch.undo()
    probe = F.run_case("window-post", "2KiB", record_only=True, **stream).record
    fits = max(probe["plan_setup_peak_bytes"], probe["plan_prove_peak_bytes"]) + 1
    monkeypatch.setattr(pce, "evaluate_bytes", lambda m, batch=1: 1 << 40)
    monkeypatch.setattr(F, "limits", lambda: {"device": fits, "host": 1 << 40})
    rec = F.run_case("window-post", "2KiB", out=str(out), then_resident=True, streaming_reps=0,
                     **stream).record
    assert rec["skipped"].startswith("with the key resident, prove needs about")
    assert rec["spmv_bytes_model"] == 1 << 40 and rec["spmv_bytes_xla"] == xla


def test_cases_that_cannot_fit_are_refused_before_recording(tmp_path, monkeypatch):
    out = tmp_path / "s.jsonl"
    monkeypatch.setattr(F, "limits", lambda: {"device": 1 << 20, "host": 1 << 40})
    rec = F.run_case("winning-post", "2KiB", out=str(out)).record
    assert "setup needs about" in rec["skipped"] and "device memory" in rec["skipped"]
    assert "90,883 rows" in rec["skipped"] and "record_s" not in rec
    assert _records(out)[0]["skipped"] == rec["skipped"]
    # record-only needs host memory only
    assert "skipped" not in F.run_case("window-post", "2KiB", record_only=True).record
    monkeypatch.setattr(F, "limits", lambda: {"device": 1 << 40, "host": 1 << 20})
    rec = F.run_case("window-post", "2KiB", record_only=True).record
    assert rec["skipped"].startswith("record needs about") and "host memory" in rec["skipped"]
    # a full 32GiB PoRep partition on one H200 (141 GiB, 128 GiB host): the setup fits (key +
    # QAP values + one chunk), the pre-recording proof estimate (every variable dense) does not
    h200 = {"device": 141 << 30, "host": 128 << 30}
    p = F.plan_from_counts("porep", "32GiB")
    assert F.shortfall(p, h200, stages=("record", "setup")) is None
    why = F.shortfall(p, h200)
    assert why.startswith("prove needs") and "130,278,869 rows" in why and "2^27" in why
    assert "GiB of device memory" in why and "has 141.0 GiB" in why
    # streaming mode: the key is built in host memory (split as it is made), so the setup
    # needs its 70 GiB there besides the recording's, and none on the device
    s = F.plan_from_counts("porep", "32GiB", msm_budget=16 << 30, keys_in_host=True)
    assert F.shortfall(s, h200) is None
    # proving on a 16 GB card (RTX 5080-class; 128 GiB host; the keys come from a setup made
    # elsewhere, e.g. Filecoin's .params: our setup's QAP alone needs ~39 GiB at 2^27):
    # streaming alone needs the 2^27 domain's a, b, c and NTT buffers on the device; the
    # 16 GB mode (out of core, 6 GiB per program and per MSM call) needs w, the gathered
    # scalars (at most one vector) and 6 GiB (h goes to the MSM a chunk at a time), the
    # key, matrices and a, b, c, h in host memory
    card = {"device": 15 << 30, "host": 128 << 30}
    assert F.shortfall(F.plan_from_counts("porep", "32GiB", msm_budget=6 << 30,
                                          keys_in_host=True), card,
                       ("prove",)).startswith("prove needs")
    o = F.plan_from_counts("porep", "32GiB", msm_budget=6 << 30, keys_in_host=True,
                           out_of_core=6 << 30)
    assert F.shortfall(o, card, ("record", "prove")) is None
    assert o.prove_peak_bytes == 2 * 32 * o.rows + (6 << 30)       # w, scalars, budget
    # key, matrices twice (host, prepared row blocks), a, b, c and h
    matrices = F.MATRIX_BYTES_PER_ROW * o.rows
    assert o.host_prove_bytes == o.key_bytes + 2 * matrices + 4 * 32 * (1 << 27)
    hw = F.plan_from_counts("porep", "32GiB", msm_budget=6 << 30, keys_in_host=True,
                            out_of_core=6 << 30, host_witness=True)   # w waits in host memory
    assert hw.host_prove_bytes == o.host_prove_bytes + 32 * o.rows          # rows = num_vars here
    small_host = F.shortfall(o, {"device": 15 << 30, "host": 90 << 30}, ("prove",))
    assert small_host.startswith("prove needs about") and "host memory" in small_host
    with pytest.raises(ValueError, match="out_of_core needs keys_in_host"):
        F.plan_from_counts("porep", "32GiB", out_of_core=6 << 30)
    assert s.setup_peak_bytes == p.setup_peak_bytes - p.key_bytes
    assert s.host_setup_bytes == s.host_record_bytes + s.key_bytes
    why = F.shortfall(s, {"device": 141 << 30, "host": 64 << 30}, stages=("setup",))
    assert why.startswith("setup needs about") and "of host memory" in why


def test_porep_job_is_partition_zero_alone():
    """The bench's PoRep job: one partition of the registered circuit's shape
    (the same topology, so a stored circuit serves it)."""
    from circuits.filecoin import porep as PR
    parts = F.synthetic_parts("porep", "2KiB", seed=3)
    assert len(parts) == 1 and parts[0].cfg == PR.CONFIGS["2KiB"]
    assert F.synthetic_parts("porep", "2KiB", seed=3)[0].public_inputs() == parts[0].public_inputs()
    assert len(F.synthetic_parts("window-post", "2KiB", challenges=1)) == 1


def test_synthetic_job_is_kept_for_the_next_process(tmp_path, monkeypatch):
    """With a directory the job is made once and read back after (the 32GiB
    WindowPoSt job took 95-105 s, made twice per device session): the same
    partitions, a file per seed, and nothing left half-written."""
    made = []
    spec_for = F.spec_for
    monkeypatch.setattr(F, "spec_for", lambda *a: made.append(a) or spec_for(*a))
    first = F.synthetic_parts("window-post", "2KiB", 1, 5, str(tmp_path / "d"))
    again = F.synthetic_parts("window-post", "2KiB", 1, 5, str(tmp_path / "d"))
    assert len(made) == 1 and len(again) == len(first) == 1
    import pickle
    assert pickle.dumps(again) == pickle.dumps(first)
    assert F._expected_public(again[0]) == F._expected_public(first[0])
    F.synthetic_parts("window-post", "2KiB", 1, 6, str(tmp_path / "d"))
    names = sorted(p.name for p in (tmp_path / "d").iterdir())
    assert len(made) == 2 and len(names) == 2 and all(n.endswith(".pkl") for n in names)
    assert "-s5-" in names[0] and "-s6-" in names[1]


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown proof kind 'post'"):
        F.spec_for("post", "2KiB")
    with pytest.raises(ValueError, match="unknown sector size '4KiB'"):
        F.spec_for("porep", "4KiB")
    with pytest.raises(ValueError, match="challenges must be a positive integer"):
        F.spec_for("snap", "2KiB", 0)
    with pytest.raises(SystemExit, match="--kinds: bogus"):
        F.main(["--kinds", "porep,bogus"])
    with pytest.raises(SystemExit, match="--sizes: 1TiB"):
        F.main(["--sizes", "1TiB"])
    with pytest.raises(ValueError, match="reps must be >= 1"):
        F.run_case("porep", "2KiB", reps=0)
    with pytest.raises(SystemExit, match="--then-resident: needs --keys-in-host-memory"):
        F.main(["--then-resident"])
    with pytest.raises(SystemExit, match="--streaming-reps: must be >= 1, or 0 with"):
        F.main(["--streaming-reps", "0", "--keys-in-host-memory"])
    with pytest.raises(SystemExit, match="--streaming-reps: must be >= 1"):
        F.main(["--streaming-reps", "-1"])
    with pytest.raises(ValueError, match="streaming_reps must be >= 1, or 0 with"):
        F.run_case("porep", "2KiB", streaming_reps=0, keys_in_host=True)


def _leaf(randomness: bytes, sector_id: int, c: int, nodes: int) -> int:
    """vanilla.rs generate_leaf_challenge, from hashlib."""
    d = hashlib.sha256(randomness + sector_id.to_bytes(8, "little") + c.to_bytes(8, "little"))
    return int.from_bytes(d.digest()[:8], "little") % nodes


@pytest.mark.slow
def test_window_post_proof_path_and_saved_snarkjs_json(tmp_path):
    out, save = tmp_path / "p.jsonl", tmp_path / "save"
    res = F.run_case("window-post", "2KiB", reps=1, out=str(out), save=str(save),
                     challenges=1, setup_seed=5)
    circuit, rec, ver = _records(out)
    assert circuit["case"] == "filecoin.window-post.circuit"
    assert rec is not None and rec["case"] == "filecoin.window-post"
    assert ver["case"] == "filecoin.window-post.verify" and ver["verified"] is True
    assert rec["rows"] == 2 * (313 + (PUBLISHED_2KIB["window-post"][0] // 2 - 313) // 10) + 5
    stages = rec["stages_median_s"]
    msms = {k for k in stages if k.startswith("msm_")}
    assert set(stages) - msms == {"spmv", "ntt", "combine", "total"} and msms
    assert sum(v for k, v in stages.items() if k != "total") <= stages["total"]
    assert rec["min_s"] <= rec["median_s"] <= rec["max_s"] and rec["reps"] == 1
    assert rec["setup_s"] > 0 and rec["witness_s"] > 0 and rec["job_partitions"] == 1
    assert rec["public_inputs"] == 4 and rec["public_match"] is True
    # the planned key bytes are the key's point vectors (+ 5 constant points + vk's IC)
    assert 0 <= rec["key_bytes"] - rec["plan_key_bytes"] < 96 * 16 + 192 * 8
    # public inputs: per sector comm_r and its challenged leaf index (hashlib)
    job = F.spec_for("window-post", "2KiB", 1).synthetic(random.Random(0))
    sectors = job["partitions"][0]["sectors"]
    randomness = bytes.fromhex(job["randomness"])
    want = [v for i, s in enumerate(sectors)
            for v in (int(s["comm_r"]), _leaf(randomness, s["id"], i, 64))]
    d = save / "window-post_2KiB_c1"
    assert [int(v) for v in json.loads((d / "public.json").read_text())] == want == res.public
    vk = json.loads((d / "verification_key.json").read_text())
    assert vk["nPublic"] == 4 and len(vk["IC"]) == 5 and vk["vk_alphabeta_12"] == []
    bad = d / "public_bad.json"
    changed = [want[0], (want[1] + 1) % 64] + want[2:]            # another challenged leaf
    bad.write_text(json.dumps([str(v) for v in changed]))
    # our verifier on the JSON read back (the batch shape proved above: compiled already)
    pr = FM.read_proof_json(d / "proof.json")
    pr = G.Proof(*(x[..., None] for x in pr))
    for public, ok in ((d / "public.json", True), (bad, False)):
        assert bool(np.asarray(G.verify(res.vk, [FM.read_public_json(public)], pr))
                    .reshape(-1)[0]) is ok
    if os.access(SNARKJS, os.X_OK):        # and snarkjs's verifier, when installed
        def snarkjs(public):
            r = subprocess.run([str(SNARKJS), "groth16", "verify", "verification_key.json",
                                public.name, "proof.json"], cwd=d, capture_output=True,
                               text=True, timeout=300)
            return r.returncode == 0 and "OK" in r.stdout
        assert snarkjs(d / "public.json")
        assert not snarkjs(bad)


@pytest.mark.slow
def test_streaming_reps_zero_goes_straight_to_the_resident_key(tmp_path):
    """--streaming-reps 0 --then-resident: the key set up in host memory, no
    streaming proof (its record has no timings, nothing saved for it), then
    placed on the device and proved; that proof verifies."""
    out, save = tmp_path / "p.jsonl", tmp_path / "save"
    F.main(["--kinds", "window-post", "--sizes", "2KiB", "--challenges", "1", "--reps", "1",
            "--keys-in-host-memory", "--msm-budget-gib", "0.05", "--then-resident",
            "--streaming-reps", "0", "--save", str(save), "--out", str(out)])
    recs = _records(out)
    assert [r["case"] for r in recs] == ["filecoin.window-post.circuit"] + \
        ["filecoin.window-post"] * 2 + ["filecoin.window-post.verify"]
    streaming, resident = recs[1], recs[2]
    assert streaming["streaming_reps"] == 0 and "median_s" not in streaming
    assert resident["keys_in_host_memory"] is False and resident["median_s"] > 0
    assert recs[3]["verified"] is True
    assert sorted(p.name for p in save.iterdir()) == ["window-post_2KiB_resident_c1"]


@pytest.mark.slow    # 10 min beside the suite on the 2-core box; test_groth16 checks the split keys' storage
def test_keys_set_up_by_one_process_are_proved_from_by_the_next(tmp_path):
    """--keys-dir --setup-only records, sets up and stores the split key (no
    proof); the next run loads it instead of a setup, proves in streaming
    mode, and the proof verifies against the stored verifying key."""
    out, keys = tmp_path / "k.jsonl", tmp_path / "keys"
    args = ["--kinds", "window-post", "--sizes", "2KiB", "--challenges", "1", "--reps", "1",
            "--keys-in-host-memory", "--msm-budget-gib", "0.05", "--keys-dir", str(keys)]
    F.main(args + ["--setup-only", "--out", str(out)])
    recs = _records(out)
    assert [r["case"] for r in recs] == ["filecoin.window-post.circuit", "filecoin.window-post.setup"]
    name = recs[1]["keys_saved"]
    assert name.startswith("window-post-2KiB-c1-split-") and (keys / name).is_dir()
    assert "median_s" not in recs[1] and recs[1]["setup_s"] > 0
    out2 = tmp_path / "p.jsonl"
    F.main(args + ["--out", str(out2)])
    recs = _records(out2)
    prove = next(r for r in recs if r["case"] == "filecoin.window-post")
    assert prove["keys_loaded"] == name and "setup_s" not in prove and prove["median_s"] > 0
    assert prove["public_match"]
    assert any(r["case"].endswith(".verify") and r["verified"] for r in recs)
    with pytest.raises(SystemExit, match="needs --keys-dir"):
        F.main(["--kinds", "window-post", "--sizes", "2KiB", "--setup-only"])


@pytest.mark.slow
def test_streaming_then_resident_proves_twice_from_one_setup(tmp_path):
    """--then-resident: the streaming proofs (key in host memory, MSMs within a
    budget), then the same key placed on the device and proved again; both
    timing records written and both saved proofs verify."""
    out, save = tmp_path / "p.jsonl", tmp_path / "save"
    F.main(["--kinds", "window-post", "--sizes", "2KiB", "--challenges", "1", "--reps", "1",
            "--keys-in-host-memory", "--msm-budget-gib", "0.05", "--then-resident",
            "--save", str(save), "--out", str(out)])
    recs = _records(out)
    assert [r["case"] for r in recs] == ["filecoin.window-post.circuit"] + \
        ["filecoin.window-post"] * 2 + ["filecoin.window-post.verify"]
    streaming, resident = recs[1], recs[2]
    assert streaming["keys_in_host_memory"] is True and "key_place_s" not in streaming
    assert resident["keys_in_host_memory"] is False and resident["key_place_s"] > 0
    assert resident["after_streaming_in_process"] is True and recs[3]["verified"] is True
    assert resident["setup_s"] == streaming["setup_s"]          # one setup for both
    vk = FM.read_verification_key_json(save / "window-post_2KiB_c1" / "verification_key.json")
    for name in ("window-post_2KiB_c1", "window-post_2KiB_resident_c1"):
        d = save / name
        public = FM.read_public_json(d / "public.json")
        pr = FM.read_proof_json(d / "proof.json")
        pr = G.Proof(*(x[..., None] for x in pr))
        assert bool(np.asarray(G.verify(vk, [public], pr)).reshape(-1)[0]) is True
        changed = [public[0] + 1] + public[1:]
        assert bool(np.asarray(G.verify(vk, [changed], pr)).reshape(-1)[0]) is False


def test_first_proof_progress_names_each_stage_once(capsys, monkeypatch):
    """A first proof's compiles take minutes at 32GiB: each stage is named
    when it is first reported, repeated chunk calls within a stage are not
    (unless ``every`` seconds passed)."""
    clock = iter([1.0, 2.0, 3.0, 4.0, 50.0])
    monkeypatch.setattr(F.time, "perf_counter", lambda: next(clock))
    on = F._progress("x", 0.0, every=30.0)
    for stage in ("spmv", "ntt", "msm_a", "msm_a", "msm_a"):
        on(stage)
    err = capsys.readouterr().err.splitlines()
    assert all(re.match(r"\[\d\d:\d\d:\d\d\] \(host [\d.?]+/[\d.]+ GiB\) ", ln) for ln in err)
    lines = [ln.split(" GiB) ", 1)[1] for ln in err]
    assert lines == ["x: first proof: spmv at 1.0 s", "x: first proof: ntt at 2.0 s",
                     "x: first proof: msm_a at 3.0 s", "x: first proof: msm_a at 50.0 s"]


def test_a_key_that_fits_without_the_merged_msms_gets_an_msm_budget(tmp_path, monkeypatch,
                                                                   capsys):
    """SnapDeals 512MiB on the H200 (session 17): the key fits on the device,
    the merged MSM passes beside it do not.  The plan then builds the key split
    on the device and gives each MSM what the rest leaves (the per-MSM path)
    instead of refusing the case; with less than ``RESIDENT_MSM_FLOOR`` left
    it still refuses."""
    from jaxprove import pce
    kw = dict(challenges=1)
    monkeypatch.setattr(pce, "evaluate_bytes", lambda m, batch=1: 1 << 10)
    monkeypatch.setattr(pce, "evaluate_xla_bytes", lambda m, batch=1: None)
    monkeypatch.setattr(F, "RESIDENT_MSM_FLOOR", 1 << 20)
    monkeypatch.setattr(F, "SETUP_CHUNK_BYTES", 1 << 16)      # the setup's chunk, not the point
    r = F.run_case("window-post", "2KiB", record_only=True, **kw).record

    def planned(budget):
        return F.plan(r["rows"], r["num_vars"], r["num_aux"], r["num_vars"] - r["bit_vars"],
                      r["matrices_bytes"], budget, False, 1 << 10, b_vars=r["b_vars"])
    merged, floor = planned(None), planned(F.RESIDENT_MSM_FLOOR)
    assert merged.prove_peak_bytes > floor.prove_peak_bytes      # the merged passes are larger
    limit = floor.prove_peak_bytes + (merged.prove_peak_bytes - floor.prove_peak_bytes) // 2
    limit = max(limit, floor.setup_peak_bytes)
    assert merged.prove_peak_bytes > limit
    monkeypatch.setattr(F, "limits", lambda: {"device": limit, "host": 1 << 40})
    seen = {}

    class ReachedSetup(Exception):
        pass

    def setup(*a, **k):
        seen.update(k)
        raise ReachedSetup

    monkeypatch.setattr(F.G, "setup", setup)
    out = tmp_path / "r.jsonl"
    with pytest.raises(ReachedSetup):
        F.run_case("window-post", "2KiB", out=str(out), **kw)
    budget = limit - planned(0).prove_peak_bytes
    assert planned(budget).prove_peak_bytes <= limit
    assert f"each MSM alone, in chunks within {F.gib(budget)}" in capsys.readouterr().err
    assert seen["positions"] is not None and seen["host"] is False   # built split, on the device
    # less than the floor left: refused as before
    monkeypatch.setattr(F, "RESIDENT_MSM_FLOOR", budget + 1)
    rec = F.run_case("window-post", "2KiB", out=str(out), **kw).record
    assert rec["skipped"].startswith("prove needs about") and "msm_budget_auto" not in rec


@pytest.mark.slow
@pytest.mark.parametrize("host_witness", [False, True])
def test_the_16gb_mode_proves_out_of_core(tmp_path, monkeypatch, host_witness):
    """``--out-of-core-gib`` end to end (the 2KiB WindowPoSt at one challenge,
    5.6 CPU-minutes): key and matrices in host memory (the resident bytes are
    the positions only), a, b, c and h out of core in row blocks within 8 MiB,
    each MSM within 16 MiB; the proof verifies and its public inputs match.
    A budget below the smallest row block is refused before the setup.  A
    device budget holds a ballast after the setup (its size from the pool's
    statistics, which the CPU lacks: faked here).  With ``then_resident`` the
    same process then drops the ballast and proves in core with the key on
    the device (the 32GiB pipeline's one setup for both modes).  With
    ``host_witness`` the witness waits in host memory and h is computed on
    the device (hypothesis 83), the row blocks planned for it."""
    out = tmp_path / "o.jsonl"
    monkeypatch.setattr(F, "ballast_bytes", lambda stats, budget: 1 << 20)
    r = F.run_case("window-post", "2KiB", reps=1, challenges=1, setup_seed=3, out=str(out),
                   msm_budget=1 << 24, keys_in_host=True, out_of_core=1 << 23,
                   device_budget=1 << 30, then_resident=True, host_witness=host_witness).record
    recs = _records(out)
    assert [x["case"] for x in recs] == ["filecoin.window-post.circuit"] + \
        ["filecoin.window-post"] * 2 + ["filecoin.window-post.verify"]
    ooc = recs[1]
    assert ooc["ballast_bytes"] == 1 << 20 and ooc["device_budget_bytes"] == 1 << 30
    assert ooc["out_of_core_bytes"] == 1 << 23 and ooc["public_match"]
    assert ooc["resident_bytes"] < 1 << 16 and "key_place_s" not in ooc
    assert {"msm_a", "msm_h", "spmv", "check", "ntt"} <= set(ooc["stages_median_s"])
    assert ooc["host_witness"] is host_witness
    assert ("witness_put" in ooc["stages_median_s"]) is host_witness
    assert (ooc["spmv_budget_bytes"] < 1 << 23) is host_witness
    assert ("witness_fetch_s" in ooc) is host_witness
    # the in-core record: key, matrices and domain on the device, no budget
    assert r is not ooc and r["key_place_s"] > 0 and r["public_match"]
    assert r["out_of_core_bytes"] is None and r["ballast_bytes"] is None
    assert r["resident_bytes"] > 1 << 16 and r["setup_s"] == ooc["setup_s"]
    assert recs[3]["verified"] is True
    small = F.run_case("window-post", "2KiB", challenges=1, msm_budget=1 << 24,
                       keys_in_host=True, out_of_core=1 << 16).record
    assert small["skipped"].startswith("out of core: evaluate_host: the smallest row block")


def test_ballast_leaves_the_budget_free():
    gi = 1 << 30
    assert F.ballast_bytes({"bytes_limit": 100 * gi, "bytes_in_use": 30 * gi}, 14 * gi) == 56 * gi
    assert F.ballast_bytes({"bytes_limit": 100 * gi, "bytes_in_use": 90 * gi}, 14 * gi) == 0
    assert F.ballast_bytes({"bytes_limit": 103, "bytes_in_use": 0}, 2) == 100
    assert F.ballast_bytes(None, gi) is None and F.ballast_bytes({}, gi) is None
    with pytest.raises(ValueError, match="positive"):
        F.ballast_bytes({"bytes_limit": 1, "bytes_in_use": 0}, 0)
    with pytest.raises(SystemExit, match="device-budget-gib"):
        F.main(["--kinds", "porep", "--sizes", "2KiB", "--device-budget-gib", "0"])


def test_ballast_below_moves_the_arrays_around_it():
    """``ballast_below``: the ballast has the asked bytes; the box's device
    arrays come back placed with their values, host arrays untouched, and
    the caller's box is emptied (no device copy held meanwhile)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    a, h = jnp.arange(12, dtype=jnp.uint32).reshape(3, 4), np.arange(5)
    box = [a, (h, {"k": a + 1})]
    ballast, (a2, (h2, d)) = F.ballast_below(box, 4096)
    assert box == [] and ballast.nbytes == 4096
    assert isinstance(a2, jax.Array) and np.array_equal(np.asarray(a2), np.asarray(a))
    assert h2 is h and isinstance(d["k"], jax.Array) and np.array_equal(np.asarray(d["k"]),
                                                                         np.asarray(a) + 1)


def test_a_device_budget_below_the_proofs_plan_is_refused_before_the_setup(tmp_path):
    """The proving stage is planned against --device-budget-gib (the setup
    against the whole pool): a budget below it stops before the setup."""
    r = F.run_case("window-post", "2KiB", challenges=1, msm_budget=1 << 24, keys_in_host=True,
                   out_of_core=1 << 23, device_budget=1 << 10).record
    assert r["skipped"].startswith("prove needs about") and "setup_s" not in r
    assert r["skipped"].endswith("the device budget is 0.0 MiB"), r["skipped"]


def test_a_split_keys_plan_counts_b_at_its_density():
    """A key built split (keys in host memory, or an MSM budget) holds B1 and
    B2 only for B's variables, as ``modes.key_bytes`` counts it; a key held
    whole (the merged passes) holds them in full whatever ``b_vars`` says.
    The 32GiB PoRep partition's counts (research/filecoin-circuits.md)."""
    rows, n, aux, b = 130_278_869, 130_278_869, 130_278_541, 1 + 33_112_281
    whole = F.plan(rows, n, aux, n, 1 << 30, None, True, out_of_core=1 << 33)
    split = F.plan(rows, n, aux, n, 1 << 30, None, True, out_of_core=1 << 33, b_vars=b)
    assert whole.key_bytes - split.key_bytes == (96 + 192) * (n - b)
    assert split.key_bytes == MD.key_bytes(n, aux, rows, b)
    assert whole.host_setup_bytes - split.host_setup_bytes == (96 + 192) * (n - b)
    merged = F.plan(rows, n, aux, n, 1 << 30, b_vars=b)
    assert merged.key_bytes == MD.key_bytes(n, aux, rows)


def test_pinned_estimate_counts_the_key_blocks_vectors_and_witnesses():
    """``pinned_estimate`` (the pool's cap before the backend starts, hypothesis
    95): the key in host memory, the row blocks at MATRIX_BYTES_PER_ROW, the
    device h's two host vectors of the domain and a witness per held job; the
    streaming mode pins the key alone."""
    ooc = 13 << 30
    p = F.plan_from_counts("porep", "32GiB", keys_in_host=True, out_of_core=ooc,
                           host_witness=True)
    assert p.domain_log == 27
    want = p.key_bytes + F.MATRIX_BYTES_PER_ROW * p.rows + 2 * 32 * (1 << 27)
    assert F.pinned_estimate("porep", "32GiB", None, ooc, True) == want + 32 * p.rows
    assert F.pinned_estimate("porep", "32GiB", None, ooc, True, witnesses=2) == \
        want + 64 * p.rows
    q = F.plan_from_counts("porep", "32GiB", keys_in_host=True)
    assert F.pinned_estimate("porep", "32GiB") == q.key_bytes


def test_main_sets_the_pinned_pools_cap_from_its_cases_before_the_backend(monkeypatch):
    """``bench.filecoin --pinned-key`` sets an unset pool cap from the largest
    case's ``pinned_estimate`` (hypothesis 95) before anything starts the
    backend; without ``--pinned-key`` it leaves XLA's default."""
    from jaxprove import memory
    seen = []
    monkeypatch.setattr(memory, "_backend_started", lambda: False)
    monkeypatch.setattr(memory, "host_total", lambda: 1 << 40)       # 1 TiB: no clamp
    monkeypatch.setattr(F, "environment", lambda: {})
    monkeypatch.setattr(F, "run_case", lambda *a, **k: seen.append(
        os.environ.get(memory.PINNED_POOL_VAR)))
    monkeypatch.setenv(memory.PINNED_POOL_VAR, "0")   # recorded: restored after the test
    monkeypatch.delenv(memory.PINNED_POOL_VAR)
    ooc = 13
    F.main(["--kinds", "porep,winning-post", "--sizes", "32GiB", "--keys-in-host-memory",
            "--out-of-core-gib", str(ooc), "--host-witness", "--pinned-key"])
    want = F.pinned_estimate("porep", "32GiB", None, ooc << 30, True) + memory.PINNED_RESERVE
    assert seen == [str(-(-want >> 30))] * 2
    monkeypatch.delenv(memory.PINNED_POOL_VAR, raising=False)
    seen.clear()
    F.main(["--kinds", "porep", "--sizes", "32GiB", "--keys-in-host-memory"])
    assert seen == [None]
