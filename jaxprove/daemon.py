"""``jaxprove serve``: the proving engine (``jaxprove.engine``) as a gRPC
service with cuzk's verbs, a durable job journal, and a client.

**Wire format** (no protoc step).  Service ``jaxprove.v1.ProvingEngine``,
unary methods ``/jaxprove.v1.ProvingEngine/<Verb>``; every request and
response is one UTF-8 JSON object (the message bytes):

=============  ===================================================  ==================================
Verb           request                                              response
=============  ===================================================  ==================================
SubmitProof    {kind, sector_size, inputs, priority?, request_id?}  {job_id, queue_position}
AwaitProof     {job_id, timeout_ms?}                                a result (below)
Prove          SubmitProof's fields + timeout_ms?                   a result
CancelProof    {job_id}                                             {job_id, cancelled}
GetStatus      {}                                                   engine status + journal counts
GetMetrics     {}                                                   {text}: Prometheus exposition
PreloadKeys    {kind, sector_size}                                  {resident: [...]}
EvictKeys      {topology?} (absent: every idle entry)               {evicted: [[worker, topology]]}
=============  ===================================================  ==================================

queue_position: work items ahead of the job's first one (null once it runs).
A result is {job_id, kind, sector_size, status, proof, public, error,
timings}: status one of queued, running, done, failed, cancelled (AwaitProof
returns an unfinished one when ``timeout_ms`` passes); proof the
partitions' 192-byte Groth16 proofs concatenated, base64; public the public
inputs per partition (decimal integers); timings in seconds per stage.
``priority``: LOW, NORMAL, HIGH, CRITICAL (or 0–3; default: the kind's).
``request_id`` (letters, digits, ``_.-``, ≤ 64) becomes the job id, and a
repeated SubmitProof with it returns the same job (safe retries).  Errors
are gRPC status codes with a message: INVALID_ARGUMENT (bad JSON, unknown
kind, bad priority or id), NOT_FOUND (unknown job), UNAVAILABLE (shutting
down), FAILED_PRECONDITION (PreloadKeys without a proving key),
RESOURCE_EXHAUSTED (PreloadKeys of a circuit the device cannot hold in the
configured memory mode: the message names the mode that fits), INTERNAL.

**Journal** (``state_dir``): a job is written to ``jobs/<id>.json`` before
SubmitProof acknowledges it; a finished job's result is written to
``results/<id>.json`` before anyone can see it finished (the engine's
``on_finished``), then its job file is removed.  Every file is written to
a temporary name, fsync'd and renamed, so a crash leaves whole files.  On
start, jobs without a result are submitted again (in submission order) and
old results answer AwaitProof: no job acknowledged as submitted or as done is
lost across a restart.  Shutdown (SIGTERM/SIGINT, or ``Daemon.stop``)
stops taking RPCs, then drains the queue (``drain_on_shutdown``) or hands
the queued jobs back to the journal for the next start.

**Configuration**: a JSON or TOML file (flat keys, or grouped in tables whose
keys are merged) with the fields of ``DaemonConfig``; command-line flags
override it; ``registry`` picks the proof kinds ("builtin": the examples,
"filecoin": also WinningPoSt, WindowPoSt, PoRep and SnapDeals at every sector
size, ``jaxprove.filecoin_kinds``).  ``grpc`` is imported only when a server
or client is made.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import secrets
import threading
import time

from jaxprove import atomic, modes
from jaxprove import engine as E

SERVICE = "jaxprove.v1.ProvingEngine"
VERBS = ("SubmitProof", "AwaitProof", "Prove", "CancelProof", "GetStatus", "GetMetrics",
         "PreloadKeys", "EvictKeys")
_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")

log = logging.getLogger(__name__)


# ---------------------------------------------------------------- configuration
@dataclasses.dataclass(frozen=True)
class DaemonConfig:
    listen: str = "127.0.0.1:9820"
    state_dir: str = "jaxprove-state"
    keys_dir: str | None = None
    pce_dir: str | None = None
    setup_on_first_use: bool = False          # tests only
    setup_seed: int | None = None             # tests only: a seeded setup is insecure
    max_batch_size: int = 1
    max_batch_wait_ms: float = 0.0
    budget_bytes: int | None = None
    msm_budget_bytes: int | None = None
    out_of_core_bytes: int | None = None      # the 16 GB mode: a, b, c and h out of core
    host_witness: bool = True                 # the 16 GB mode's witnesses in host memory
    pinned_key: bool = False                  # host keys in pinned host memory
    memory_mode: str = "auto"                 # per circuit, or one of modes.MODES for all
    verify: bool = True
    lookahead: int = 1
    devices: int | None = None                # use the first N local devices (None: all)
    drain_on_shutdown: bool = True
    rpc_threads: int = 32
    max_message_bytes: int = 1 << 30          # PoRep C1 inputs are ~50–200 MB
    registry: str = "builtin"                 # "filecoin": also the Filecoin kinds (filecoin_kinds)

    HELP = {
        "listen": "address to serve gRPC on (host:port; port 0 picks a free one)",
        "state_dir": "directory of the job journal (jobs and results survive restarts)",
        "keys_dir": "key store: Groth16 keys by topology (scripts/setup.py writes them)",
        "pce_dir": "where extracted PCE matrices are stored and reloaded (default: extract "
                   "in memory at each start)",
        "setup_on_first_use": "run an insecure setup when a key is missing (tests only)",
        "setup_seed": "seed of that setup (tests only)",
        "max_batch_size": "most partitions of one circuit proved together (vmap)",
        "max_batch_wait_ms": "how long a partial batch of PoRep/SnapDeals work may wait to "
                             "fill (PoSt work never waits)",
        "budget_bytes": "device bytes of resident keys, matrices and programs per device; the "
                        "least recently used are evicted (default: unbounded)",
        "msm_budget_bytes": "streaming mode: proving keys in host memory, each MSM in chunks "
                            "within this many device bytes",
        "out_of_core_bytes": "the 16 GB mode: keys and matrices in host memory, A·w, B·w, C·w "
                             "and h out of core within this many device bytes",
        "host_witness": "the 16 GB mode: each witness waits in host memory and h is computed "
                        "on the device (hypothesis 83: 11.3 -> 7.6 s a 32GiB PoRep partition "
                        "on an H100); false keeps every witness on the device",
        "pinned_key": "streaming and the 16 GB mode: the proving keys' host vectors in pinned "
                      "host memory (page-locked: ~47 GB for a 32GiB PoRep partition), so the "
                      "MSMs put them at the link's rate (hypothesis 84: msm_h 2.52 -> 2.22 s "
                      "on an H100)",
        "memory_mode": "auto: each circuit in the fastest mode that fits the device and "
                       "budget_bytes (resident, streaming, the 16 GB mode; a budget above "
                       "names the mode instead), or resident, streaming, out-of-core for all",
        "verify": "verify every proof before returning it",
        "lookahead": "batches whose witnesses the host builds ahead of the device",
        "devices": "use the first N local devices, one worker each (default: all)",
        "drain_on_shutdown": "on SIGTERM finish the queued jobs (else hand them back to the "
                             "journal for the next start)",
        "rpc_threads": "gRPC server threads",
        "max_message_bytes": "largest gRPC message (PoRep C1 inputs are ~50-200 MB)",
        "registry": "proof kinds: builtin (examples) or filecoin (also WinningPoSt, "
                    "WindowPoSt, PoRep, SnapDeals at every sector size)",
    }

    def engine_config(self) -> E.EngineConfig:
        return E.EngineConfig(max_batch_size=self.max_batch_size,
                              max_batch_wait_s=self.max_batch_wait_ms / 1000.0,
                              budget_bytes=self.budget_bytes,
                              msm_budget_bytes=self.msm_budget_bytes, verify=self.verify,
                              lookahead=self.lookahead)


def load_config(path: str | None = None, **overrides) -> DaemonConfig:
    """DaemonConfig from a .json or .toml file (tables are merged into one
    namespace), then ``overrides``; ValueError names unknown or mistyped keys."""
    values = {}
    if path:
        with open(path, "rb") as f:
            raw = f.read()
        if path.endswith(".toml"):
            import tomllib
            data = tomllib.loads(raw.decode())
        else:
            data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError(f"config {path}: expected a table/object at the top")
        for k, v in data.items():
            values.update(v if isinstance(v, dict) else {k: v})
    values.update({k: v for k, v in overrides.items() if v is not None})
    fields = {f.name: f for f in dataclasses.fields(DaemonConfig)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"config: unknown keys {unknown}; known: {sorted(fields)}")
    for k, v in values.items():
        want = fields[k].type
        ok = (v is None and "None" in want) or (
            ("bool" in want and isinstance(v, bool))
            or ("int" in want and isinstance(v, int) and not isinstance(v, bool))
            or ("float" in want and isinstance(v, (int, float)) and not isinstance(v, bool))
            or ("str" in want and isinstance(v, str)))
        if not ok:
            raise ValueError(f"config: {k} = {v!r} is not of type {want}")
    if values.get("memory_mode", "auto") not in modes.MEMORY_MODES:
        raise ValueError(f"config: memory_mode = {values['memory_mode']!r}; choose from "
                         f"{modes.MEMORY_MODES}")
    return DaemonConfig(**values)


# ---------------------------------------------------------------- journal
class Journal:
    """Accepted jobs and finished results under ``state_dir`` (see the module
    docstring)."""

    def __init__(self, state_dir: str):
        self.jobs_dir = os.path.join(state_dir, "jobs")
        self.results_dir = os.path.join(state_dir, "results")
        os.makedirs(self.jobs_dir, exist_ok=True)
        os.makedirs(self.results_dir, exist_ok=True)

    def add_job(self, record: dict) -> None:
        atomic.write_bytes(os.path.join(self.jobs_dir, record["job_id"] + ".json"),
                      json.dumps(record).encode())

    def drop_job(self, job_id: str) -> None:
        try:
            os.unlink(os.path.join(self.jobs_dir, job_id + ".json"))
        except FileNotFoundError:
            pass

    def add_result(self, result: E.JobResult) -> None:
        atomic.write_bytes(os.path.join(self.results_dir, result.job_id + ".json"),
                      json.dumps(result.to_json()).encode())
        self.drop_job(result.job_id)

    def result(self, job_id: str) -> E.JobResult | None:
        try:
            with open(os.path.join(self.results_dir, job_id + ".json")) as f:
                return E.JobResult.from_json(json.load(f))
        except FileNotFoundError:
            return None

    def has_job(self, job_id: str) -> bool:
        return os.path.exists(os.path.join(self.jobs_dir, job_id + ".json"))

    def pending(self) -> list[dict]:
        """Accepted jobs without a result, oldest first."""
        out = []
        for name in os.listdir(self.jobs_dir):
            if not name.endswith(".json") or name.startswith("."):
                continue
            job_id = name[:-5]
            if os.path.exists(os.path.join(self.results_dir, name)):
                self.drop_job(job_id)                 # finished just before a crash
                continue
            with open(os.path.join(self.jobs_dir, name)) as f:
                out.append(json.load(f))
        return sorted(out, key=lambda r: (r["submitted"], r["job_id"]))

    def counts(self) -> dict:
        return {"pending": sum(1 for n in os.listdir(self.jobs_dir) if n.endswith(".json")
                               and not n.startswith(".")),
                "results": sum(1 for n in os.listdir(self.results_dir) if n.endswith(".json")
                               and not n.startswith("."))}


# ---------------------------------------------------------------- service
class RequestError(Exception):
    """An RPC error: ``code`` is a grpc.StatusCode name."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class Service:
    """The verbs over an engine and a journal, as plain functions of JSON
    dicts (the gRPC layer only encodes, decodes and maps errors)."""

    def __init__(self, config: DaemonConfig, registry: E.Registry | None = None,
                 prover: E.Prover | None = None, devices=None):
        import jax
        self.config = config
        self.journal = Journal(config.state_dir)
        if registry is None and config.registry != "builtin":
            from jaxprove.filecoin_kinds import named_registry
            registry = named_registry(config.registry)
        self.registry = registry if registry is not None else E.builtin_registry()
        if prover is None:
            prover = E.Groth16Prover.from_settings(
                config.keys_dir, config.pce_dir, config.setup_on_first_use, config.setup_seed,
                config.memory_mode, config.msm_budget_bytes, config.out_of_core_bytes,
                config.budget_bytes, config.host_witness, config.pinned_key)
        if devices is None:
            devices = jax.local_devices()[:config.devices] if config.devices else None
        self.engine = E.Engine(self.registry, config.engine_config(), prover, devices,
                               on_finished=self.journal.add_result)
        self._submit_lock = threading.Lock()
        self.resumed = []
        for rec in self.journal.pending():
            try:
                self.engine.submit(rec["kind"], rec["sector_size"], rec["inputs"],
                                   rec["priority"], job_id=rec["job_id"])
                self.resumed.append(rec["job_id"])
            except ValueError as e:                 # e.g. a kind no longer registered
                self.journal.add_result(E.JobResult(rec["job_id"], rec["kind"],
                                                    rec["sector_size"], "failed", b"", [],
                                                    f"not resumed after a restart: {e}", {}))
        if self.resumed:
            log.info("resumed %d journaled jobs", len(self.resumed))

    def start(self):
        self.engine.start()
        return self

    # ------------------------------------------------------------ verbs
    def SubmitProof(self, req: dict) -> dict:
        kind, size, inputs = req.get("kind"), req.get("sector_size"), req.get("inputs")
        if not isinstance(kind, str) or not isinstance(size, int) or inputs is None:
            raise RequestError("INVALID_ARGUMENT", "SubmitProof needs kind (string), "
                               "sector_size (integer) and inputs")
        try:
            spec = self.registry.get(kind, size)
            prio = spec.priority if req.get("priority") is None \
                else E.parse_priority(req["priority"])
        except ValueError as e:
            raise RequestError("INVALID_ARGUMENT", str(e)) from None
        job_id = req.get("request_id") or secrets.token_hex(8)
        if not isinstance(job_id, str) or not _ID.match(job_id):
            raise RequestError("INVALID_ARGUMENT", f"request_id {job_id!r}: 1–64 letters, "
                               f"digits, '_', '.', '-'")
        with self._submit_lock:
            if self._known(job_id):                      # a retried submission: same job
                return {"job_id": job_id, "queue_position": None}
            self.journal.add_job({"job_id": job_id, "kind": kind, "sector_size": size,
                                  "inputs": inputs, "priority": int(prio),
                                  "submitted": time.time()})
            try:
                self.engine.submit(kind, size, inputs, prio, job_id=job_id)
            except RuntimeError as e:
                self.journal.drop_job(job_id)
                raise RequestError("UNAVAILABLE", str(e)) from None
            except ValueError as e:
                self.journal.drop_job(job_id)
                raise RequestError("INVALID_ARGUMENT", str(e)) from None
        return {"job_id": job_id, "queue_position": self.engine.queue_position(job_id)}

    def _known(self, job_id: str) -> bool:
        try:
            self.engine.peek(job_id)
            return True
        except KeyError:
            return self.journal.result(job_id) is not None

    def AwaitProof(self, req: dict, is_active=lambda: True) -> dict:
        job_id = req.get("job_id")
        timeout = req.get("timeout_ms")
        if not isinstance(job_id, str):
            raise RequestError("INVALID_ARGUMENT", "AwaitProof needs job_id")
        deadline = None if timeout is None else time.monotonic() + float(timeout) / 1000.0
        while True:
            try:
                step = 0.5 if deadline is None else max(0.0, min(0.5, deadline - time.monotonic()))
                r = self.engine.wait(job_id, step)
            except KeyError:
                r = self.journal.result(job_id)
                if r is None:
                    raise RequestError("NOT_FOUND", f"unknown job id {job_id!r}") from None
            if r is not None:
                return r.to_json()
            if (deadline is not None and time.monotonic() >= deadline) or not is_active():
                return self.engine.peek(job_id).to_json()

    def Prove(self, req: dict, is_active=lambda: True) -> dict:
        job_id = self.SubmitProof(req)["job_id"]
        return self.AwaitProof({"job_id": job_id, "timeout_ms": req.get("timeout_ms")},
                               is_active)

    def CancelProof(self, req: dict) -> dict:
        job_id = req.get("job_id")
        try:
            return {"job_id": job_id, "cancelled": self.engine.cancel(job_id)}
        except KeyError:
            if isinstance(job_id, str) and self.journal.result(job_id) is not None:
                return {"job_id": job_id, "cancelled": False}
            raise RequestError("NOT_FOUND", f"unknown job id {job_id!r}") from None

    def GetStatus(self, req: dict) -> dict:
        st = self.engine.status()
        st["journal"] = self.journal.counts()
        st["listen"] = self.config.listen
        return st

    def GetMetrics(self, req: dict) -> dict:
        return {"text": self.engine.metrics()}

    def PreloadKeys(self, req: dict) -> dict:
        try:
            return {"resident": self.engine.preload(req.get("kind"), req.get("sector_size"))}
        except ValueError as e:
            raise RequestError("INVALID_ARGUMENT", str(e)) from None
        except LookupError as e:                       # no proving key in the store
            raise RequestError("FAILED_PRECONDITION", str(e)) from None
        except MemoryError as e:                       # the device cannot hold the circuit
            raise RequestError("RESOURCE_EXHAUSTED", str(e)) from None

    def EvictKeys(self, req: dict) -> dict:
        return {"evicted": [list(x) for x in self.engine.evict(req.get("topology"))]}


def _decode(data: bytes) -> dict:
    obj = json.loads(data.decode("utf-8")) if data else {}
    if not isinstance(obj, dict):
        raise ValueError("the message must be a JSON object")
    return obj


def _encode(obj: dict) -> bytes:
    return json.dumps(obj).encode("utf-8")


class Daemon:
    """The gRPC server around a ``Service``.  ``start()`` returns the bound
    port (``listen`` may end in ":0" for any free port)."""

    def __init__(self, config: DaemonConfig, registry=None, prover=None, devices=None):
        self.config = config
        self.service = Service(config, registry, prover, devices)
        self._server = None
        self.port = None

    def _handler(self, verb):
        import grpc
        fn = getattr(self.service, verb)
        blocking = verb in ("AwaitProof", "Prove")

        def call(data, context):
            try:
                req = _decode(data)
            except (ValueError, UnicodeDecodeError) as e:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{verb}: bad JSON request ({e})")
            try:
                resp = fn(req, context.is_active) if blocking else fn(req)
            except RequestError as e:
                context.abort(getattr(grpc.StatusCode, e.code), f"{verb}: {e}")
            except Exception as e:  # noqa: BLE001 - reported to the caller, the server lives on
                log.exception("%s failed", verb)
                context.abort(grpc.StatusCode.INTERNAL, f"{verb}: {type(e).__name__}: {e}")
            return _encode(resp)

        return grpc.unary_unary_rpc_method_handler(call)

    def start(self) -> int:
        import concurrent.futures

        import grpc
        self.service.start()
        n = self.config.max_message_bytes
        self._server = grpc.server(concurrent.futures.ThreadPoolExecutor(
            max_workers=self.config.rpc_threads, thread_name_prefix="jaxprove-rpc"),
            options=[("grpc.max_receive_message_length", n), ("grpc.max_send_message_length", n)])
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            SERVICE, {v: self._handler(v) for v in VERBS}),))
        self.port = self._server.add_insecure_port(self.config.listen)
        if not self.port:
            raise OSError(f"could not listen on {self.config.listen}")
        self._server.start()
        log.info("jaxprove serving %s on port %d", SERVICE, self.port)
        return self.port

    def stop(self, drain: bool | None = None, grace_s: float = 2.0) -> list[str]:
        """Stop taking RPCs (in-flight ones get ``grace_s``), then drain or
        hand back the queue; returns the handed-back job ids (still in the
        journal, resumed by the next start)."""
        drain = self.config.drain_on_shutdown if drain is None else drain
        handed = self.service.engine.shutdown(drain=drain)     # Await calls are served meanwhile
        if self._server is not None:
            self._server.stop(grace_s).wait()
        return handed

    def wait(self):
        self._server.wait_for_termination()


# ---------------------------------------------------------------- client
class Client:
    """A daemon client (the verbs as methods); grpc.RpcError on errors."""

    def __init__(self, address: str, timeout_s: float | None = None,
                 max_message_bytes: int = 1 << 30):
        import grpc
        n = max_message_bytes
        self._channel = grpc.insecure_channel(address, options=[
            ("grpc.max_receive_message_length", n), ("grpc.max_send_message_length", n)])
        self.timeout_s = timeout_s
        self._calls = {v: self._channel.unary_unary(f"/{SERVICE}/{v}", request_serializer=_encode,
                                                    response_deserializer=_decode)
                       for v in VERBS}

    def call(self, verb: str, req: dict | None = None, timeout_s: float | None = None) -> dict:
        return self._calls[verb](req or {}, timeout=timeout_s or self.timeout_s)

    def submit(self, kind, sector_size, inputs, priority=None, request_id=None) -> str:
        req = {"kind": kind, "sector_size": sector_size, "inputs": inputs}
        if priority is not None:
            req["priority"] = priority if isinstance(priority, (int, str)) else int(priority)
        if request_id is not None:
            req["request_id"] = request_id
        return self.call("SubmitProof", req)["job_id"]

    def await_proof(self, job_id: str, timeout_s: float | None = None) -> E.JobResult:
        req = {"job_id": job_id}
        if timeout_s is not None:
            req["timeout_ms"] = timeout_s * 1000.0
        return E.JobResult.from_json(self.call("AwaitProof", req,
                                               None if timeout_s is None else timeout_s + 30))

    def prove(self, kind, sector_size, inputs, priority=None, request_id=None) -> E.JobResult:
        req = {"kind": kind, "sector_size": sector_size, "inputs": inputs}
        if priority is not None:
            req["priority"] = priority
        if request_id is not None:
            req["request_id"] = request_id
        return E.JobResult.from_json(self.call("Prove", req))

    def cancel(self, job_id: str) -> bool:
        return self.call("CancelProof", {"job_id": job_id})["cancelled"]

    def status(self) -> dict:
        return self.call("GetStatus")

    def metrics(self) -> str:
        return self.call("GetMetrics")["text"]

    def preload(self, kind, sector_size) -> list:
        return self.call("PreloadKeys", {"kind": kind, "sector_size": sector_size})["resident"]

    def evict(self, topology: str | None = None) -> list:
        return self.call("EvictKeys", {} if topology is None else {"topology": topology})["evicted"]

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------- entry point
def define_flags():
    """The ``serve`` flags (defined by ``python3 -m jaxprove`` only, so
    importing this module defines none)."""
    from absl import flags
    flags.DEFINE_string("config", None, "JSON or TOML configuration file (keys: the flags "
                        "below); flags given override it")
    for f in dataclasses.fields(DaemonConfig):
        help_ = DaemonConfig.HELP[f.name] + ("" if f.default is None else
                                             f" (config default {f.default!r})")
        if "bool" in f.type:
            flags.DEFINE_bool(f.name, None, help_)
        elif "int" in f.type and "float" not in f.type:
            flags.DEFINE_integer(f.name, None, help_)
        elif "float" in f.type:
            flags.DEFINE_float(f.name, None, help_)
        else:
            flags.DEFINE_string(f.name, None, help_)


def serve(config: DaemonConfig) -> int:
    """Run the daemon until SIGTERM/SIGINT, then shut down gracefully."""
    import signal
    from jaxprove.cache import enable_compilation_cache
    enable_compilation_cache()
    # Handlers first, so a signal that comes as soon as the port is announced
    # is not lost.  The wait polls: Python runs a handler in the main thread,
    # and when the kernel hands the signal to another thread (grpc's, XLA's)
    # an untimed wait in the main thread would never wake to run it.
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    daemon = Daemon(config)
    port = daemon.start()
    print(f"jaxprove serve: listening on port {port} (state in {config.state_dir}; "
          f"resumed {len(daemon.service.resumed)} jobs)", flush=True)
    while not stop.wait(0.25):
        pass
    handed = daemon.stop()
    print(f"jaxprove serve: stopped; {len(handed)} queued jobs handed back to the journal",
          flush=True)
    return 0


def main(argv) -> int:
    from absl import flags
    FLAGS = flags.FLAGS
    if len(argv) < 2 or argv[1] != "serve":
        print("usage: python3 -m jaxprove serve [--config FILE] [--listen HOST:PORT] ...")
        return 2
    overrides = {f.name: getattr(FLAGS, f.name) for f in dataclasses.fields(DaemonConfig)}
    logging.basicConfig(level=logging.INFO)
    from jaxprove import memory
    memory.widen_pinned_pool()   # before the backend starts: XLA's cap, within the host's share
    return serve(load_config(FLAGS.config, **overrides))
