"""A grid file's problems while it is parsed: `KeyProblem` (where in the file, and what is wrong), and
the helpers every part of the parse raises it through. `load_grid` turns it into the one-line
`ConfigError` the user sees.
"""

from __future__ import annotations

from typing import Any

from sweep.config.gridyaml import one_line
from sweep.config.validators import Validator, did_you_mean


class KeyProblem(Exception):
    """A problem at one place of a grid file: `where` (a key path) and `what`."""

    def __init__(self, where: str, what: str) -> None:
        where, what = one_line(where, 200), one_line(what, 1000)  # keys and values come from the file
        super().__init__(f"{where}: {what}")
        self.where, self.what = where, what


def unknown(word: str, valid: Any) -> str:
    """What to say of a key that is not one of `valid`, with the closest one if any is close."""
    hint = did_you_mean(word, valid)
    return f"unknown key{hint}{' ' if hint else '; '}valid keys: {', '.join(valid)}"


def reject_unknown(mapping: dict, valid: Any, prefix: str) -> None:
    """KeyProblem at the first key of `mapping` that is not one of `valid`."""
    for key in mapping:
        if key not in valid:
            raise KeyProblem(f"{prefix}{key}", unknown(str(key), valid))


def checked(where: str, check: Validator, value: Any) -> Any:
    """`check(value)`, its ValueError as a KeyProblem at `where`."""
    try:
        return check(value)
    except ValueError as err:
        raise KeyProblem(where, str(err)) from None
