"""Where `--storage` points: the flag, an `@FILE` holding it, or $BATCHSWEEP_STORAGE, read and checked before
any store is opened (a password need not be on a command line; a form that is no store is refused).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sweep.exits import UsageError


def storage_arg(value: str | None) -> str | None:
    """--storage, `@file` holding it, or $BATCHSWEEP_STORAGE: a password need not be on a command line."""
    from sweep.store import STORAGE_ENV

    value = value if value is not None else os.environ.get(STORAGE_ENV)
    if value and value.startswith("@"):
        path = Path(value[1:]).expanduser()
        try:
            text = path.read_text(encoding="utf-8").strip()
        except OSError as err:
            raise UsageError(f"--storage {value}: cannot read {path}: {err.strerror}") from None
        if not text:  # not a silent fall back to a local journal: each node would train every run alone
            raise UsageError(f"--storage {value}: {path} is empty; write the store's URL in it")
        check_private(value, path, text)
        value = text
    if value and _DSN.match(value):
        from sweep.store import redact

        raise UsageError(
            redact(f"--storage {value}: a libpq key=value string is not a store URL", value)
            + "; give it as postgresql://USER:PASSWORD@HOST:PORT/DBNAME (or ?host=/socket/folder for a socket)"
        )
    return value or None


def check_private(value: str, path: Path, text: str) -> None:
    """An @file holding a password must be readable by its owner only, as libpq demands of ~/.pgpass.
    Whether it holds one is the store's own parse of the URL (a password with a space is one).
    """
    from sweep.store.secrets import has_password

    mode = path.stat().st_mode & 0o777
    if mode & 0o077 and has_password(text):
        raise UsageError(
            f"--storage {value}: {path} holds a password and is readable by others (mode {mode:o}); "
            f"run: chmod 600 {path}"
        )


# A libpq connection string (`host=h dbname=d ...`): taken as a file name it would start a local journal
_DSN = re.compile(r"^\s*(host|hostaddr|dbname|user|port|password|service)\s*=", re.IGNORECASE)
