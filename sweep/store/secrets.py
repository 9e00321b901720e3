"""Masking passwords in anything that may show a storage target: console lines, errors, logs, CSVs.

A password can reach text in several forms: a URL's userinfo (``scheme://user:PASSWORD@host``,
any scheme: a database, MLflow's http; the password holding ``/``, ``@``, ``:`` or
percent-escapes), a ``NAME=value`` pair whose name contains ``password`` (``password``,
``sslpassword``, ``PGPASSWORD``; or ``passwd``, ``pwd``) in a URL's query or a libpq key=value
string, quoted or not, or pieces of it echoed by a database driver's error (``failed to resolve
host 'secret@127.0.0.1'``). `redact` masks the first two forms wherever they appear, the value
whole: up to the next ``&`` or blank, since a password may hold ``,`` ``;`` or ``)``. Given the
target, it also masks the target's password and every longer piece of it (cut at any character
but a letter or digit, or only at a URL's delimiters), raw and percent-decoded, wherever they
appear; a password or piece shorter than SHORTEST_PIECE is masked only in those two forms, since
masking ``1`` everywhere would turn ``epoch 1`` into ``epoch ***``.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

MASK = "***"
# scheme://user: ... @  -- up to the last @ of the token, so a password may hold / @ : or escapes
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][\w+.-]*://[^:/@\s?#]*:)[^\s]*@")
_PAIR = re.compile(
    r"(?P<key>\b\w*(?:password|passwd)\w*|\bpwd)(?P<eq>\s*=\s*)(?P<value>'[^']*'|\"[^\"]*\"|[^&\s]*)", re.IGNORECASE
)
SHORTEST_PIECE = 4  # pieces of a password shorter than this are too common to mask everywhere
# Where an echoed password may be cut into pieces: at any character but a letter or digit, or only at
# those a URL parser cuts at (`user:Pw-1@Zq-2@host` reaches the driver as host `Zq-2@host`, which it echoes)
_PIECE_CUTS = (re.compile(r"[^A-Za-z0-9]+"), re.compile(r"[@:/?#\[\]&=,;\s]+"))


def redact(text: str, target: str | None = None) -> str:
    """`text` with every password masked; with `target` (a storage URL or connection string),
    also every occurrence of its password or a piece of it.
    """
    for secret in sorted(secrets_of(target), key=len, reverse=True) if target else ():
        text = text.replace(secret, MASK)
    text = _USERINFO.sub(lambda m: m["head"] + MASK + "@", text)
    return _PAIR.sub(lambda m: m["key"] + m["eq"] + MASK, text)


def secrets_of(target: str) -> set[str]:
    """The passwords a storage target holds, raw and percent-decoded, and their longer pieces."""
    found = [m.group(0)[len(m["head"]) : -1] for m in _USERINFO.finditer(target)]
    found += [m["value"].strip("'\"") for m in _PAIR.finditer(target)]
    secrets = {form for raw in found if raw for form in (raw, unquote(raw))}
    pieces = {p for s in secrets for cut in _PIECE_CUTS for p in cut.split(s) if len(p) >= SHORTEST_PIECE}
    return {s for s in secrets | pieces if s != MASK and len(s) >= SHORTEST_PIECE}
