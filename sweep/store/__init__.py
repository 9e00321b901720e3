"""The results store: one object, `Store`, that the orchestrator, the workers and the tests hold.

It opens the sweep's Optuna study once and each learning-rate search's study once, and
offers the queue (enqueue, claim, record, finish, requeue, retry), crash detection, the
search lifecycle and the tables. The modules behind it, one job each:

- `sweep_store`: `Store` itself, each of its operations handed to the module below that does it;
- `storage`: opening a journal file or a database, the store-format version;
- `journal`: a journal file recognised, repaired of lines that are no record, or only read;
- `queue`: statuses, attempts, atomic leases, records, the retry policy;
- `crash`: attempts whose worker died, found and queued again;
- `search`: learning-rate searches, their slots and best learning rates;
- `params`: the settings that vary in the sweep, as Optuna params of its trials;
- `tables`: runs.csv, epochs.csv and counts;
- `secrets`: passwords masked in anything that may show a storage URL;
- `outage`: database outages ridden out: calls tried again with backoff up to a bound, the heartbeat grace;
- `internals`: the only code that touches Optuna's private API.

This module only re-exports `Store` and the names its users need.
"""

from __future__ import annotations

from sweep.store.crash import Dead
from sweep.store.queue import DEFAULT_POLICY, Lease, RetryPolicy, epochs_of, latest_by_run, status_of
from sweep.store.search import Search
from sweep.store.secrets import redact
from sweep.store.storage import (
    DISK_FULL_ADVICE,
    FORMAT_ATTR,
    STORAGE_ENV,
    STORE_FORMAT,
    VERSION_ATTR,
    NewerStoreError,
    is_disk_full,
)
from sweep.store.sweep_store import Store

__all__ = [
    "DISK_FULL_ADVICE",
    "FORMAT_ATTR",
    "STORAGE_ENV",
    "STORE_FORMAT",
    "VERSION_ATTR",
    "DEFAULT_POLICY",
    "Lease",
    "Dead",
    "NewerStoreError",
    "RetryPolicy",
    "Search",
    "Store",
    "epochs_of",
    "is_disk_full",
    "latest_by_run",
    "redact",
    "status_of",
]
