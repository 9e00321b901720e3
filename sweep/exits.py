"""The command line's exit codes and `UsageError`, apart from everything else, so that `sweep.cli` can
start (and `sweep report` on unchanged data answer) without importing Optuna, pandas or the store.
"""

from __future__ import annotations

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """Bad input that is not in the grid file (flags, store). One line for stderr."""


class StoreUnreachable(Exception):
    """The database store stayed out of reach past the outage bound (sweep/store/outage.py). One line for
    stderr, its password masked.
    """


# A worker's own exit codes (sweep/run/worker.py), read by the coordinator and the Slurm script.
EXIT_NEEDS_MORE_DEVICES = 3  # a queued run needs more replicas than this process set up
EXIT_UNREADABLE = 2  # the queue holds runs written by a newer version
EXIT_RECYCLE = 4  # memory grew past the bound, or another replica count: start a fresh worker
EXIT_DISK_FULL = 5  # the store cannot be written: stop, the coordinator says what to do
EXIT_ORPHANED = 6  # the coordinator that started this worker died before it could watch it: nothing claimed
EXIT_STORE_UNREACHABLE = 7  # the database stayed out of reach past the outage bound: its runs stay RUNNING
