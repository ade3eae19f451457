"""Command-line client of ``jaxprove serve`` (``jaxprove.daemon.Client``).

    python3 scripts/client.py [--address 127.0.0.1:9820] VERB [ARG] [flags]

VERB: submit (--kind, --sector_size, --inputs FILE.json, [--priority],
[--request_id]) prints the job id; await JOB [--timeout_s] and prove (as
submit) print the result as JSON (proof in base64) and with --out write the
proof bytes; cancel JOB; status; metrics (Prometheus text); preload
(--kind, --sector_size); evict [--topology].  Exit status 1 when a proof
job ends other than done, 2 on usage errors.
"""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

FLAGS = flags.FLAGS


def define_flags():
    """Defined when run as a script only, so importing this module defines no flags."""
    flags.DEFINE_string("address", "127.0.0.1:9820", "daemon address host:port")
    flags.DEFINE_string("kind", None, "proof kind")
    flags.DEFINE_integer("sector_size", None, "sector size")
    flags.DEFINE_string("inputs", None, "JSON file with the job's inputs")
    flags.DEFINE_string("priority", None, "LOW, NORMAL, HIGH or CRITICAL")
    flags.DEFINE_string("request_id", None, "job id to use (retries return the same job)")
    flags.DEFINE_float("timeout_s", None, "await: return the status after this long")
    flags.DEFINE_string("out", None, "await/prove: write the proof bytes here")
    flags.DEFINE_string("topology", None, "evict: only this topology")

VERBS = ("submit", "await", "prove", "cancel", "status", "metrics", "preload", "evict")


def _result(r) -> int:
    print(json.dumps(r.to_json(), indent=1))
    if FLAGS.out and r.status == "done":
        with open(FLAGS.out, "wb") as f:
            f.write(r.proof)
    return 0 if r.status == "done" else 1


def main(argv) -> int:
    from jaxprove.daemon import Client
    if len(argv) < 2 or argv[1] not in VERBS:
        print(f"usage: client.py VERB [ARG]; VERB one of {', '.join(VERBS)}", file=sys.stderr)
        return 2
    verb, args = argv[1], argv[2:]
    needs_job = verb in ("await", "cancel")
    if needs_job and len(args) != 1:
        print(f"{verb}: give the job id", file=sys.stderr)
        return 2
    with Client(FLAGS.address) as c:
        if verb in ("submit", "prove"):
            if not (FLAGS.kind and FLAGS.sector_size is not None and FLAGS.inputs):
                print(f"{verb}: --kind, --sector_size and --inputs are required", file=sys.stderr)
                return 2
            with open(FLAGS.inputs) as f:
                inputs = json.load(f)
            if verb == "submit":
                print(c.submit(FLAGS.kind, FLAGS.sector_size, inputs, FLAGS.priority,
                               FLAGS.request_id))
                return 0
            return _result(c.prove(FLAGS.kind, FLAGS.sector_size, inputs, FLAGS.priority,
                                   FLAGS.request_id))
        if verb == "await":
            return _result(c.await_proof(args[0], FLAGS.timeout_s))
        if verb == "cancel":
            print(json.dumps({"job_id": args[0], "cancelled": c.cancel(args[0])}))
        elif verb == "status":
            print(json.dumps(c.status(), indent=1))
        elif verb == "metrics":
            sys.stdout.write(c.metrics())
        elif verb == "preload":
            print(json.dumps(c.preload(FLAGS.kind, FLAGS.sector_size), indent=1))
        elif verb == "evict":
            print(json.dumps(c.evict(FLAGS.topology)))
    return 0


if __name__ == "__main__":
    define_flags()
    app.run(lambda argv: sys.exit(main(argv)))
