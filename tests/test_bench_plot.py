"""bench.plot: the stacked stage bars of whole-proof records (SVG)."""
from __future__ import annotations

import json
import subprocess
import sys
import xml.dom.minidom as minidom
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_stacked_stage_bars(tmp_path):
    recs = [{"case": "groth16.sha256", "rows": 1027733, "commit": "aaa", "goal_s": 0.25,
             "stages_median_s": {"spmv": 0.002, "ntt": 0.009, "msm_g1": 0.088, "total": 0.099}},
            {"case": "filecoin.porep", "size": "2KiB", "commit": "bbb", "keys_in_host_memory": True,
             "stages_median_s": {"witness": 0.5, "msm_g1": 1.5, "total": 2.0}},
            {"case": "filecoin.porep", "size": "32GiB", "commit": "ddd", "keys_in_host_memory": True,
             "out_of_core_bytes": 9 << 30, "stages_median_s": {"spmv": 3.0, "total": 3.0}},
            {"case": "msm_G1", "log_n": 20, "median_s": 0.05}]          # no stages: left out
    src = tmp_path / "r.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "s.svg"
    subprocess.run([sys.executable, "-m", "bench.plot", "--stages", str(src), "--out", str(out)],
                   cwd=ROOT, check=True)
    doc = minidom.parse(str(out))
    texts = [t.firstChild.data for t in doc.getElementsByTagName("text")]
    assert "groth16.sha256 1,027,733 rows @ aaa" in texts and "filecoin.porep 2KiB, key streamed @ bbb" in texts
    assert "filecoin.porep 32GiB, 16 GB mode @ ddd" in texts
    assert "0.099 s" in texts and "2.000 s" in texts and not any("msm_G1" in t for t in texts)
    titles = [t.firstChild.data for t in doc.getElementsByTagName("title")]
    assert titles == ["spmv: 2.0 ms", "ntt: 9.0 ms", "msm_g1: 88.0 ms", "msm_g1: 1500.0 ms",
                      "witness: 500.0 ms", "spmv: 3000.0 ms"]
    bars = [r for r in doc.getElementsByTagName("rect") if r.getElementsByTagName("title")]
    widths = [float(r.getAttribute("width")) for r in bars]
    assert abs(widths[3] / widths[2] - 1500 / 88) < 1e-6                 # linear in seconds
    assert len(doc.getElementsByTagName("line")) == 1                    # one goal tick
    assert not list(tmp_path.glob("*.tmp"))


def test_cuzk_bars_and_witness_stage(tmp_path):
    from bench.plot import CUZK_BARS
    rec = {"case": "filecoin.porep", "size": "2KiB", "rows": 2687961, "commit": "ccc",
           "witness_s": 0.1, "stages_median_s": {"spmv": 0.002, "msm_g1": 0.2, "total": 0.202}}
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(rec) + "\n")
    out = tmp_path / "c.svg"
    subprocess.run([sys.executable, "-m", "bench.plot", "--stages", "--cuzk", str(src), "--out",
                    str(out)], cwd=ROOT, check=True)
    doc = minidom.parse(str(out))
    texts = [t.firstChild.data for t in doc.getElementsByTagName("text")]
    assert "filecoin.porep 2KiB 2,687,961 rows @ ccc" in texts and "0.302 s" in texts
    for label, stages, _ in CUZK_BARS:
        assert label in texts and f"{sum(stages.values()):.3f} s" in texts
    titles = [t.firstChild.data for t in doc.getElementsByTagName("title")]
    assert titles[:3] == ["witness: 100.0 ms", "spmv: 2.0 ms", "msm_g1: 200.0 ms"]
    bad = subprocess.run([sys.executable, "-m", "bench.plot", "--cuzk", str(src), "--out",
                          str(tmp_path / "x.svg")], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode != 0 and "--cuzk needs --stages" in bad.stderr
