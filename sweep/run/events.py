"""What a worker tells whoever started it: small frozen events, one JSON object per line.

A subprocess worker writes ``@@sweep {json}`` lines on stdout (`to_line`); the coordinator
reads them back (`from_line`). An in-process worker hands the same objects to a callback.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from sweep.vocab import RunStatus

PREFIX = "@@sweep "
KIND = "event"


@dataclass(frozen=True)
class RunStarted:
    kind: ClassVar[str] = "start"
    run_id: str
    epochs: int


@dataclass(frozen=True)
class EpochsKnown:
    """A steps budget makes more (or fewer) epochs than train.epochs says; known once the data is loaded."""

    kind: ClassVar[str] = "epochs"
    run_id: str
    planned: int
    epochs: int


@dataclass(frozen=True)
class EpochDone:
    kind: ClassVar[str] = "epoch"
    run_id: str
    epochs: int
    record: dict[str, Any] = field(default_factory=dict)  # vocab.EPOCH_METRICS (and noise metrics)


@dataclass(frozen=True)
class RunEnded:
    kind: ClassVar[str] = "end"
    run_id: str
    status: RunStatus  # its word in a line; read back as the member (an unknown word: not an event)
    epochs_left: int = 0  # epochs it will never train (pruned, diverged, failed early)
    error: str | None = None  # the error's last line

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", RunStatus(self.status))


@dataclass(frozen=True)
class RunInterrupted:
    """The attempt ended unfinished and its run is queued again."""

    kind: ClassVar[str] = "interrupted"
    run_id: str
    reason: str | None = None


@dataclass(frozen=True)
class RunRetried:
    kind: ClassVar[str] = "retry"
    run_id: str
    epochs: int


@dataclass(frozen=True)
class WorkerStopped:
    kind: ClassVar[str] = "error"
    message: str


Event = RunStarted | EpochsKnown | EpochDone | RunEnded | RunInterrupted | RunRetried | WorkerStopped
Emit = Callable[[Event], None]
TYPES: dict[str, type] = {
    t.kind: t for t in (RunStarted, EpochsKnown, EpochDone, RunEnded, RunInterrupted, RunRetried, WorkerStopped)
}


def to_json(event: Event) -> str:
    return json.dumps({KIND: event.kind, **asdict(event)})


def from_json(text: str) -> Event:
    """The event a `to_json` line holds; ValueError for an unknown kind."""
    fields = json.loads(text)
    kind = fields.pop(KIND, None)
    if kind not in TYPES:
        raise ValueError(f"unknown worker event {kind!r}")
    return TYPES[kind](**fields)


def to_line(event: Event) -> str:
    return PREFIX + to_json(event) + "\n"


def from_line(line: str) -> Event | None:
    """The event of a worker's stdout line, or None for a line that is not one (it goes to the log).

    A line that looks like an event but is not one this version knows (a worker of another
    version) is logged too, rather than stopping the coordinator.
    """
    if not line.startswith(PREFIX):
        return None
    try:
        return from_json(line[len(PREFIX) :])
    except (ValueError, TypeError):
        return None
