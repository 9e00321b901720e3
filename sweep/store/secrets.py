"""Masking passwords in anything that may show a storage target: console lines, errors, logs, CSVs.

A URL's password is found by parsing the URL as the store itself does (SQLAlchemy's `make_url`, which
hands the database driver its password), never by a pattern that guesses where it ends: every
character the parse accepts is the password's, spaces, ``#``, ``%``, ``/``, ``:`` and a second ``@``
included (``u:Pw@Zq@host`` reaches the driver as password ``Pw`` and host ``Zq@host``, so the text
up to the last ``@`` of the host is masked as the password's). The same parse decides whether a
target holds a password at all (`has_password`): for the Slurm script and the ``@file`` permission
check. Other forms: a ``NAME=value`` pair whose name contains ``password`` (``password``,
``sslpassword``, ``PGPASSWORD``; or ``passwd``, ``pwd``) in a URL's query or a libpq key=value
string, quoted or not, masked whole up to the next ``&`` or blank; and pieces of the password echoed
by a database driver's error (``failed to resolve host 'secret@127.0.0.1'``).

`redact` masks the pattern forms wherever they appear. Given the target, it also masks the target's
password (raw, percent-decoded and percent-encoded) and every longer piece of it (cut at any
character but a letter or digit, or only at a URL's delimiters) wherever they appear; a password or
piece shorter than SHORTEST_PIECE is masked only in the URL and pair forms, since masking ``1``
everywhere would turn ``epoch 1`` into ``epoch ***``.
"""

from __future__ import annotations

import functools
import re
from typing import Any
from urllib.parse import quote, quote_plus, unquote

MASK = "***"
# scheme://user: ... @  -- for text without a target: up to the last @ of the token
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][\w+.-]*://[^:/@\s?#]*:)[^\s]*@")
_PAIR = re.compile(
    r"(?P<key>\b\w*(?:password|passwd)\w*|\bpwd)(?P<eq>\s*=\s*)(?P<value>'[^']*'|\"[^\"]*\"|[^&\s]*)", re.IGNORECASE
)
_SECRET_KEY = re.compile(r"password|passwd|^pwd$", re.IGNORECASE)  # a query parameter that holds a password
# A URL's scheme and user, as SQLAlchemy reads them: the password starts after the user's ':'
_HEAD = re.compile(r"[\w+]+://[^:/]*:")
SHORTEST_PIECE = 4  # pieces of a password shorter than this are too common to mask everywhere
# Where an echoed password may be cut into pieces: at any character but a letter or digit, or only at
# those a URL parser cuts at (`user:Pw-1@Zq-2@host` reaches the driver as host `Zq-2@host`, which it echoes)
_PIECE_CUTS = (re.compile(r"[^A-Za-z0-9]+"), re.compile(r"[@:/?#\[\]&=,;\s]+"))


def redact(text: str, target: str | None = None) -> str:
    """`text` with every password masked; with `target` (a storage URL or connection string),
    also every occurrence of its password or a piece of it.
    """
    userinfo, secrets = _masks(target) if target else ((), ())
    for raw in userinfo:  # the target's own URL form, whatever the password's length
        text = text.replace(f":{raw}@", f":{MASK}@")
    for secret in secrets:
        text = text.replace(secret, MASK)
    text = _USERINFO.sub(lambda m: m["head"] + MASK + "@", text)
    return _PAIR.sub(lambda m: m["key"] + m["eq"] + MASK, text)


@functools.lru_cache(maxsize=64)
def _masks(target: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What `redact` replaces for a target, longest first (parsed once: every console line is redacted)."""
    return tuple(_userinfo_passwords(target)), tuple(sorted(secrets_of(target), key=len, reverse=True))


def has_password(target: str) -> bool:
    """Whether a storage target holds a password, of any length: in a URL's userinfo or query (as the
    store's own parse reads it), or as a password pair of a connection string.
    """
    return bool(_passwords(target))


def secrets_of(target: str) -> set[str]:
    """The passwords a storage target holds, raw, percent-decoded and percent-encoded, and their longer
    pieces.
    """
    secrets = {form for raw in _passwords(target) for form in (raw, unquote(raw), quote(raw, safe=""), quote_plus(raw))}
    pieces = {p for s in secrets for cut in _PIECE_CUTS for p in cut.split(s) if len(p) >= SHORTEST_PIECE}
    return {s for s in secrets | pieces if s != MASK and len(s) >= SHORTEST_PIECE}


def _passwords(target: str) -> list[str]:
    """Every password text of a target: its userinfo's, its query's and its pairs', as written."""
    found = _userinfo_passwords(target) + _query_passwords(target)
    found += [m["value"].strip("'\"") for m in _PAIR.finditer(target)]
    return [raw for raw in found if raw]


def _userinfo_passwords(target: str) -> list[str]:
    """The userinfo password of a URL, as written in it and as the driver gets it (percent-decoded).

    SQLAlchemy ends the password at the first ``@`` and takes the rest, up to ``/``, ``:`` or ``?``,
    for the host; a host that holds an ``@`` is the password's tail, so it is masked with it.
    """
    url, head = _parsed(target), _HEAD.match(target)
    if url is None:  # SQLAlchemy cannot read it (a port that is no number): the pattern's guess
        return [m.group(0)[len(m["head"]) : -1] for m in _USERINFO.finditer(target)]
    if url.password is None or head is None:
        return []
    rest = target[head.end() :]
    first_at = rest.find("@")
    host = re.match(r"[^/:?]*", rest[first_at + 1 :])
    tail = host.group() if host else ""
    end = first_at + 1 + tail.rfind("@") if "@" in tail else first_at
    return [rest[:end], rest[:first_at], str(url.password)]


def _query_passwords(target: str) -> list[str]:
    url = _parsed(target)
    if url is None:
        return []
    values = [url.query[key] for key in url.query if _SECRET_KEY.search(key)]
    return [v for value in values for v in ([value] if isinstance(value, str) else value)]


def _parsed(target: str) -> Any:
    """The target parsed as the store parses a database URL (SQLAlchemy's `make_url`); None for a journal
    path, a connection string or text SQLAlchemy cannot read.
    """
    if "://" not in target:
        return None
    from sqlalchemy.engine import make_url

    try:
        return make_url(target)
    except Exception:  # noqa: BLE001 - an unreadable URL is no store; the patterns above still mask it
        return None
