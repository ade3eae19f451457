"""``python3 -m jaxprove serve [flags]``: the proving daemon (``jaxprove.daemon``)."""
import sys

from absl import app, flags

from jaxprove import daemon

if __name__ == "__main__":
    daemon.define_flags()
    flags.adopt_module_key_flags(daemon)      # --help lists them
    app.run(lambda argv: sys.exit(daemon.main(argv)))
