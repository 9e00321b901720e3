"""Running a sweep in-process: grid in, outcome out. Used by the CLI and by the tests.

`run_sweep` queues the grid's runs and learning-rate-search slots, trains them with worker
processes (or, with `in_process`, in this process), queues each finished search's best lr
at every seed and trains those, then exports the tables and writes the report. `status`
counts a sweep's runs; `join` trains (or coordinates workers for) a sweep started elsewhere.
Every line for the user goes through a `Console`; nothing here prints by itself.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from sweep import vocab
from sweep.config import GridFile
from sweep.config.plan import RunSpec, SearchGroup, plan, search_groups
from sweep.exits import EXIT_FAILED, EXIT_OK, EXIT_STORE_UNREACHABLE, UsageError
from sweep.run import coordinator, events, preflight, resume, workforce
from sweep.run.stores import locations, open_store, same_backend
from sweep.store import RetryPolicy, Store, outage, status_of, storage
from sweep.store.secrets import redact
from sweep.train import backends
from sweep.vocab import RunStatus

if TYPE_CHECKING:
    from sweep.train.session import Session

PHASES = 3  # grid and searches; then the tuned runs; a third pass only if a search finished late
# (and one pass more for each widening a search may take: search.widen)


def _out(text: str) -> None:
    print(text, flush=True)


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Console:
    """Where lines for the user go: `say` for progress and results, `warn` for problems."""

    say: Callable[[str], None] = _out
    warn: Callable[[str], None] = _err


class Reported(Protocol):
    """A report written: its files and its verdicts in short (`sweep.report.Written`)."""

    @property
    def markdown(self) -> Path: ...

    @property
    def html(self) -> Path: ...

    @property
    def summary(self) -> Sequence[str]: ...


# Writes the report of one results folder. The command line passes sweep.report's (`arguments.report_writer`):
# a sweep never imports the report, so what it trains never depends on how results are presented.
Reporter = Callable[[Path], Reported]


@dataclass(frozen=True)
class Options:
    """How to run a sweep. `storage` is a journal path or database URL (default <results>/journal.log)."""

    results: Path | None = None  # default results/<name>
    storage: str | None = None
    workers: int | None = None  # worker processes (default: one per device group, else 1)
    devices: str | None = None  # GPU ids, e.g. "0,2"
    trials_per_gpu: int = 1
    retries: int = 1
    max_requeues: int = 3  # times a run whose worker died is queued again before it is left failed
    in_process: bool = False  # train in this process (no worker processes; one TensorFlow)
    report: Reporter | None = None  # end `run_sweep` (and `export`) with this report; None: the CSVs only
    keep_models: bool = False  # keep run checkpoints, and each done run's model in <results>/models
    pack: int | None = None  # runs per packed model (sweep/train/pack.py); None: the measured size per batch size

    @property
    def policy(self) -> RetryPolicy:
        return RetryPolicy(self.retries, self.max_requeues)


@dataclass(frozen=True)
class Ended:
    """What a sweep ended with."""

    exit_code: int
    counts: dict[RunStatus, int] = field(default_factory=dict)
    runs_csv: Path | None = None
    epochs_csv: Path | None = None
    report_md: Path | None = None
    report_html: Path | None = None
    trained: int = 0  # runs this call trained to an end (any status)


def _loads() -> str:
    """What a worker loads first, in the start message: TensorFlow, or Keras on another backend."""
    return "TensorFlow" if backends.is_tensorflow() else f"Keras on {backends.current()}"


# --- run


def worker_session(options: Options, session: Session | None = None) -> Session | None:
    """The worker session a sweep trains in when it trains in this process: the caller's, else a fresh one.
    None for worker processes, which make their own.
    """
    if session is not None or not options.in_process:
        return session
    from sweep.train.session import Session

    return Session()


def run_sweep(
    grid: GridFile, options: Options = Options(), console: Console = Console(), session: Session | None = None
) -> Ended:
    """Train the grid's runs and the searches' trials; then each finished search's best lr at every seed.
    In this process (`options.in_process`), one worker session trains every phase: `session`, kept by the
    caller across sweeps, or a fresh one (sweep/train/session.py).
    """
    session = worker_session(options, session)
    runs, groups = plan(grid), search_groups(grid)
    results, target = locations(grid, options)
    points = [point for point, _ in grid.points()]
    backends.check(grid.source, points)  # what this backend cannot do stops here, before any queueing
    if any(preflight.uses_code(p) for p in points):
        console.say("checking model.builder, data.loader and train.callbacks (loads TensorFlow)")
        preflight.check(points)  # a broken reference stops here, before anything is queued
    store, added = _queue(grid, target, runs, groups, console, options.policy)
    code = EXIT_OK
    planned = list(runs)
    trained = 0
    rounds = 0
    for phase in range(PHASES + (grid.search.widen if grid.search else 0)):
        widened = store.widen_searches(groups)
        for line in widened:
            console.say(f"{grid.name}: {line}")
        planned = runs + store.enqueue_tuned(groups, grid.seeds)
        if phase == 0:
            _warn_foreign(store, planned, console)
        todo = store.pending(planned)
        if not todo or code:
            break
        _announce(store, phase, len(planned), todo, added, console, searched=bool(groups), widened=bool(widened))
        code, done = _train(store, options, todo, results, console, session)
        trained, rounds = trained + done, rounds + 1
    if not rounds:
        console.say(f"all {len(planned)} runs of {grid.name} are already finished; nothing to train.")
    outcome = _finish(store, planned, results, options, console, trained)
    unfinished = len(store.pending(planned))
    if unfinished:
        console.warn(f"{unfinished} run(s) not finished; run the same command again to train them")
        return replace(outcome, exit_code=EXIT_FAILED)
    return outcome


@dataclass(frozen=True)
class Queued:
    """What `queue_sweep` left in the store for workers started elsewhere."""

    store: Store
    planned: int  # runs of the grid (and tuned runs of finished searches)
    added: int  # newly queued by this call
    todo: int  # queued or running now, search trials included
    searching: bool  # the grid has a learning-rate search: its tuned runs are queued by a later call


def queue_sweep(grid: GridFile, options: Options = Options(), console: Console = Console()) -> Queued:
    """`run --no-train`: queue what `run_sweep` would train, for workers started elsewhere (`sweep worker`,
    a Slurm array), and train nothing. No preflight of the user's code: it loads TensorFlow, and the
    workers find a broken reference as a failed run. Each finished search's best lr is queued by the
    next call, as `run_sweep` does between its phases.
    """
    runs, groups = plan(grid), search_groups(grid)
    _, target = locations(grid, options)
    # trained by workers elsewhere: their backend, not this process's, is the one to check
    store, added = _queue(grid, target, runs, groups, console, options.policy, here=False)
    for line in store.widen_searches(groups):
        console.say(f"{grid.name}: {line}")
    planned = runs + store.enqueue_tuned(groups, grid.seeds)
    _warn_foreign(store, planned, console)
    return Queued(store, len(planned), added, len(store.pending(planned)), bool(groups))


def _queue(
    grid: GridFile,
    target: str,
    runs: list[RunSpec],
    groups: list[SearchGroup],
    console: Console,
    policy: RetryPolicy,
    here: bool = True,
) -> tuple[Store, int]:
    """Open (or start) the sweep's store, put dead workers' runs back, queue the grid's runs and searches;
    return the store and how many runs were newly queued. `here`: this process trains them (its backend
    must be the store's).
    """
    store = open_store(target, grid.name, create=True)
    if here:
        same_backend(store)
    workforce.say_dead(store.requeue_dead(policy), console.say, console.warn)
    added = store.enqueue(runs)
    store.register_searches(groups)
    return store, added


def train_runs(
    store: Store,
    runs: list[RunSpec],
    options: Options,
    results: Path,
    console: Console,
    session: Session | None = None,
) -> tuple[int, int]:
    """Queue `runs` (a finished run is never queued again) and train the pending ones the way `run_sweep`
    does (workers or this process, in `session` as there), then export the tables; return the workers' exit
    code and how many runs they trained. Used to add runs to a sweep after its grid (`sweep.run.until`).
    """
    store.enqueue(runs)
    todo = store.pending(runs)
    code, done = _train(store, options, todo, results, console, session) if todo else (EXIT_OK, 0)
    store.export_csv(results)
    return code, done


def _announce(
    store: Store,
    phase: int,
    planned: int,
    todo: list[RunSpec],
    added: int,
    console: Console,
    searched: bool,
    widened: bool = False,
) -> None:
    if phase == 0:
        searching = len(store.search_slots())
        extra = f" and {searching} learning-rate search trial(s)" if searching else ""
        console.say(
            f"{store.name}: {planned} runs{extra}; {len(todo)} to train ({_epochs(todo)} epochs; "
            f"{added} newly queued). Store: {store.shown}"
        )
    elif widened:
        console.say(f"{store.name}: training the widened searches' trials and the tuned runs ready: {len(todo)} run(s)")
    elif searched:
        console.say(
            f"{store.name}: learning-rate searches finished; training their best lr at every seed: {len(todo)} run(s)"
        )
    else:  # the workers stopped with runs still queued: another process released them, or a worker left early
        console.say(f"{store.name}: {len(todo)} run(s) still queued after the workers stopped; training them now")


def _epochs(specs: list[RunSpec]) -> int:
    return sum(s.point.train.epochs for s in specs)


def _train(
    store: Store, options: Options, todo: list[RunSpec], results: Path, console: Console, session: Session | None
) -> tuple[int, int]:
    """Train the queued runs with workers (or in this process, in `session`) and show their progress;
    return the workers' exit code and how many runs they trained.
    """
    progress = coordinator.Progress(runs_total=len(todo), epochs_total=_epochs(todo))
    started = time.monotonic()
    log_dir = results / vocab.LOG_DIR
    if options.in_process:
        places = resume.places(store.target, store.name, results, options.keep_models)
        code = train_here(store, progress, options.policy, console, places, options.pack, session)
    else:
        resume.places(store.target, store.name, results, options.keep_models)  # a linked checkpoints/: refused now
        crew = workforce.crew(store, todo, options.devices, options.workers, options.trials_per_gpu)
        if crew.note:
            console.say(crew.note)
        console.say(
            f"starting {len(crew.slots)} worker(s){workforce.devices_note(crew.slots)}; {_loads()} takes a few "
            f"seconds to load. Logs: {log_dir}/"
        )
        code = coordinator.run_workers(
            store.target,
            store.name,
            progress,
            log_dir,
            slots=crew.slots,
            threads=crew.threads,
            policy=options.policy,
            say=console.say,
            flags=workforce.worker_flags(results, options.keep_models, options.pack),
            towers=workforce.packs(options.pack, todo),
            on_death=workforce.replace_dead(store, options.policy, console.say, console.warn),
        )
    if code == EXIT_STORE_UNREACHABLE:  # a worker waited past the outage bound: this process would too
        raise outage.unreachable(store.target)
    console.say(f"trained {progress.runs_done} run(s) in {time.monotonic() - started:.0f} s")
    workforce.say_dead(
        store.requeue_dead(options.policy), console.say, console.warn
    )  # a worker that crashed left its run RUNNING
    if code:
        console.warn(f"a worker exited with code {code}; see {log_dir}/")
    return code, progress.runs_done


def train_here(
    store: Store,
    progress: coordinator.Progress,
    policy: RetryPolicy,
    console: Console,
    places: resume.Places | None = None,
    pack: int | None = None,
    session: Session | None = None,
) -> int:
    """The worker loop in this process, its events shown as progress lines. A worker that would
    be replaced (memory, another replica count) runs again here, up to MAX_WORKER_RESTARTS times, in
    one worker session (`session`, or a fresh one), as this process keeps its compiled model.
    """
    from sweep.run import worker
    from sweep.train.session import Session

    session = session if session is not None else Session()

    def show(event: events.Event) -> None:
        line = coordinator.format_event(event, progress)
        if line:
            console.say(line)

    for _ in range(coordinator.MAX_WORKER_RESTARTS + 1):
        code = worker.work(store, show, policy, own_process=False, places=places, pack=pack, session=session)
        if code == worker.EXIT_INTERRUPTED:  # Ctrl-C: the run is queued again; the caller stops as on any
            raise KeyboardInterrupt
        if code not in coordinator.RESTART_CODES:
            return code
    return code


def _warn_foreign(store: Store, runs: list[RunSpec], console: Console) -> None:
    foreign = store.unplanned(runs)
    if foreign:
        console.say(
            f"note: the store also holds {len(foreign)} run(s) not in this grid file "
            f"(an earlier version of it?); they stay in runs.csv and epochs.csv"
        )


def _finish(
    store: Store, runs: list[RunSpec], results: Path, options: Options, console: Console, trained: int
) -> Ended:
    """Export the tables, say how the sweep stands, write the report."""
    runs_csv, epochs_csv = store.export_csv(results)
    planned = {s.run_id for s in runs} | set(store.search_slots())
    counts = store.counts(planned)
    console.say(f"status: {counts_text(counts)}")
    failed = [(rid, t) for rid, t in store.current().items() if rid in planned and status_of(t) is RunStatus.FAILED]
    for run_id, trial in failed:
        error = (trial.user_attrs.get(vocab.ERROR) or "").strip().splitlines()
        console.warn(f"FAILED {run_id}: {error[-1] if error else 'no error text'}")
    console.say(f"results: {runs_csv} and {epochs_csv}")
    written = write_report(results, options.report, console) if options.report else None
    return Ended(
        EXIT_FAILED if failed else EXIT_OK,
        counts,
        runs_csv,
        epochs_csv,
        written[0] if written else None,
        written[1] if written else None,
        trained,
    )


def write_report(results: Path, report: Reporter, console: Console) -> tuple[Path, Path] | None:
    """The report of one results folder. A report problem is shown but never changes the run's exit code."""
    try:
        written = report(results)
    except Exception as err:  # the runs are safe in the CSVs; `sweep report` can be run again by hand
        console.warn(f"warning: report not written ({type(err).__name__}: {err}); retry with `sweep report {results}`")
        return None
    for line in written.summary:
        console.say(line)
    console.say(f"report: {written.html} (and report.md beside it)")
    return written.markdown, written.html


def counts_text(counts: dict[RunStatus, int]) -> str:
    """ "2 done, 0 running, ..."; pruned (learning-rate search trials only) when there are any."""
    return ", ".join(f"{counts[s]} {s}" for s in vocab.STATUSES if s is not RunStatus.PRUNED or counts[s])


# --- joining a sweep started elsewhere


def join(target: str, name: str, options: Options = Options(), console: Console = Console()) -> int:
    """`sweep worker`: train the queued runs of an existing sweep in this process (its events as lines
    on stdout, for a coordinator), or, with workers or devices, in worker processes whose logs go to
    <results>/logs (results: default results/<name>).
    """
    from sweep.run import worker

    if not storage.is_database(target) and not Path(target).exists():
        raise UsageError(
            redact(f"--storage {target}: no such journal file; start the sweep with `sweep run GRID` first", target)
        )
    store = open_store(target, name, create=False)
    if options.workers is None and options.devices is None:
        places = resume.places(target, name, options.results, options.keep_models)
        return worker.work(store, policy=options.policy, places=places, pack=options.pack)
    queued = store.queued()
    if not queued:
        console.say(f"{name}: no queued runs; nothing to do")
        return EXIT_OK
    crew = workforce.crew(store, queued, options.devices, options.workers, options.trials_per_gpu)
    if crew.note:
        console.say(crew.note)
    slots = crew.slots
    console.say(f"{name}: {len(queued)} queued run(s); starting {len(slots)} worker(s){workforce.devices_note(slots)}")
    progress = coordinator.Progress(runs_total=len(queued), epochs_total=_epochs(queued))
    results = options.results or Path("results") / name
    return coordinator.run_workers(
        target,
        name,
        progress,
        results / vocab.LOG_DIR,
        slots=slots,
        threads=crew.threads,
        policy=options.policy,
        say=console.say,
        flags=workforce.worker_flags(results, options.keep_models, options.pack),
        on_death=workforce.replace_dead(store, options.policy, console.say, console.warn),
    )
