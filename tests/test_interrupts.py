"""A worker's stop (SIGTERM, SIGINT) is not lost where its KeyboardInterrupt lands: a stop swallowed
inside a `__del__` still stops the run at its next record, after that record is written.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import TINY_GRID, write_grid

from sweep.run import interrupts

pytestmark = pytest.mark.unit


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """A fresh memory of stops; the test's own SIGTERM and SIGINT handlers back afterwards."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    asked: list[int] = []
    monkeypatch.setattr(interrupts, "_asked", asked)
    yield asked
    for number, handler in previous.items():
        signal.signal(number, handler)


@pytest.fixture
def armed(fresh: list[int]) -> list[int]:
    """The worker's handlers in this process."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a worker started from a terminal
    interrupts.arm()
    return fresh


class _SignalledWhileCollected:
    """An object whose finaliser receives the signal: Python prints the handler's exception and goes on."""

    def __init__(self, number: int) -> None:
        self.number = number

    def __del__(self) -> None:
        signal.raise_signal(self.number)


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_swallowed_in_a_finaliser_stops_the_run_after_its_next_record(
    armed: list[int], number: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    lost: list[type[BaseException] | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda found: lost.append(found.exc_type))  # "Exception ignored"
    _SignalledWhileCollected(number)  # collected at once: the KeyboardInterrupt is raised and lost there
    assert lost == [KeyboardInterrupt]
    assert interrupts.asked() and armed == [number]
    written = []
    with pytest.raises(KeyboardInterrupt), interrupts.uninterrupted():
        written.append("record and checkpoint")
    assert written == ["record and checkpoint"]  # the record is written, then the run stops


def test_a_stop_during_a_record_waits_for_the_record_then_stops_the_run(armed: list[int]) -> None:
    written = []
    with pytest.raises(KeyboardInterrupt), interrupts.uninterrupted():
        signal.raise_signal(signal.SIGTERM)
        written.append("record and checkpoint")
    assert written == ["record and checkpoint"]
    assert signal.getsignal(signal.SIGTERM) is interrupts._stop  # the worker's handler again


def test_a_ctrl_c_during_a_record_of_a_sweep_in_this_process_does_not_stop_the_next_sweep(fresh: list[int]) -> None:
    """Unarmed (a sweep trained in the caller's process, a notebook's): the stop ends that sweep only."""
    with pytest.raises(KeyboardInterrupt), interrupts.uninterrupted():
        signal.raise_signal(signal.SIGINT)
    try:
        with interrupts.uninterrupted():  # the next sweep's first record
            pass
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C that stopped the sweep before stopped this one too")
    assert not interrupts.asked()


def test_records_go_on_while_no_stop_was_asked(armed: list[int]) -> None:
    for _ in range(3):
        with interrupts.uninterrupted():
            pass
    assert not interrupts.asked()


def test_a_sigint_its_starter_ignores_stays_ignored(fresh: list[int]) -> None:
    """A worker started with SIGINT ignored (in the background of a shell script) keeps it so."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    interrupts.arm()
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) is interrupts._stop


def test_a_worker_run_in_this_process_puts_back_the_handlers_it_found(fresh: list[int]) -> None:
    """`sweep worker` through `sweep.cli.main` in a test's or a notebook's process: its stop handlers last as
    long as the worker, then the caller's own are back (a SIGTERM handler left behind swallows the SIGTERM
    of `timeout N pytest`).
    """

    def mine(number: int, frame: object) -> None:
        pass

    signal.signal(signal.SIGTERM, mine)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with interrupts.armed():
        assert signal.getsignal(signal.SIGTERM) is interrupts._stop
        assert signal.getsignal(signal.SIGINT) is interrupts._stop
    assert signal.getsignal(signal.SIGTERM) is mine
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_command_run_in_this_process_puts_back_the_sigterm_handler_it_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fresh: list[int]
) -> None:
    """`sweep.cli.main` turns SIGTERM into a stop while its command runs, then gives the caller its own back,
    whether the command succeeds or is refused.
    """
    from sweep import cli

    def mine(number: int, frame: object) -> None:
        pass

    signal.signal(signal.SIGTERM, mine)
    write_grid(tmp_path, TINY_GRID)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["status", "grid.yaml"]) == 0
    assert signal.getsignal(signal.SIGTERM) is mine
    assert cli.main(["status", "grid.yaml", "--storage", "host=h dbname=d"]) == 2
    assert signal.getsignal(signal.SIGTERM) is mine
    capsys.readouterr()
