"""Masking passwords in anything that may hold a storage URL: console lines, logs, errors."""

from __future__ import annotations

import re


def redact(text: str) -> str:
    """Replace the password of any database URL in `text` with ***."""
    return re.sub(r"(\w[\w+.-]*://[^:/@\s]*:)[^/\s]*@", r"\1***@", text)
