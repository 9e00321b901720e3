"""Shared fixtures: tiny real configs, a real journal store in tmp_path, a sweep run in this process,
the CLI as a subprocess (for tests of the process boundary).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pytest
import services

if TYPE_CHECKING:
    from sweep.report import Written
    from sweep.train.session import Session

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Datasets render into a per-session cache, never the user's ~/.cache."""
    os.environ["BATCHSWEEP_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # matplotlib builds its font list (running fc-list) the first time it is imported on a machine:
    # here, before any test, not inside the first unit test that draws a figure.
    import matplotlib.font_manager  # noqa: F401


# The signals whose handlers a test may not leave changed: a SIGTERM handler left in pytest's own process
# (a command's or a worker's stop) makes `timeout N pytest` run on past N, to the end of the suite.
WATCHED_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1") if hasattr(signal, name)
)


@pytest.fixture(autouse=True)
def _no_signal_handler_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """The test that leaves a handler of a WATCHED_SIGNALS changed fails, naming it; the handler is put back.
    The first autouse fixture of a test, so its check runs after every other fixture's teardown.
    """
    before = {number: signal.getsignal(number) for number in WATCHED_SIGNALS}
    yield
    left = {number: signal.getsignal(number) for number in WATCHED_SIGNALS}
    changed = [number for number in WATCHED_SIGNALS if left[number] != before[number]]
    for number in changed:
        if before[number] is not None:  # None: installed from C, which Python cannot put back
            signal.signal(number, before[number])
    if changed:
        pytest.fail(
            f"{request.node.nodeid} left signal handlers installed: "
            + ", ".join(f"{signal.Signals(n).name} -> {left[n]!r} (was {before[n]!r})" for n in changed),
            pytrace=False,
        )


TIERS = ("unit", "integration", "system")
# What a unit test may not touch: it runs in milliseconds, so no deep-learning framework and no process.
HEAVY_IMPORTS = ("tensorflow", "keras", "jax", "jaxlib", "torch")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--require-services",
        action="store_true",
        help="fail (not skip) a test whose service is missing: PostgreSQL, Slurm, Chromium, ... (also CI=true)",
    )


def pytest_configure(config: pytest.Config) -> None:
    services.REQUIRED["value"] = config.getoption("--require-services")


def tiers_of(item: pytest.Item) -> list[str]:
    return [mark.name for mark in item.iter_markers() if mark.name in TIERS]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test has exactly one tier, or the session stops before running anything."""
    wrong = [f"{item.nodeid}: {tiers_of(item) or 'none'}" for item in items if len(tiers_of(item)) != 1]
    if wrong:
        raise pytest.UsageError(f"each test needs exactly one tier marker of {', '.join(TIERS)}:\n" + "\n".join(wrong))


_DESELECTED_SYSTEM: list[pytest.Item] = []


def pytest_deselected(items: list[pytest.Item]) -> None:
    _DESELECTED_SYSTEM.extend(item for item in items if "system" in tiers_of(item))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Where services are required (CI), a machine without one fails whichever tiers ran."""
    if services.required() and exitstatus == pytest.ExitCode.OK and services.missing_here(machine_only=True):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    """After a run without the system tier, or on CI: the system tests not run and what this machine lacks."""
    missing = services.missing_here()
    fails = services.required() and any(service.name not in services.PACKAGES for service, _ in missing)
    if not _DESELECTED_SYSTEM and not fails:
        return
    write = terminalreporter.write_line
    terminalreporter.section("system tier")
    if _DESELECTED_SYSTEM:
        count = len(_DESELECTED_SYSTEM)
        write(f"{count} system tests not run: pytest -m system, or bash .ci/run (installs what they need)")
    for service, why in missing:
        write(f"  {service.name} MISSING ({why}); install: {service.install}")
    if not missing:
        write("  every service they need is here")
    if fails:
        write("services are required here (CI=true or --require-services): the session fails")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before any fixture of a test that may train: split the CPU into 2 logical devices.

    Logical devices are fixed once TensorFlow initialises, so this comes before the first
    TensorFlow use in this process. Unit tests never reach TensorFlow.
    """
    if "unit" not in tiers_of(item):
        from sweep.train import devices

        devices.configure_replicas(2)


class _Refuse(importlib.abc.MetaPathFinder):
    """Makes a unit test that imports a deep-learning framework fail, naming it."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] in HEAVY_IMPORTS:
            raise ImportError(f"a unit test may not import {name}: mark the test integration")


@pytest.fixture(autouse=True)
def _unit_limits(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A unit test imports no framework and starts no process (checked, not trusted)."""
    if "unit" not in tiers_of(request.node):
        yield
        return

    def no_process(self: subprocess.Popen, args: object, *rest: object, **kwargs: object) -> None:
        raise AssertionError(f"a unit test may not start a process ({args}): mark the test system")

    monkeypatch.setattr(subprocess.Popen, "__init__", no_process)
    finder = _Refuse()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


FIXTURE_SWEEPS = tuple(REPO / "tests" / "fixtures" / name for name in ("fx_bs", "fx_causes", "fx_gpus"))


@dataclass(frozen=True)
class Built:
    """A report built through the CLI's entry point: its folder and what `report` printed."""

    out: Path
    stdout: str


@pytest.fixture(scope="session")
def fixtures_report(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The report of the three committed fixture sweeps, built once per session (several modules read
    it). Tests only read it: one that changes its files gets a report of its own.
    """
    import io

    from sweep.cli import main

    out, printed = tmp_path_factory.mktemp("fixtures-report"), io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["report", *map(str, FIXTURE_SWEEPS), "--out", str(out)])
    assert code == 0
    return Built(out, printed.getvalue())


@pytest.fixture(scope="session")
def controls_report(tmp_path_factory: pytest.TempPathFactory) -> Written:
    """The report of the committed fixture sweep of the controls (fx_controls), built once per session."""
    from sweep import report

    out = tmp_path_factory.mktemp("controls-report")
    return report.build([REPO / "tests" / "fixtures" / "fx_controls"], out)


def write_grid(folder: Path, text: str, name: str = "grid.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def run_cli(*args: str, cwd: Path, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """`python -m sweep ARGS` in a fresh process, as a user would run it (`env`: variables set for it)."""
    return subprocess.run(
        [sys.executable, "-m", "sweep", *args],
        cwd=cwd,
        env=cli_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def cli_env(drop: Iterable[str] = (), **extra: str) -> dict[str, str]:
    """This process's environment without the names in `drop`, the repository importable, plus `extra`."""
    dropped = set(drop)
    return {**{k: v for k, v in os.environ.items() if k not in dropped}, "PYTHONPATH": str(REPO), **extra}


def start_cli(started: list[subprocess.Popen], *args: str, cwd: Path, drop: Iterable[str] = (), **env: str):
    """`python -m sweep ARGS` started in the background (output merged, as text), recorded in `started`."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweep", *args],
        cwd=cwd,
        env=cli_env(drop, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    started.append(proc)
    return proc


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen]]:
    """Processes a test starts; afterwards each one and every process it started are killed by pid."""
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in psutil.Process(proc.pid).children(recursive=True):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signal.SIGKILL)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


@dataclass
class Lines:
    """What a sweep said: progress and results (`out`), problems (`err`)."""

    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.out + self.err)


@functools.cache
def this_process_session() -> Session:
    """The worker session of the sweeps this test process trains in itself, as a notebook keeps one: a
    sweep's first run takes the compiled model the last sweep's runs of its graph left (sweep/train/session.py).
    """
    from sweep.train.session import Session

    return Session()


def sweep_here(grid: Path, report: bool = False, **options):
    """`sweep run GRID` in this process (no worker processes, no second TensorFlow), in the test process's
    worker session: (Ended, Lines). Results go to <grid's folder>/results/<name> unless `results=` says otherwise.
    """
    from sweep.cli.arguments import report_writer
    from sweep.config import load_grid
    from sweep.run import orchestrate

    parsed = load_grid(grid)
    options.setdefault("results", grid.parent / "results" / parsed.name)
    lines = Lines()
    console = orchestrate.Console(say=lines.out.append, warn=lines.err.append)
    writer = report_writer if report else None
    in_process = orchestrate.Options(in_process=True, report=writer, **options)
    outcome = orchestrate.run_sweep(parsed, in_process, console, this_process_session())
    return outcome, lines


TINY_GRID = """\
    name: tiny
    seeds: [0]
    base:
      data: {dataset: glyphs120, classes: 4, samples_per_class: 10, image_size: 12}
      train: {epochs: 2, batch_size: 8}
    grid:
      train.batch_size: [4, 8]
"""
