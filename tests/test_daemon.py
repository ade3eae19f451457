"""The daemon (jaxprove.daemon): started on loopback by the test and driven
by real gRPC clients (concurrent requests, every verb, error codes), the
journal (restart loses no job acknowledged as submitted or done), the
configuration file, and ``python3 -m jaxprove serve`` as a process."""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time

import jax
import pytest

grpc = pytest.importorskip("grpc")

from jaxprove import atomic  # noqa: E402
from jaxprove import daemon as D  # noqa: E402
from jaxprove import engine as E  # noqa: E402
from test_engine import ToyProver, toy_proof, toy_registry  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start(tmp_path, prover, **cfg):
    config = D.DaemonConfig(listen="127.0.0.1:0", state_dir=str(tmp_path / "state"), **cfg)
    d = D.Daemon(config, toy_registry(), prover, devices=jax.devices()[:1])
    port = d.start()
    return d, f"127.0.0.1:{port}"


def test_concurrent_clients_every_verb(tmp_path):
    prover = ToyProver(delay=0.01, sizes={"porep-t": 7, "window-t": 5})
    d, addr = start(tmp_path, prover, max_batch_size=2)
    kinds = [("porep", "porep-t"), ("window-post", "window-t"), ("winning-post", "winning-t")]
    results, errors = {}, []

    def client(n):
        try:
            with D.Client(addr, timeout_s=60) as c:
                mine = []
                for j in range(3):
                    kind, topo = kinds[(n + j) % 3]
                    vals = [100 * n + 10 * j, 100 * n + 10 * j + 1]
                    mine.append((c.submit(kind, 1, {"values": vals}), topo, vals))
                kind, topo = kinds[n % 3]
                r = c.prove(kind, 1, {"values": [100 * n + 99]})            # blocking Prove
                results[r.job_id] = (r, topo, [100 * n + 99])
                for jid, topo, vals in mine:
                    results[jid] = (c.await_proof(jid), topo, vals)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert len(results) == 24
    for jid, (r, topo, vals) in results.items():
        assert r.job_id == jid and r.status == "done", r.error
        assert r.proof == b"".join(toy_proof(topo, v) for v in vals)
        assert r.public == [[v] for v in vals]
        assert r.timings["total"] >= r.timings["queue_wait"] >= 0
        # the result was on disk before the client could see it
        with open(tmp_path / "state" / "results" / f"{jid}.json") as f:
            assert json.load(f)["proof"] == r.to_json()["proof"]

    with D.Client(addr) as c:
        st = c.status()
        assert st["jobs"]["done"] == 24 and st["journal"] == {"pending": 0, "results": 24}
        assert st["devices"][0]["platform"] == jax.devices()[0].platform
        assert {"kind": "winning-post", "sector_size": 1, "topology": "winning-t",
                "priority": "CRITICAL"} in st["kinds"]
        assert {e["topology"]: e["bytes"] for e in st["resident"]}["porep-t"] == 7
        text = c.metrics()
        assert 'jaxprove_jobs_finished_total{kind="porep",status="done"} 8' in text
        assert ["0", "porep-t"] in [[str(w), t] for w, t in c.evict("porep-t")]
        assert "porep-t" not in [e["topology"] for e in c.status()["resident"]]
        assert "porep-t" in [e["topology"] for e in c.preload("porep", 1)]
        # idempotent retry with a request id; a failing job; the error codes
        pos = c.call("SubmitProof", {"kind": "porep", "sector_size": 1, "inputs": {"values": [8]}})
        assert pos["queue_position"] in (0, None)              # nothing ahead of it
        assert c.status()["queues"]["by_kind"].get("porep", 0) <= 1
        a = c.submit("porep", 1, {"values": [5]}, request_id="req-1")
        assert a == "req-1" and c.submit("porep", 1, {"values": [6]}, request_id="req-1") == a
        assert c.await_proof(a).proof == toy_proof("porep-t", 5)
        big = c.submit("porep", 1, {"values": [9], "blob": "x" * (6 << 20)})  # > 4 MB default
        assert c.await_proof(big).proof == toy_proof("porep-t", 9)
        bad = c.await_proof(c.submit("porep", 1, {"values": "nope"}))
        assert bad.status == "failed" and "bad input" in bad.error
        for call, code in [(lambda: c.submit("porep", 99, {"values": [1]}), "INVALID_ARGUMENT"),
                           (lambda: c.submit("porep", 1, {"values": [1]}, priority="urgent"),
                            "INVALID_ARGUMENT"),
                           (lambda: c.submit("porep", 1, {"values": [1]}, request_id="../x"),
                            "INVALID_ARGUMENT"),
                           (lambda: c.await_proof("no-such-job"), "NOT_FOUND"),
                           (lambda: c.cancel("no-such-job"), "NOT_FOUND")]:
            with pytest.raises(grpc.RpcError) as err:
                call()
            assert err.value.code() == getattr(grpc.StatusCode, code), err.value.details()
        raw = grpc.insecure_channel(addr).unary_unary(f"/{D.SERVICE}/GetStatus")
        with pytest.raises(grpc.RpcError) as err:
            raw(b"[not json", timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert d.stop() == []


def test_cancel_and_await_timeout_over_grpc(tmp_path):
    gate = threading.Event()
    prover = ToyProver(gate=gate)
    d, addr = start(tmp_path, prover)
    try:
        with D.Client(addr, timeout_s=60) as c:
            first = c.submit("porep", 1, {"values": [1]})
            assert prover.proving.wait(10)
            queued = c.submit("porep", 1, {"values": [2]})
            later = c.submit("porep", 1, {"values": [3]})
            r = c.await_proof(first, timeout_s=0.2)
            assert r.status == "running" and r.proof == b""
            assert c.cancel(later) is True and c.cancel(later) is False
            gate.set()
            assert c.await_proof(first).status == "done"
            assert c.await_proof(queued).status == "done"
            r = c.await_proof(later)
            assert r.status == "cancelled"
            assert 3 not in [v for _, vals, _, _ in prover.batches for v in vals]
    finally:
        gate.set()
        d.stop()


def test_restart_with_jobs_queued_loses_none(tmp_path):
    gate = threading.Event()
    gate.set()
    p1 = ToyProver(gate=gate)
    d1, addr = start(tmp_path, p1)
    with D.Client(addr, timeout_s=60) as c:
        done = [c.submit("porep", 1, {"values": [v]}) for v in (1, 2)]
        assert all(c.await_proof(j).status == "done" for j in done)     # acknowledged as done
        gate.clear()
        p1.proving.clear()
        busy = c.submit("snap", 1, {"values": [3]})
        assert p1.proving.wait(10)
        queued = [c.submit("porep", 1, {"values": [v]}) for v in (4, 5, 6)]
        queued.append(c.submit("winning-post", 1, {"values": [7]}))
    threading.Timer(0.3, gate.set).start()
    handed = d1.stop(drain=False)
    assert handed and set(handed) <= set(queued)
    assert d1.service.journal.counts()["pending"] == len(handed)

    p2 = ToyProver()
    d2, addr2 = start(tmp_path, p2)
    try:
        assert sorted(d2.service.resumed) == sorted(handed)
        with D.Client(addr2, timeout_s=60) as c:
            values = dict(zip(done + [busy] + queued, [1, 2, 3, 4, 5, 6, 7]))
            for jid, v in values.items():
                r = c.await_proof(jid)
                topo = {3: "snap-t", 7: "winning-t"}.get(v, "porep-t")
                assert r.status == "done" and r.proof == toy_proof(topo, v), (jid, r)
            proved_again = {v for _, vals, _, _ in p2.batches for v in vals}
            assert proved_again == {values[j] for j in handed}          # only the handed-back
            assert c.status()["journal"] == {"pending": 0, "results": 7}
    finally:
        d2.stop()


def test_journal_recovers_from_a_crash(tmp_path):
    j = D.Journal(str(tmp_path))
    j.add_job({"job_id": "b", "kind": "porep", "sector_size": 1, "inputs": {"values": [2]},
               "priority": 1, "submitted": 2.0})
    j.add_job({"job_id": "a", "kind": "porep", "sector_size": 1, "inputs": {"values": [1]},
               "priority": 1, "submitted": 1.0})
    j.add_job({"job_id": "c", "kind": "porep", "sector_size": 1, "inputs": {"values": [3]},
               "priority": 1, "submitted": 3.0})
    j.add_job({"job_id": "gone", "kind": "retired-kind", "sector_size": 1, "inputs": {},
               "priority": 1, "submitted": 4.0})
    # c finished and its result was written, then the process died before dropping the job
    res = E.JobResult("c", "porep", 1, "done", b"\x01" * 192, [[3]], None, {"total": 1.0})
    atomic.write_bytes(os.path.join(j.results_dir, "c.json"), json.dumps(res.to_json()).encode())
    (tmp_path / "jobs" / ".d.json.tmp-1234").write_text("{partial")     # a torn temporary
    assert [r["job_id"] for r in j.pending()] == ["a", "b", "gone"]
    assert not j.has_job("c") and j.result("c") == res
    # a daemon on this state resubmits a and b, and answers c from the journal
    d = D.Service(D.DaemonConfig(state_dir=str(tmp_path)), toy_registry(), ToyProver(),
                  devices=jax.devices()[:1]).start()
    try:
        assert d.resumed == ["a", "b"]
        gone = d.AwaitProof({"job_id": "gone"})
        assert gone["status"] == "failed" and "unknown proof kind" in gone["error"]
        assert "gone" not in [r["job_id"] for r in j.pending()]
        assert d.AwaitProof({"job_id": "c"})["status"] == "done"
        assert E.JobResult.from_json(d.AwaitProof({"job_id": "b"})).proof == \
            toy_proof("porep-t", 2)
    finally:
        d.engine.shutdown()


def test_config_file_and_overrides(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text('[daemon]\nlisten = "127.0.0.1:7000"\nstate_dir = "s"\n'
                    '[scheduler]\nmax_batch_size = 4\nmax_batch_wait_ms = 250\n'
                    '[memory]\nbudget_bytes = 1000\n')
    cfg = D.load_config(str(toml), max_batch_size=2, keys_dir=None)
    assert (cfg.listen, cfg.max_batch_size, cfg.budget_bytes) == ("127.0.0.1:7000", 2, 1000)
    ec = cfg.engine_config()
    assert ec.max_batch_wait_s == 0.25 and ec.verify is True
    js = tmp_path / "c.json"
    js.write_text(json.dumps({"verify": False, "devices": 1}))
    assert D.load_config(str(js)).engine_config().verify is False
    js.write_text(json.dumps({"max_batch": 3}))
    with pytest.raises(ValueError, match="unknown keys.*max_batch"):
        D.load_config(str(js))
    js.write_text(json.dumps({"max_batch_size": "3"}))
    with pytest.raises(ValueError, match="max_batch_size"):
        D.load_config(str(js))


def _sigterm_to_a_worker_thread(pid: int):
    """SIGTERM to one of the process's threads other than the main one
    (the kernel may deliver a process's signal to any thread)."""
    import ctypes
    tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
    assert tids, "serve runs no threads besides the main one"
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.syscall(234, pid, tids[-1], signal.SIGTERM) == 0     # tgkill (x86-64)


@pytest.mark.parametrize("to_thread", [False, pytest.param(True, marks=pytest.mark.skipif(
    not (sys.platform == "linux" and os.uname().machine == "x86_64"), reason="tgkill: x86-64 Linux"))])
def test_serve_process_answers_and_stops_on_sigterm(tmp_path, to_thread):
    cfg = tmp_path / "serve.json"
    cfg.write_text(json.dumps({"state_dir": str(tmp_path / "state"), "max_batch_size": 2}))
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAXPROVE_CACHE=str(tmp_path / "xla"))
    proc = subprocess.Popen([sys.executable, "-m", "jaxprove", "serve", f"--config={cfg}",
                             "--listen=127.0.0.1:0", "--budget_bytes=12345"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = ""
        deadline = time.time() + 120
        while "listening on port" not in line and time.time() < deadline:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "serve exited early"
        port = int(line.split("listening on port ")[1].split()[0])
        with D.Client(f"127.0.0.1:{port}", timeout_s=30) as c:
            st = c.status()
            assert st["budget_bytes"] == 12345 and st["jobs"]["done"] == 0
            assert "jaxprove_workers 1" in c.metrics()
        if to_thread:
            _sigterm_to_a_worker_thread(proc.pid)
        else:
            proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            pytest.fail(f"serve did not stop within 60 s of SIGTERM; it printed:\n{out}")
        assert proc.returncode == 0 and "stopped" in out, out
    finally:
        if proc.poll() is None:
            proc.kill()


def test_client_script(tmp_path):
    d, addr = start(tmp_path, ToyProver())
    script = os.path.join(ROOT, "scripts", "client.py")
    inputs = tmp_path / "in.json"
    inputs.write_text(json.dumps({"values": [41, 42]}))

    def run(*args):
        p = subprocess.run([sys.executable, script, f"--address={addr}", *args], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout

    try:
        rc, out = run("submit", "--kind=porep", "--sector_size=1", f"--inputs={inputs}",
                      "--priority=HIGH")
        assert rc == 0
        job = out.strip()
        rc, out = run("await", job, f"--out={tmp_path / 'p.bin'}")
        assert rc == 0 and json.loads(out)["status"] == "done"
        assert (tmp_path / "p.bin").read_bytes() == toy_proof("porep-t", 41) + \
            toy_proof("porep-t", 42)
        rc, out = run("status")
        assert rc == 0 and json.loads(out)["jobs"]["done"] == 1
        rc, out = run("metrics")
        assert rc == 0 and "jaxprove_jobs_submitted_total" in out
        rc, out = run("cancel", job)
        assert rc == 0 and json.loads(out)["cancelled"] is False
        assert run("await")[0] == 2
    finally:
        d.stop()


def test_preload_without_key_too_large_and_internal_errors(tmp_path):
    class Keyless(ToyProver):
        def load(self, spec, device):
            if spec.topology == "snap-t":
                raise LookupError("no proving key 'snap-t' in key store")
            if spec.topology == "window-t":
                raise RuntimeError("device fell over")
            if spec.topology == "winning-t":
                raise MemoryError("circuit winning-t needs at least 9.0 GiB of device memory")
            return super().load(spec, device)

    d, addr = start(tmp_path, Keyless())
    try:
        with D.Client(addr, timeout_s=60) as c:
            for kind, code, text in (("snap", "FAILED_PRECONDITION", "no proving key"),
                                     ("window-post", "INTERNAL", "device fell over"),
                                     ("winning-post", "RESOURCE_EXHAUSTED", "9.0 GiB")):
                with pytest.raises(grpc.RpcError) as err:
                    c.preload(kind, 1)
                assert err.value.code() == getattr(grpc.StatusCode, code)
                assert text in err.value.details()
            # a job of a kind whose key is missing fails; the server and other kinds go on
            r = c.await_proof(c.submit("snap", 1, {"values": [1]}))
            assert r.status == "failed" and "no proving key" in r.error
            assert c.prove("porep", 1, {"values": [2]}).proof == toy_proof("porep-t", 2)
    finally:
        d.stop()


def test_serve_help_lists_every_setting():
    """``python3 -m jaxprove serve --help`` shows every configuration key as a
    flag with what it means (not only under --helpfull)."""
    out = subprocess.run([sys.executable, "-m", "jaxprove", "serve", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120).stdout
    for f in dataclasses.fields(D.DaemonConfig):
        assert f"--{f.name}:" in out or f"--[no]{f.name}:" in out, f.name
        first = D.DaemonConfig.HELP[f.name].split()[:3]
        assert " ".join(first) in " ".join(out.split()), f.name
    assert "--config:" in out
