"""Value checks for grid-file values: each returns the (normalised) value or raises
ValueError("must ..., got ..."), which the grid-file parser prefixes with file and key.
"""

from __future__ import annotations

import difflib
import json
import math
import reprlib
from collections.abc import Callable
from typing import Any

Validator = Callable[[Any], Any]

# Values are shown shortened: a hostile file can hold a huge or self-similar structure
# (YAML aliases: a "billion laughs") whose full repr would never finish.
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 3, 60, 60, 40


def got(value: Any) -> str:
    if isinstance(value, str) and value.isprintable() and len(value) <= 60:
        return f"got '{value}'"
    return f"got {_SHORT.repr(value)}"  # newlines and control characters escaped: one line


def did_you_mean(word: str, options: Any) -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def positive_int(value: Any) -> int:
    if not _is_int(value) or value < 1:
        raise ValueError(f"must be a positive integer, {got(value)}")
    return value


def non_negative_int(value: Any) -> int:
    if not _is_int(value) or value < 0:
        raise ValueError(f"must be an integer >= 0, {got(value)}")
    return value


def int_at_least(low: int, why: str) -> Validator:
    """An integer >= low; `why` tells the user where the bound comes from."""

    def check(value: Any) -> int:
        if not _is_int(value) or value < low:
            raise ValueError(f"must be an integer >= {low} ({why}), {got(value)}")
        return value

    return check


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, {got(value)}")
    return value


class NumberIn:
    """A float in [low, high], with either end optionally open; the bounds are kept for the store's params."""

    def __init__(self, low: float, high: float, *, low_open: bool = False, high_open: bool = False) -> None:
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open

    def __call__(self, value: Any) -> float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        # math.isfinite(10**400) raises OverflowError; Python compares such an int with a float exactly
        ok = ok and (abs(value) < 1e308 if isinstance(value, int) else math.isfinite(value))
        ok = ok and (value > self.low if self.low_open else value >= self.low)
        ok = ok and (value < self.high if self.high_open else value <= self.high)
        if not ok:
            left, right = ("(" if self.low_open else "["), (")" if self.high_open else "]")
            raise ValueError(f"must be a number in {left}{self.low:g}, {self.high:g}{right}, {got(value)}")
        return float(value)


def number_in(low: float, high: float, *, low_open: bool = False, high_open: bool = False) -> Validator:
    """A float in [low, high], with either end optionally open."""
    return NumberIn(low, high, low_open=low_open, high_open=high_open)


class OneOf:
    """One of a fixed set of words; `choices` is the set (the sweep study's categorical params use it)."""

    def __init__(self, *choices: str) -> None:
        self.choices = choices

    def __call__(self, value: Any) -> str:
        if value not in self.choices:
            hint = did_you_mean(value, self.choices) if isinstance(value, str) else ""  # a huge list's str never ends
            raise ValueError(f"must be one of {' | '.join(self.choices)}, {got(value)}{hint}")
        return value


def one_of(*choices: str) -> Validator:
    return OneOf(*choices)


def optional_path(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ValueError(f"must be a file or folder path or null, {got(value)}")
    return value


def one_of_ints(*choices: int) -> Validator:
    def check(value: Any) -> int:
        if not _is_int(value) or value not in choices:
            raise ValueError(f"must be one of {' | '.join(map(str, choices))}, {got(value)}")
        return int(value)

    return check


def optional_reference(value: Any) -> str | None:
    """null, or user code as "package.module:name" or "path/to/file.py:name" (sweep/train/usercode.py)."""
    if value is None:
        return None
    module, _, name = value.rpartition(":") if isinstance(value, str) else ("", "", "")
    if not module or not name.isidentifier():
        raise ValueError(f'must be "package.module:function" or "path/to/file.py:function", {got(value)}')
    return value


def references(value: Any) -> tuple[str, ...]:
    """A list of user-code references ([] = none), kept as a tuple so settings stay hashable."""
    if not isinstance(value, (list, tuple)):
        raise ValueError(f'must be a list of "module:factory" strings, {got(value)}')
    checked = tuple(optional_reference(v) for v in value)
    if None in checked:
        raise ValueError(f'must be a list of "module:factory" strings, {got(value)}')
    return checked  # type: ignore[return-value]


def _plain(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))


# A builder's options or a stopping rule are a few numbers and short lists. Bounded after decoding: YAML
# aliases can expand a few lines into millions of values, and JSON in a string (brackets written as \x5b
# escapes) can nest past anything the file's own brackets showed.
MAX_DEPTH, MAX_VALUES = 20, 10_000


def decoded(value: Any) -> Any:
    """`value` (JSON text as stored, or what YAML gave) checked to nest at most MAX_DEPTH levels and hold at
    most MAX_VALUES values; ValueError otherwise.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except RecursionError:
            raise ValueError(f"nests more than {MAX_DEPTH} levels") from None
    stack, seen = [(value, 0)], 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise ValueError(f"holds more than {MAX_VALUES:,} values (YAML aliases expanding?)")
        if depth > MAX_DEPTH:
            raise ValueError(f"nests more than {MAX_DEPTH} levels")
        children = item.values() if isinstance(item, dict) else item if isinstance(item, (list, tuple)) else ()
        stack.extend((child, depth + 1) for child in children)
    return value


def options_mapping(value: Any) -> str | None:
    """null, or a mapping of names to plain values (numbers, strings, booleans, null, lists of them),
    kept as canonical JSON: hashable, and the same text whatever order the file wrote the keys in.
    """
    if value is None:
        return None
    value = decoded(value)  # as stored: already canonical JSON
    ok = isinstance(value, dict) and all(isinstance(k, str) and k.isidentifier() for k in value)
    if not ok or not all(_plain(v) for v in value.values()):
        raise ValueError(f"must be a mapping of argument names to plain values (numbers, strings, lists), {got(value)}")
    return json.dumps(value, sort_keys=True)


def optional_positive_int(value: Any) -> int | None:
    return None if value is None else positive_int(value)
