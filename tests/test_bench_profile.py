"""bench.profile: a traced stage read back per kernel (on the CPU the host's
XLA threads stand in for the device planes)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from bench import profile as P


def test_profile_reads_its_trace_back_per_event():
    rec = P.profile("ntt", log_n=8, reps=2, top=5)
    assert rec["case"] == "profile.ntt" and rec["size"] == "2^8" and rec["traced_calls"] == 2
    assert rec["planes"] and rec["wall_s"] > 0 and rec["busy_ms_per_call"] > 0
    assert 1 <= len(rec["top"]) <= 5
    ms = [t["ms"] for t in rec["top"]]
    assert ms == sorted(ms, reverse=True) and ms[0] > 0
    assert all(0 < t["share"] <= 1 and t["count"] > 0 for t in rec["top"])


def test_profile_spmv_of_a_filecoin_circuit_and_the_command_line(tmp_path, monkeypatch):
    """The matrices come from where bench.filecoin stored them (a stored
    copy is loaded, not recorded again)."""
    from bench import filecoin as F
    from jaxprove import pce
    spec = F.spec_for("window-post", "2KiB", 1)
    pce.save(pce.extract(spec.record()), str(tmp_path / "fc"), pce.cache_key(spec.topology))
    recorded = []
    monkeypatch.setattr(F, "spec_for", lambda *a: type(
        "S", (), {"topology": spec.topology, "record": lambda self: recorded.append(1)})())
    out = tmp_path / "p.jsonl"
    P.main(["--case", "spmv", "--kind", "window-post", "--size", "2KiB", "--challenges", "1",
            "--circuit-dir", str(tmp_path / "fc"), "--reps", "1", "--top", "3", "--form", "fused",
            "--out", str(out)])
    assert not recorded
    rec = json.loads(out.read_text())
    assert rec["case"] == "profile.spmv" and rec["size"].startswith("window-post 2KiB c1: ")
    assert rec["form"] == "fused"
    assert rec["log_n"] is None and len(rec["top"]) == 3 and "command" in rec
    with pytest.raises(SystemExit):
        P.main(["--case", "ntt", "--log-n", "40"])
    with pytest.raises(SystemExit):
        P.main(["--case", "spmv", "--form", "scatter"])
    with pytest.raises(ValueError, match="reps must be >= 1"):
        P.profile("ntt", log_n=4, reps=0)
    with pytest.raises(ValueError, match="unknown case"):
        P.stage("fft")


def test_profile_msm_of_either_group():
    """``--curve`` picks the group of the msm case's points."""
    fn, (bases, s), label = P.stage("msm", log_n=3, curve="G2")
    assert label.startswith("G2 2^3, c=") and bases.shape[-1] == 8 and bases.shape[1] == 2
    with pytest.raises(ValueError, match="curve must be G1 or G2"):
        P.stage("msm", curve="G3")
    fn, (bases, s), label = P.stage("msm", log_n=8, budget_gib=1e-3, host_inputs=True,
                                    pinned=True)          # hypothesis 84's msm_h
    assert label.endswith("host bases and scalars, the bases pinned in pieces of 2^17")
    plain, (host, s2), _ = P.stage("msm", log_n=8, budget_gib=1e-3, host_inputs=True)
    assert np.array_equal(s, s2)          # the same inputs: the same sum, pinned or not
    from ops.curve import G1
    want = G1.to_affine_ints(plain(host, s))
    assert G1.to_affine_ints(fn(bases, s)) == want
    # hypothesis 89: pieces of one chunk (2^7 points of 96 B) put whole, the same sum
    f7, (b7, s7), label = P.stage("msm", log_n=8, budget_gib=1e-3, host_inputs=True,
                                  pinned=True, piece_mib=96 * 128 / 2**20)
    assert "chunks of 2^7" in label and label.endswith("pieces of 2^7") and b7.piece == 128
    assert G1.to_affine_ints(f7(b7, s7)) == want
    # hypothesis 93: the scalars left on the device (the device h's), the same sum
    fd, (bd, sd), label = P.stage("msm", log_n=8, budget_gib=1e-3, host_inputs=True,
                                  pinned=True, device_scalars=True)
    assert "host bases," in label and not isinstance(sd, np.ndarray)
    assert G1.to_affine_ints(fd(bd, sd)) == want
    fo, (bo, so), _ = P.stage("msm", log_n=8, budget_gib=1e-3, host_inputs=True,
                              pinned=True, device_scalars=True, put_ahead=False)
    assert G1.to_affine_ints(fo(bo, so)) == want     # the order before hypothesis 97
    with pytest.raises(ValueError, match="--device-scalars is a form of --host"):
        P.stage("msm", log_n=3, device_scalars=True)
    with pytest.raises(ValueError, match="--pinned is a form of --host"):
        P.stage("msm", log_n=3, pinned=True)
    with pytest.raises(ValueError, match="--piece-mib .* without --pinned"):
        P.stage("msm", log_n=8, budget_gib=1e-3, host_inputs=True, piece_mib=1)


def test_profile_the_16gb_modes_host_stages_names_their_spans(tmp_path):
    """``spmv_host`` (evaluate_host over a prepared plan, then check_host) and
    ``h_resident`` (the out-of-core h, overwrite) record the library's named
    host spans per call beside the device's (here the host's) busy time."""
    from bench import filecoin as F
    from jaxprove import pce
    spec = F.spec_for("window-post", "2KiB", 1)
    pce.save(pce.extract(spec.record()), str(tmp_path / "fc"), pce.cache_key(spec.topology))
    rec = P.profile("spmv_host", reps=2, kind="window-post", size="2KiB", challenges=1,
                    circuit_dir=str(tmp_path / "fc"), top=3, budget_gib=0.001)
    assert rec["size"].startswith("window-post 2KiB c1: ") and rec["size"].endswith("0.001 GiB")
    assert rec["log_n"] is None
    spans = rec["spans"]
    assert {"evaluate_host.put", "evaluate_host.spmv", "evaluate_host.fetch",
            "evaluate_host.write_rows", "check_host.put", "check_host.satisfied"} <= set(spans)
    assert all(s["ms"] > 0 and s["count"] >= 1 for s in spans.values())
    assert spans["evaluate_host.put"]["count"] >= 3          # a block of A, B and C at least
    rec = P.profile("spmv_device", reps=1, kind="window-post", size="2KiB", challenges=1,
                    circuit_dir=str(tmp_path / "fc"), top=3, budget_gib=0.01)   # 83's spmv
    assert rec["size"].endswith("within 0.01 GiB, a and b on the device")
    assert {"evaluate_host.put", "evaluate_host.put_witness", "evaluate_host.hold"} \
        <= set(rec["spans"])                                 # C held as fetched (94)
    with pytest.raises(ValueError, match="hold no device h|smallest row block"):
        P.stage("spmv_device", kind="window-post", size="2KiB", challenges=1,
                circuit_dir=str(tmp_path / "fc"), budget_gib=1e-5)
    rec = P.profile("h_resident", log_n=6, reps=1, top=3)
    assert rec["size"] == "2^6 within 9 GiB" and rec["log_n"] == 6
    assert {"h_resident.put", "h_resident.sweeps", "h_resident.fetch", "h_resident.quotient",
            "h_resident.rows_to_cols"} <= set(rec["spans"])
    assert rec["spans"]["h_resident.put"]["count"] == 3      # a, b and c, whole
    rec = P.profile("h_device", log_n=6, reps=1, top=3)      # hypothesis 83's h
    assert rec["size"] == "2^6 within 9 GiB, three vectors"
    assert {"h_resident.put", "h_resident.check", "h_resident.sweeps", "h_resident.quotient",
            "h_resident.rows_to_cols"} <= set(rec["spans"])
    assert rec["spans"]["h_resident.put"]["count"] == 1      # c alone: a and b are there
