"""Do the tests catch what breaks? Each mutation of a committed list, applied alone to a copy of the checkout at
HEAD, against the tests it names: caught (they failed), survived (they passed), or error.

    python -m benchmarks.tools.mutants                            # every mutation; writes results/bench/mutants.md
    python -m benchmarks.tools.mutants --only sweep/store --jobs 2
    python -m benchmarks.tools.mutants --list

The list (benchmarks/tools/mutants.yaml) holds realistic slips in the modules that decide what users read: each
names its module, an exact snippet that must occur once in it at HEAD (one that does not is reported stale, never
skipped silently), its replacement, the behaviour it breaks and the tests that should catch it. The checkout is
copied with `git worktree add --detach` into a temporary folder (one per job), removed at the end; nothing in the
working tree is touched, and the copy's `sweep` is the one its tests import (checked first). Each distinct test
selection runs once unmutated first: a mutation whose tests fail without it is an error, not a catch, and its
timeout is a multiple of that run's time. Then each mutation is written, its tests run with `python -m pytest -x
-q -p no:cacheprovider` (the default tiers, unit and integration, unless it names a marker), and the file is put
back. Outcomes: caught (tests failed), survived (tests passed), error (timeout, collection error, no test
collected, or tests failing unmutated), stale. The table goes to the terminal as it runs and to `--out`. Exit 0
when it ran, survivors included; 2 for bad input (the list, a pattern that matches nothing), with one line.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import contextlib
import datetime
import os
import queue
import re
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from benchmarks.common import machine

PROGRAM = "benchmarks.tools.mutants"
LIST = Path(__file__).with_name("mutants.yaml")
OUT = machine.REPO / "results" / "bench" / "mutants.md"
DEFAULT_MARKER = "not system"
PYTEST = ("-m", "pytest", "-x", "-q", "-p", "no:cacheprovider")
TIMEOUT_FACTOR, MIN_TIMEOUT = 4.0, 60.0  # a mutation's tests may take 4x their unmutated run, at least 60 s
UNMUTATED_TIMEOUT = 600.0
CAUGHT, SURVIVED, ERROR, STALE = "caught", "survived", "error", "stale"
FIELDS = {"id", "module", "old", "new", "breaks", "tests", "marker", "k"}
REQUIRED = ("id", "module", "old", "new", "breaks", "tests")


class BadInput(Exception):
    """The list or the command line cannot be run: one line, naming the place."""


@dataclass(frozen=True)
class Selection:
    """The tests a mutation names: pytest's arguments, and its -m and -k expressions."""

    tests: tuple[str, ...]
    marker: str = DEFAULT_MARKER
    k: str = ""

    def args(self) -> list[str]:
        return [*self.tests, "-m", self.marker, *(["-k", self.k] if self.k else [])]

    def words(self) -> str:
        marker = f" -m {self.marker!r}" if self.marker != DEFAULT_MARKER else ""
        return " ".join(self.tests) + marker + (f" -k {self.k!r}" if self.k else "")


@dataclass(frozen=True)
class Mutation:
    id: str
    module: str
    old: str
    new: str
    breaks: str
    selection: Selection


@dataclass(frozen=True)
class Result:
    mutation: Mutation
    outcome: str
    line: int | None = None  # where the snippet starts at HEAD; None when stale
    seconds: float = 0.0
    note: str = ""  # why stale or an error; the failing test of a catch


@dataclass
class Run:
    """What the tests of one selection did: pytest's exit code (None: killed at the timeout), its seconds, its tail."""

    code: int | None
    seconds: float
    tail: str = ""
    failed: str = ""  # the first failing test's node id, where pytest names one


# --- the list


def load(path: Path) -> list[Mutation]:
    """The mutations of a list file, checked: each entry's fields, unique ids, tests given."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise BadInput(f"{path}: cannot be read as YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(raw, list) or not raw:
        raise BadInput(f"{path}: must be a non-empty list of mutations")
    mutations = [parse(entry, f"{path}[{i}]") for i, entry in enumerate(raw)]
    seen: set[str] = set()
    for m in mutations:
        if m.id in seen:
            raise BadInput(f"{path}: id {m.id!r} is given twice")
        seen.add(m.id)
    return mutations


def parse(entry: Any, where: str) -> Mutation:
    if not isinstance(entry, dict):
        raise BadInput(f"{where}: must be a mapping of {', '.join(REQUIRED)}")
    unknown = sorted(set(entry) - FIELDS)
    missing = [name for name in REQUIRED if not entry.get(name)]
    if unknown or missing:
        what = f"unknown field(s) {', '.join(unknown)}" if unknown else f"missing {', '.join(missing)}"
        raise BadInput(f"{entry.get('id', where)}: {what}")
    texts = {name: entry[name] for name in ("id", "module", "old", "new", "breaks")}
    if not all(isinstance(v, str) for v in texts.values()) or entry["old"] == entry["new"]:
        raise BadInput(f"{entry['id']}: id, module, old, new and breaks must be text, and new must differ from old")
    tests = entry["tests"]
    if isinstance(tests, str) or not isinstance(tests, list) or not all(isinstance(t, str) and t for t in tests):
        raise BadInput(f"{entry['id']}: tests must be a list of test files or node ids")
    if Path(entry["module"]).is_absolute() or ".." in Path(entry["module"]).parts:
        raise BadInput(f"{entry['id']}: module must be a path inside the repository, got {entry['module']}")
    selection = Selection(tuple(tests), str(entry.get("marker") or DEFAULT_MARKER), str(entry.get("k") or ""))
    return Mutation(texts["id"], texts["module"], texts["old"], texts["new"], texts["breaks"], selection)


def only(mutations: list[Mutation], pattern: str | None) -> list[Mutation]:
    """The mutations whose module path (or id) the regular expression `pattern` finds."""
    if pattern is None:
        return mutations
    try:
        found = re.compile(pattern)
    except re.error as err:
        raise BadInput(f"--only {pattern!r}: not a regular expression ({err})") from None
    chosen = [m for m in mutations if found.search(m.module) or found.search(m.id)]
    if not chosen:
        raise BadInput(f"--only {pattern!r}: no mutation's module or id matches")
    return chosen


def locate(text: str | None, mutation: Mutation) -> tuple[int | None, str]:
    """The line (1-based) where the mutation's snippet starts in `text` (its module at HEAD, None: no such file),
    or None and why it is stale.
    """
    if text is None:
        return None, f"{mutation.module} is not in the checkout"
    count = text.count(mutation.old)
    if count != 1:
        return None, "its snippet is not in the module" if count == 0 else f"its snippet occurs {count} times"
    return text[: text.index(mutation.old)].count("\n") + 1, ""


def mutated(text: str, mutation: Mutation) -> str:
    return text.replace(mutation.old, mutation.new, 1)


def outcome_of(run: Run, unmutated: Run | None) -> tuple[str, str]:
    """The outcome of a mutation's tests, and a note: pytest exit 1 is a catch, 0 a survivor; a timeout, a
    collection error (2), a usage error (4), no test collected (5), or tests that fail unmutated are errors.
    """
    if unmutated is not None and unmutated.code != 0:
        return ERROR, f"its tests fail without the mutation (exit {unmutated.code})"
    if run.code is None:
        return ERROR, f"timed out after {run.seconds:.0f} s"
    if run.code == 1:
        return CAUGHT, run.failed
    if run.code == 0:
        return SURVIVED, ""
    why = {2: "interrupted (a collection error)", 4: "pytest usage error", 5: "no test collected"}
    return ERROR, f"pytest exit {run.code}: {why.get(run.code, 'internal error')}"


FAILED_LINE = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def first_failed(output: str) -> str:
    match = FAILED_LINE.search(output)
    return match.group(1) if match else ""


# --- the copies


class Copy:
    """A worktree of the checkout at HEAD in a temporary folder, where mutations are written and tested."""

    def __init__(self, repo: Path, commit: str) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="mutants-"))
        self.repo = repo
        self._stamp = int(time.time())
        self._live: subprocess.Popen[str] | None = None  # the tests running in it now
        self._stopped = False
        git(repo, "worktree", "add", "--detach", "--quiet", str(self.root), commit)

    def stop(self) -> None:
        """Kill the tests running in the copy (their whole process group) and start no more."""
        self._stopped = True
        if self._live is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._live.pid, signal.SIGKILL)

    @property
    def stopped(self) -> bool:
        return self._stopped

    def remove(self) -> None:
        git(self.repo, "worktree", "remove", "--force", str(self.root), check=False)
        if self.root.exists():  # git refused (a worktree half made): the folder is ours all the same
            subprocess.run(["rm", "-rf", "--", str(self.root)], check=False)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        return env | {"PYTHONPATH": str(self.root)}

    def read(self, module: str) -> str | None:
        path = self.root / module
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def write(self, module: str, text: str) -> None:
        """Write a module, its mtime a second past any it had before: Python recompiles it, even where the
        mutation leaves its size as it was within the same second (a cached .pyc is judged by mtime and size).
        """
        path = self.root / module
        path.write_text(text, encoding="utf-8")
        self._stamp = max(self._stamp + 1, int(time.time()) + 1)
        os.utime(path, (self._stamp, self._stamp))

    def imports_its_own_sweep(self) -> str:
        """Where the copy's Python finds `sweep`; raises unless it is the copy's own."""
        done = subprocess.run(
            [sys.executable, "-c", "import sweep; print(sweep.__file__)"],
            cwd=self.root,
            env=self.env(),
            capture_output=True,
            text=True,
            check=False,
        )
        found = done.stdout.strip()
        if done.returncode != 0 or not Path(found).resolve().is_relative_to(self.root.resolve()):
            raise BadInput(f"the copy imports sweep from {found or done.stderr.strip()[-200:]}, not from {self.root}")
        return found

    def pytest(self, selection: Selection, timeout: float) -> Run:
        """The selection's tests in the copy, the whole process group killed at the timeout."""
        command = [sys.executable, *PYTEST, *selection.args()]
        if self._stopped:
            return Run(None, 0.0, "stopped")
        start = time.monotonic()
        with subprocess.Popen(
            command,
            cwd=self.root,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        ) as process:
            self._live = process
            try:
                output, _ = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                output, _ = process.communicate()
                return Run(None, time.monotonic() - start, output[-2000:])
            finally:
                self._live = None
        return Run(process.returncode, time.monotonic() - start, output[-2000:], first_failed(output))


def git(repo: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        said = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
        raise BadInput(f"git {' '.join(args)}: {said[-1]}")
    return done.stdout


def at_head(repo: Path, commit: str, module: str) -> str | None:
    """A module's text at the commit (None where the commit has no such file)."""
    done = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{module}"], capture_output=True, check=False)
    return done.stdout.decode("utf-8") if done.returncode == 0 else None


@contextlib.contextmanager
def copies(repo: Path, commit: str, jobs: int) -> Iterator[list[Copy]]:
    made: list[Copy] = []
    try:
        for _ in range(jobs):
            made.append(Copy(repo, commit))
        yield made
    finally:  # also on Ctrl-C or SIGTERM: the tests still running are killed, the copies removed
        for copy in made:
            copy.stop()
        for copy in made:
            copy.remove()


# --- running


@dataclass
class Progress:
    """The terminal's lines, one per mutation as it ends, in the order they end."""

    total: int
    say: Callable[[str], None] = print
    done: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def tell(self, result: Result) -> None:
        with self.lock:
            self.done += 1
            self.say(f"[{self.done:>3}/{self.total}] {row_text(result)}")


def row_text(r: Result) -> str:
    where = f"{r.mutation.module}:{r.line}" if r.line else r.mutation.module
    note = f"  ({r.note})" if r.note and r.outcome != CAUGHT else ""
    return f"{r.outcome:<8} {r.seconds:6.1f} s  {r.mutation.id:<32} {where}{note}"


def run_unmutated(pool: list[Copy], selections: list[Selection], say: Callable[[str], None]) -> dict[Selection, Run]:
    """Each distinct selection's tests once, unmutated, spread over the copies."""
    runs: dict[Selection, Run] = {}

    def one(copy: Copy, selection: Selection) -> None:
        run = copy.pytest(selection, UNMUTATED_TIMEOUT)
        runs[selection] = run
        state = "passed" if run.code == 0 else f"exit {run.code} {run.failed}".rstrip()
        say(f"  unmutated {run.seconds:6.1f} s  {state:<8} {selection.words()}")

    spread(pool, selections, one)
    return runs


def spread(pool: list[Copy], items: Sequence[Any], work: Callable[[Copy, Any], None]) -> None:
    """`work(copy, item)` for every item, each copy taking the next item as it is free."""
    todo: queue.Queue[Any] = queue.Queue()
    for item in items:
        todo.put(item)

    def worker(copy: Copy) -> None:
        while not copy.stopped:
            try:
                item = todo.get_nowait()
            except queue.Empty:
                return
            work(copy, item)

    threads = [threading.Thread(target=worker, args=(copy,), daemon=True) for copy in pool]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):  # joined with a timeout, so Ctrl-C reaches this thread
        for thread in threads:
            thread.join(timeout=0.5)


def test_one(copy: Copy, mutation: Mutation, unmutated: Run | None, timeout: float | None) -> Result:
    """Write the mutation into the copy, run its tests, put the module back."""
    text = copy.read(mutation.module)
    line, why = locate(text, mutation)
    if line is None or text is None:
        return Result(mutation, STALE, note=why)
    if unmutated is not None and unmutated.code != 0:
        return Result(mutation, ERROR, line, note=outcome_of(unmutated, unmutated)[1])
    limit = timeout or max(MIN_TIMEOUT, TIMEOUT_FACTOR * (unmutated.seconds if unmutated else MIN_TIMEOUT))
    copy.write(mutation.module, mutated(text, mutation))
    try:
        run = copy.pytest(mutation.selection, limit)
    finally:
        copy.write(mutation.module, text)
    outcome, note = outcome_of(run, unmutated)
    return Result(mutation, outcome, line, run.seconds, note)


def run_all(
    mutations: list[Mutation], repo: Path, commit: str, jobs: int, timeout: float | None, unmutated_first: bool
) -> list[Result]:
    progress = Progress(len(mutations))
    results: dict[str, Result] = {}
    with copies(repo, commit, jobs) as pool:
        print(f"copies of {commit[:7]}: {', '.join(str(c.root) for c in pool)}")
        print(f"their tests import sweep from {pool[0].imports_its_own_sweep()}")
        live = [m for m in mutations if locate(at_head(repo, commit, m.module), m)[0] is not None]
        selections = list(dict.fromkeys(m.selection for m in live))
        baseline: dict[Selection, Run] = {}
        if unmutated_first and selections:
            print(f"the tests of {len(selections)} selections, unmutated:")
            baseline = run_unmutated(pool, selections, print)
        print(f"{len(mutations)} mutations:")

        def one(copy: Copy, mutation: Mutation) -> None:
            try:
                result = test_one(copy, mutation, baseline.get(mutation.selection), timeout)
            except Exception as err:  # noqa: BLE001 - one mutation's failure is its row, not the end of the run
                result = Result(mutation, ERROR, note=f"the tool failed: {type(err).__name__}: {err}")
            if not copy.stopped:  # a row from a copy being removed would be no outcome
                results[mutation.id] = result
                progress.tell(result)

        spread(pool, mutations, one)
    return [results[m.id] for m in mutations]


# --- the record


def score(results: Sequence[Result]) -> dict[str, int]:
    return {kind: sum(r.outcome == kind for r in results) for kind in (CAUGHT, SURVIVED, ERROR, STALE)}


def score_line(results: Sequence[Result]) -> str:
    counts = score(results)
    tested = counts[CAUGHT] + counts[SURVIVED] + counts[ERROR]
    share = f" ({100 * counts[CAUGHT] / tested:.0f}% of those tested)" if tested else ""
    return (
        f"caught {counts[CAUGHT]} of {len(results)}{share}; survived {counts[SURVIVED]}, error {counts[ERROR]}, "
        f"stale {counts[STALE]}"
    )


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(results: Sequence[Result], header: dict[str, str]) -> str:
    """The record: what ran where, the score, the survivors and errors named, and one row per mutation."""
    lines = ["# Mutation testing: do the tests catch what breaks?", ""]
    lines += [f"- {name}: {value}" for name, value in header.items()]
    lines += [f"- score: {score_line(results)}", ""]
    for kind, title in ((SURVIVED, "Survivors"), (ERROR, "Errors"), (STALE, "Stale entries")):
        named = [r for r in results if r.outcome == kind]
        if named:
            lines += [f"## {title}", ""]
            lines += [f"- `{r.mutation.id}` {_where(r)}: {r.mutation.breaks}{_note(r)}" for r in named]
            lines.append("")
    lines += ["## Every mutation", "", "| id | module:line | breaks | tests | outcome | seconds |", "|---" * 6 + "|"]
    for r in results:
        outcome = r.outcome + (f" ({r.note})" if r.note else "")
        cells = (r.mutation.id, _where(r), r.mutation.breaks, r.mutation.selection.words(), outcome)
        lines.append("| " + " | ".join(map(cell, cells)) + f" | {r.seconds:.1f} |")
    return "\n".join(lines) + "\n"


def _where(r: Result) -> str:
    return f"{r.mutation.module}:{r.line}" if r.line else r.mutation.module


def _note(r: Result) -> str:
    return f" ({r.note})" if r.note else ""


def listing(mutations: Sequence[Mutation], repo: Path, commit: str) -> list[str]:
    lines = []
    for m in mutations:
        line, why = locate(at_head(repo, commit, m.module), m)
        where = f"{m.module}:{line}" if line else f"{m.module} (stale: {why})"
        lines.append(f"{m.id:<32} {where}\n    breaks: {m.breaks}\n    tests: {m.selection.words()}")
    return lines


# --- the command


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=f"python -m {PROGRAM}",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--only", metavar="PATTERN", help="only the mutations whose module path (or id) matches")
    parser.add_argument("--list", action="store_true", help="list the mutations and where each applies; run nothing")
    parser.add_argument("--jobs", type=int, default=1, help="mutations tested at once, each in its own copy (1)")
    parser.add_argument(
        "--timeout", type=float, help=f"seconds per mutation (default {TIMEOUT_FACTOR:g}x its tests' unmutated time)"
    )
    parser.add_argument("--no-unmutated", action="store_true", help="skip running each test selection unmutated")
    parser.add_argument("--mutations", type=Path, default=LIST, help="the list (benchmarks/tools/mutants.yaml)")
    parser.add_argument("--out", type=Path, default=OUT, help="the Markdown record (results/bench/mutants.md)")
    args = parser.parse_args(argv)
    if args.jobs < 1 or (args.timeout is not None and args.timeout <= 0):
        raise BadInput("--jobs must be at least 1 and --timeout positive")
    return args


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    try:
        args = arguments(argv)
        mutations = only(load(args.mutations), args.only)
        repo = machine.REPO
        commit = git(repo, "rev-parse", "HEAD").strip()
        if args.list:
            print("\n".join(listing(mutations, repo, commit)))
            return 0
        started, clock = datetime.datetime.now(), time.monotonic()
        signal.signal(signal.SIGTERM, _interrupt)  # a stop cleans up as Ctrl-C does
        results = run_all(mutations, repo, commit, args.jobs, args.timeout, not args.no_unmutated)
    except BadInput as err:
        print(f"mutants: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mutants: stopped; the copies are removed and nothing is written", file=sys.stderr)
        return 130
    wall = time.monotonic() - clock
    header = {
        "date": started.strftime("%Y-%m-%d %H:%M"),
        "commit": commit[:7],
        "command": f"python -m {PROGRAM} {shlex.join(sys.argv[1:] if argv is None else argv)}".rstrip(),
        "machine": f"{machine.describe()}; load average {machine.load_average():.2f} at the end",
        "wall time": f"{wall / 60:.1f} min with {args.jobs} job(s), each selection's tests run unmutated first"
        if not args.no_unmutated
        else f"{wall / 60:.1f} min with {args.jobs} job(s)",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(markdown(results, header), encoding="utf-8")
    print(f"{score_line(results)}; {wall / 60:.1f} min; written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
