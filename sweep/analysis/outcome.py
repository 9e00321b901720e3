"""What a check or a claim came to, as a value: `Outcome`, with the one table of its words.

Code decides on the enum; the words are written once, here, for the report, the tables and the
terminal. Nothing reads a word back: a file that stores an outcome stores its `value` and is read
with `Outcome.of`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum


class Outcome(Enum):
    """A check's interval wholly inside its region (HOLDS), wholly outside (FAILS), or neither (UNDECIDED);
    a claim's outcome combines its checks' (`all_of`, `any_of`).
    """

    HOLDS = "holds"
    FAILS = "fails"
    UNDECIDED = "undecided"

    @property
    def decided(self) -> bool:
        return self is not Outcome.UNDECIDED

    @property
    def words(self) -> Words:
        return WORDS[self]

    @classmethod
    def of(cls, value: object) -> Outcome:
        """The outcome a file stored as its value ("holds", "fails"); anything else (empty, NaN) is undecided."""
        return next((o for o in cls if o.value == value), cls.UNDECIDED)


@dataclass(frozen=True)
class Words:
    """An outcome's words in every place that writes one."""

    check: str  # a check's outcome (tables/claims.csv's outcome columns, the report's check tables)
    side: str  # the side a p-value points to (claims.csv's p_side, decisions.csv's side): empty when none
    claim: str  # a claim's verdict in the report's sentences
    table: str  # a claim's verdict in tables/claims.csv's verdict column
    answer: str  # yes / no: does a number clear its threshold (the attribution's "survives")
    interval: str  # a condition map's check: its interval against the threshold (tables/maps.csv)
    cell: str  # a condition map's cell: does the post's pattern show there (tables/maps.csv)
    cells_at: str  # a map's cells in a sentence: "the post's pattern shows at ..."
    legend: str  # the map figure's legend


SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
NOT_TESTED = "not tested by this sweep"

WORDS = {
    Outcome.HOLDS: Words(
        "holds",
        "holds",
        SUPPORTED,
        SUPPORTED,
        "yes",
        "beyond the threshold",
        "shows it",
        "the post's pattern shows at",
        "interval beyond the threshold",
    ),
    Outcome.FAILS: Words(
        "fails",
        "fails",
        CONTRADICTED,
        CONTRADICTED,
        "no",
        "short of it",
        "does not",
        "it does not at",
        "interval short of it",
    ),
    Outcome.UNDECIDED: Words(
        "undecided",
        "",
        "undecided",
        INCONCLUSIVE,
        "undecided",
        "unclear",
        "unclear",
        "it is unclear at",
        "interval spans it",
    ),
}


def all_of(outcomes: Iterable[Outcome]) -> Outcome:
    """Every check must hold: one failing check fails the claim."""
    values = list(outcomes)
    if Outcome.FAILS in values:
        return Outcome.FAILS
    return Outcome.HOLDS if values and all(v is Outcome.HOLDS for v in values) else Outcome.UNDECIDED


def any_of(outcomes: Iterable[Outcome]) -> Outcome:
    """One holding check is enough (C4: one kind of mismatch); all must fail to fail the claim."""
    values = list(outcomes)
    if Outcome.HOLDS in values:
        return Outcome.HOLDS
    return Outcome.FAILS if values and all(v is Outcome.FAILS for v in values) else Outcome.UNDECIDED
