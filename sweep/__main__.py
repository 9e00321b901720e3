"""`python -m sweep` and the installed `sweep` script's entry: the command line (sweep/cli)."""

import os
import sys

from sweep.cli import main

code = main() or 0
if sys.argv[1:2] == ["worker"] and "keras" in sys.modules:
    # A worker has written and closed everything by now (the store's rows, its checkpoints, its events on
    # stdout); what is left is TensorFlow's teardown, 1-1.5 s per process, which the end of every sweep
    # would wait for. So a worker that trained leaves at once, its output flushed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
