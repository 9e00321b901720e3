"""Every `sweep` command shown in a shell block of README.md, CONTRIBUTING.md, experiments/README.md and
docs/*.md is run here for real, or is named with the tests that run it (MAPPED: those needing a PostgreSQL
server or a Slurm cluster, a second backend, a 20-minute study). A command a page gains that is in neither
table below fails here before anything runs.

The commands run as a reader types them, page after page in one folder: each shown once (the README's
table is repeated in docs/commands.md), as a subprocess of the installed console script, and must exit
with the code the page shows. What makes them cheap is said per command: overrides after the grid file
that shrink a sweep to the 30-second smoke size, flags at the end (the last of a flag given twice wins),
reference results copied from the checkout's results/. What the pages name stands for something real
here: `grid.yaml` is experiments/smoke.yaml, `@db.url` and `@~/.sweep-db` (HOME is a folder of the test)
are files naming a journal, NAME is smoke, /tmp/... a folder inside the test's, and `.venv/` is the
environment running the tests.

The benchmarks' commands (`python -m benchmarks.GROUP.MODULE`, `python benchmarks/GROUP/MODULE.py`) shown on
those pages, on results/README.md and results/bench/*.md, and in the benchmark modules' docstrings, inline or
in blocks, each run here with `--help` in the form shown, and every option shown with one must be in its help.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, cli_env


def pages() -> list[Path]:
    return [
        REPO / "README.md",
        REPO / "CONTRIBUTING.md",
        *sorted((REPO / "docs").glob("*.md")),
        REPO / "experiments" / "README.md",
    ]


SHELL_BLOCKS = ("bash", "sh", "shell", "console", "zsh", "")  # a fence's language; yaml, python, text are not typed
FENCE = re.compile(r"^(\s*)(```+)\s*([\w-]*)\s*$")
SEPARATORS = {"&&", "||", ";", "|", "&", "(", ")", ">", ">>", "<", ">&", "&>"}
ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Shown:
    """One `sweep` command of a page: the words before it that set the environment, the program as written
    (`sweep`, `.venv/bin/sweep`, `python -m sweep`), its arguments, and whether it stands in a script shown
    as a file (a block starting `#!`) rather than typed.
    """

    page: str
    line: int
    env: tuple[str, ...]
    program: str
    args: tuple[str, ...]
    in_script: bool = False

    @property
    def command(self) -> str:
        """The command as the tables below name it: `sweep` for whichever program runs it."""
        return " ".join((*self.env, "sweep", *self.args))

    def where(self) -> str:
        return f"{self.page}:{self.line}: {self.command}"


def blocks(text: str) -> list[tuple[int, str, list[str]]]:
    """(first line number, language, lines) of each fenced block, the fence's indentation taken off."""
    found, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, ticks, language = opening.groups()
        body, i, start = [], i + 1, i + 2
        while i < len(lines) and not re.match(rf"^\s*{ticks}\s*$", lines[i]):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        found.append((start, language, body))
        i += 1
    return found


def commands_in(text: str, page: str) -> list[Shown]:
    """The `sweep` commands of a page's shell blocks: lines continued by a backslash joined, comments
    dropped, each command of a `&&` (or `;`, `|`) list read on its own.
    """
    shown = []
    for first, language, body in blocks(text):
        if language not in SHELL_BLOCKS:
            continue
        in_script = bool(body) and body[0].startswith("#!")
        number, logical = first, []
        pending = ""
        for offset, raw in enumerate(body):
            if not pending:
                number = first + offset
            if raw.rstrip().endswith("\\"):
                pending += raw.rstrip()[:-1] + " "
                continue
            logical.append((number, pending + raw))
            pending = ""
        for number, line in logical:
            segment: list[str] = []
            for word in [*_words(line), ";"]:
                if word not in SEPARATORS:
                    segment.append(word)
                    continue
                found = _sweep_command(segment)
                if found:
                    env, program, args = found
                    shown.append(Shown(page, number, env, program, args, in_script))
                segment = []
    return shown


def _words(line: str) -> list[str]:
    """A line's words as the shell splits them, `&&`, `|`, `>` and the like words of their own, a comment
    dropped; a line the shell could not read (a listing of files in a block without a language) by spaces.
    """
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:
        return line.split("#")[0].split()


def _sweep_command(words: list[str]) -> tuple[tuple[str, ...], str, tuple[str, ...]] | None:
    at = 0
    while at < len(words) and ENV_WORD.match(words[at]):
        at += 1
    env, words = words[:at], words[at:]
    if not words:
        return None
    program, rest = words[0], words[1:]
    if program == "sweep" or program.endswith("/sweep"):
        return tuple(env), program, tuple(rest)
    if Path(program).name in ("python", "python3") and rest[:2] == ["-m", "sweep"]:
        return tuple(env), f"{program} -m sweep", tuple(rest[2:])
    return None


def shown_commands() -> list[Shown]:
    return [c for page in pages() for c in commands_in(page.read_text(encoding="utf-8"), str(page.relative_to(REPO)))]


# --- how each command is run here


@dataclass(frozen=True)
class Cheap:
    """How a shown command runs here. `overrides` go after the grid file and any overrides shown, `flags`
    at the end; `first` are sweep commands run before it (each must exit 0), `copied` the results folders
    copied from the checkout's results/ first (the reference results the pages read); `code` is the exit
    code the page shows.
    """

    overrides: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    first: tuple[tuple[str, ...], ...] = ()
    copied: tuple[str, ...] = ()
    code: int = 0


AS_SHOWN = Cheap()
# experiments/smoke.yaml's size: 8 classes of 20 images at 16x16, one seed, one epoch
SMALL = ("seeds=[0]", "train.epochs=1", "data.classes=8", "data.samples_per_class=20", "data.image_size=16")
SHRUNK = Cheap(overrides=SMALL)
DRY_RUN = Cheap(flags=("--dry-run",))  # prints the batch script: no Slurm here (tests/test_slurm.py submits)
# what `sweep slurm experiments/causes.yaml ...` queues before it submits: the runs the array's tasks train
CAUSES_QUEUED = Cheap(first=(("run", "experiments/causes.yaml", "--no-train", "--storage", "@~/.sweep-db"),))
PLACEHOLDERS = {"NAME": "smoke"}  # docs/cluster.md's sweep name: grid.yaml's (experiments/smoke.yaml)
OUTSIDE = {"/tmp/own_model_study": "own_model_study"}  # a folder outside the checkout: here, inside the test's

RUN: dict[str, Cheap] = {
    # README: Quick start (the folder's .venv/bin/sweep) and Commands; docs/commands.md repeats them
    "sweep run experiments/article.yaml --results results/article-rerun": SHRUNK,
    "sweep plan experiments/article.yaml": AS_SHOWN,
    "sweep run experiments/article.yaml": SHRUNK,
    "sweep run experiments/article.yaml train.epochs=1 seeds=[0] --results results/quick": SHRUNK,
    "sweep status experiments/article.yaml": AS_SHOWN,
    # a one-seed grid starts from two seeds; a cap of 2 stops there
    "sweep run experiments/article.yaml --until-decided --max-seeds 30": Cheap(SMALL, ("--max-seeds", "2")),
    "sweep report results/article": AS_SHOWN,
    # --gpus 1: without it `time` times each replica count in a child process that reads the grid file
    # without the overrides (the full 120 classes), so the overrides would not shrink it
    "sweep time experiments/article.yaml": Cheap(SMALL, ("--repeats", "1", "--gpus", "1", "--max-load", "inf")),
    "sweep worker --storage results/article/journal.log --study article": AS_SHOWN,
    "sweep run experiments/article.yaml --no-train": SHRUNK,
    "sweep slurm experiments/article.yaml --array 4 --storage @~/.sweep-db": DRY_RUN,
    "sweep export experiments/article.yaml": AS_SHOWN,
    "sweep export results/article --tensorboard runs/article": AS_SHOWN,
    "sweep export results/article --mlflow sqlite:///mlflow.db": AS_SHOWN,
    "sweep status results/article": AS_SHOWN,
    # docs/cluster.md (the workers.md lines without comments are the same commands)
    "sweep run grid.yaml --no-train --storage @db.url": AS_SHOWN,
    "sweep worker --study NAME --storage @db.url": AS_SHOWN,
    "sweep slurm grid.yaml --array 8 --storage @db.url": DRY_RUN,
    "sweep slurm experiments/causes.yaml --array 8 --storage @~/.sweep-db --partition gpu --gpus-per-task 1 "
    "--time 4:00:00 --requeue": DRY_RUN,
    "sweep status experiments/causes.yaml --storage @~/.sweep-db": CAUSES_QUEUED,
    "sweep export experiments/causes.yaml --storage @~/.sweep-db": CAUSES_QUEUED,
    "sweep report results/causes": Cheap(copied=("causes",)),
    "sweep export results/causes --tensorboard runs/causes": AS_SHOWN,
    # docs/report.md
    "sweep report results/article results/batch_sizes results/causes results/gpus --out results/reference": Cheap(
        copied=("article", "batch_sizes", "causes", "gpus")
    ),
    # docs/study.md (and its Quick start in docs/data.md, docs/commands.md); the plan runs the quiet timing
    "sweep study experiments/own_model/my_grid.yaml --plan --results /tmp/own_model_study": Cheap(
        flags=("--repeats", "1")
    ),
    "sweep plan /tmp/own_model_study/grid.yaml": AS_SHOWN,
    "sweep advise results/study": Cheap(copied=("study",)),
    # docs/workers.md: the CPU stands in for GPU ids; the runs are grid.yaml's two, trained by the first
    "sweep run grid.yaml --workers 1": AS_SHOWN,
    "sweep run grid.yaml --devices 0,2": AS_SHOWN,
    "sweep run grid.yaml --devices 0 --trials-per-gpu 3": AS_SHOWN,
    "sweep run grid.yaml --pack 3": AS_SHOWN,
    "sweep run grid.yaml": AS_SHOWN,
    "sweep slurm experiments/causes.yaml --array 8 --storage @~/.sweep-db --gpus-per-task 1 --time 4:00:00 "
    "--requeue": DRY_RUN,
}

# Commands other system tests run, each with those tests: they need a service this test does not start, or
# load a second backend for runs another test trains the same way
MAPPED: dict[str, tuple[str, ...]] = {
    # docs/backends.md: the smoke grid on JAX, trained twice there (and on torch)
    "KERAS_BACKEND=jax sweep run experiments/smoke.yaml --results results/smoke-jax": (
        "tests/test_backends.py::test_the_smoke_grid_runs_on_the_backend_and_gives_the_same_records_twice",
    ),
    # docs/workers.md, "Several machines": a PostgreSQL store
    "sweep run experiments/article.yaml --storage postgresql://USER:PASSWORD@DBHOST/sweeps": (
        "tests/test_secrets_everywhere.py::test_a_store_url_with_a_password_trains_reports_and_exports_without_showing_it",
        "tests/test_resume.py::test_postgres_two_workers_one_killed_every_run_done_once",
    ),
    "sweep worker --storage postgresql://USER:PASSWORD@DBHOST/sweeps --study article --devices 0,1": (
        "tests/test_secrets_everywhere.py::test_a_store_url_in_the_environment_through_slurm_and_a_standalone_worker",
        "tests/test_cli.py::test_worker_coordinating_a_sweep_writes_its_logs_under_results",
    ),
    # docs/study.md: a whole study (about 20 minutes), the same example cut to tiny data there
    "sweep study experiments/own_model/my_grid.yaml --results results/study --workers 2": (
        "tests/test_study_run.py::test_a_tiny_study_of_the_own_model_example_plans_trains_reports_and_advises",
    ),
    # docs/cluster.md: the batch script `sweep slurm` writes, its workers started by Slurm
    "sweep worker --study causes --retries 1 --max-requeues 3 --storage @/home/me/.sweep-db": (
        "tests/test_slurm.py::test_a_job_array_trains_every_run_exactly_once",
    ),
}


# --- the tables cover the pages


@pytest.mark.unit
def test_the_parser_reads_commands_as_a_shell_would() -> None:
    page = (
        "Text with `sweep run x.yaml` inline.\n\n"
        "```bash\n"
        "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/sweep run a.yaml --results r  # note\n"
        "sweep plan a.yaml seeds=[0]     # the runs\n"
        "squeue --me\n"
        "echo 'postgresql://U:P@H/db' > ~/.sweep-db && chmod 600 ~/.sweep-db\n"
        "KERAS_BACKEND=jax python -m sweep slurm a.yaml --array 8 \\\n"
        "    --time 4:0\n"
        "```\n\n"
        "1. In a list:\n\n"
        "   ```bash\n"
        "   sweep worker --study s\n"
        "   ```\n\n"
        "```yaml\nname: sweep run\n```\n\n"
        "```bash\n#!/bin/bash\n/opt/.venv/bin/python -m sweep worker --study s\n```\n"
    )
    found = [(c.line, c.env, c.program, c.command, c.in_script) for c in commands_in(page, "p.md")]
    assert found == [
        (4, (), ".venv/bin/sweep", "sweep run a.yaml --results r", False),
        (5, (), "sweep", "sweep plan a.yaml seeds=[0]", False),
        (
            8,
            ("KERAS_BACKEND=jax",),
            "python -m sweep",
            "KERAS_BACKEND=jax sweep slurm a.yaml --array 8 --time 4:0",
            False,
        ),
        (15, (), "sweep", "sweep worker --study s", False),
        (24, (), "/opt/.venv/bin/python -m sweep", "sweep worker --study s", True),
    ]


@pytest.mark.unit
def test_every_shown_command_is_run_here_or_mapped_to_a_test() -> None:
    shown = shown_commands()
    assert len(shown) > 40, "the pages' shell blocks were not found"
    neither = [c.where() for c in shown if c.command not in RUN and c.command not in MAPPED]
    assert neither == [], "shown, but neither run by tests/test_doc_commands.py (RUN) nor mapped to a test (MAPPED)"
    gone = sorted((set(RUN) | set(MAPPED)) - {c.command for c in shown})
    assert gone == [], "in the tables but on no page any more"
    assert set(RUN) & set(MAPPED) == set()


@pytest.mark.unit
def test_each_mapped_command_names_tests_that_exist() -> None:
    missing = []
    for command, tests in MAPPED.items():
        assert tests, command
        for test in tests:
            path, _, name = test.partition("::")
            tree = ast.parse((REPO / path).read_text(encoding="utf-8")) if (REPO / path).is_file() else None
            names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)} if tree else set()
            if name not in names:
                missing.append(f"{command} -> {test}")
    assert missing == []


@pytest.mark.unit
def test_the_pages_show_the_installed_sweep_command() -> None:
    """Typed commands use the console script (`sweep`, or `.venv/bin/sweep` before the environment is
    active); `python -m sweep` appears only in a script shown as `sweep slurm` writes it.
    """
    typed = [c for c in shown_commands() if not c.in_script]
    assert [f"{c.where()} ({c.program})" for c in typed if c.program not in ("sweep", ".venv/bin/sweep")] == []


# --- the commands run


@pytest.fixture
def desk(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A folder as a reader's checkout (experiments/, .venv) with the files the pages name, and the
    environment the commands run in: this environment's scripts first on PATH, HOME a folder of its own.
    """
    work, home = tmp_path / "work", tmp_path / "home"
    shutil.copytree(REPO / "experiments", work / "experiments")
    shutil.copy(REPO / "experiments" / "smoke.yaml", work / "grid.yaml")
    (work / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    home.mkdir()
    for holder, journal in ((work / "db.url", work / "queued"), (home / ".sweep-db", work / "cluster")):
        holder.write_text(f"{journal / 'journal.log'}\n")  # the store a page's URL names, here a journal
        holder.chmod(0o600)
    scripts = Path(sys.executable).parent
    assert (scripts / "sweep").is_file(), f"no console script {scripts / 'sweep'}: pip install -e ."
    env = cli_env(HOME=str(home), PATH=f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return work, env


def _here(word: str) -> str:
    """A placeholder's stand-in; a path outside the checkout moved into the test's folder."""
    for outside, inside in OUTSIDE.items():
        if word == outside or word.startswith(outside + "/"):
            return inside + word[len(outside) :]
    return PLACEHOLDERS.get(word, word)


def _argv(shown: Shown, cheap: Cheap) -> tuple[list[str], dict[str, str]]:
    """The program as the page writes it, the arguments with their placeholders replaced and the
    overrides and flags added.
    """
    args = [_here(word) for word in shown.args]
    if cheap.overrides:
        at = 2  # after COMMAND GRID
        while at < len(args) and "=" in args[at] and not args[at].startswith("-"):
            at += 1
        args[at:at] = cheap.overrides
    program = shown.program.split()
    return [*program, *args, *cheap.flags], dict(word.split("=", 1) for word in shown.env)


@pytest.mark.system  # 33 commands, 13 of them loading TensorFlow: 5 minutes on 2 cores shared with other work
def test_every_shown_command_runs_and_exits_as_shown(desk: tuple[Path, dict[str, str]]) -> None:
    work, env = desk
    failed, ran = [], set()
    for shown in shown_commands():
        if shown.command in MAPPED or shown.command in ran:
            continue
        ran.add(shown.command)
        cheap = RUN[shown.command]
        for name in cheap.copied:
            shutil.rmtree(work / "results" / name, ignore_errors=True)
            shutil.copytree(REPO / "results" / name, work / "results" / name)
        for before in cheap.first:
            done = subprocess.run(["sweep", *before], cwd=work, env=env, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stdout + done.stderr
        argv, extra = _argv(shown, cheap)
        result = subprocess.run(argv, cwd=work, env={**env, **extra}, capture_output=True, text=True, timeout=300)
        if result.returncode != cheap.code:
            output = (result.stdout + result.stderr).strip().splitlines()[-8:]
            failed.append(f"{shown.where()}\n  ran: {shlex.join(argv)}\n  exit {result.returncode}, shown {cheap.code}")
            failed.extend(f"    {line}" for line in output)
    assert ran == set(RUN)
    assert failed == [], "\n".join(failed)


# --- the benchmarks' commands: each shown benchmark answers --help, with every option it is shown with

BENCHMARK_COMMAND = re.compile(
    r"(?<![\w./-])(?:[\w.-]*/)*python3?\s+(-m\s+benchmarks(?:\.\w+)+|benchmarks/[\w/]+\.py)\b([^`#\n]*)"
)
FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]*")


@dataclass(frozen=True)
class BenchmarkCommand:
    """A benchmark's command as a page shows it: `python -m benchmarks.GROUP.MODULE ARGS` or `python
    benchmarks/GROUP/MODULE.py ARGS`, with any python (`.venv/bin/python`, `../peers-venv/bin/python`).
    """

    page: str
    line: int
    target: str  # `-m benchmarks.x.y` or `benchmarks/x/y.py`, as shown
    args: str

    @property
    def by_path(self) -> bool:
        return self.target.endswith(".py")

    @property
    def module(self) -> str:
        return self.target[: -len(".py")].replace("/", ".") if self.by_path else self.target.split()[-1]

    @property
    def program(self) -> str:
        return f"python {self.target}" if self.by_path else f"python -m {self.module}"

    def flags(self) -> list[str]:
        return FLAG.findall(self.args)

    def where(self) -> str:
        return f"{self.page}:{self.line}: {self.program} {self.args}".rstrip()


def _spans_joined(text: str) -> list[tuple[int, str]]:
    """The text's lines, each with its number; a line whose inline code goes on to the next line (an odd
    number of backticks) is joined with it, up to three lines. A fence's three backticks are not counted.
    """
    joined: list[tuple[int, str]] = []
    pending: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        pending.append(line)
        if " ".join(pending).replace("```", "").count("`") % 2 == 0 or len(pending) == 3:
            joined.append((number - len(pending) + 1, " ".join(pending)))
            pending = []
    return joined + ([(len(text.splitlines()) - len(pending) + 1, " ".join(pending))] if pending else [])


def benchmark_commands_in(text: str, page: str) -> list[BenchmarkCommand]:
    return [
        BenchmarkCommand(page, number, " ".join(match.group(1).split()), match.group(2).strip())
        for number, line in _spans_joined(text)
        for match in BENCHMARK_COMMAND.finditer(line)
    ]


def benchmark_pages() -> list[tuple[str, str]]:
    """(name, text) of every page that can show a benchmark's command: the pages above, results/README.md,
    the benchmarks' results (results/bench/), and each benchmark module's docstring.
    """
    files = [*pages(), REPO / "results" / "README.md", *sorted((REPO / "results" / "bench").rglob("*.md"))]
    shown = [(str(page.relative_to(REPO)), page.read_text(encoding="utf-8")) for page in files if page.is_file()]
    for module in sorted((REPO / "benchmarks").rglob("*.py")):
        docstring = ast.get_docstring(ast.parse(module.read_text(encoding="utf-8")), clean=False)
        shown.append((str(module.relative_to(REPO)), docstring or ""))
    return shown


def benchmark_commands() -> list[BenchmarkCommand]:
    return [command for name, text in benchmark_pages() for command in benchmark_commands_in(text, name)]


def runnable(module: str) -> bool:
    """A module of benchmarks/ that runs as a program: its file exists and has a `__main__` block."""
    path = REPO.joinpath(*module.split(".")).with_suffix(".py")
    return path.is_file() and 'if __name__ == "__main__":' in path.read_text(encoding="utf-8")


@pytest.mark.unit
def test_the_parser_reads_benchmark_commands_in_inline_code_code_blocks_and_usage_lines() -> None:
    page = (
        "Run `python -m benchmarks.costs.levers --repeats 2` (15 minutes) or, in a venv of its own,\n"
        "`../peers-venv/bin/python -m benchmarks.peers.peer_bench\n--grid benchmarks/quick.yaml` from the root.\n\n"
        "```bash\n"
        "KERAS_BACKEND=jax .venv/bin/python -m benchmarks.tools.device_check results/x   # a few minutes\n"
        "```\n\n"
        "    python benchmarks/speed/load.py [--points 1000] [--train --workers 4]\n\n"
        "Not commands: `benchmarks/speed/workers.py`, `python -m sweep run`, `python -m benchmarks.<group>.<x>`.\n"
    )
    found = [(c.line, c.program, c.module, c.args, c.flags()) for c in benchmark_commands_in(page, "p.md")]
    assert found == [
        (1, "python -m benchmarks.costs.levers", "benchmarks.costs.levers", "--repeats 2", ["--repeats"]),
        (
            2,
            "python -m benchmarks.peers.peer_bench",
            "benchmarks.peers.peer_bench",
            "--grid benchmarks/quick.yaml",
            ["--grid"],
        ),
        (6, "python -m benchmarks.tools.device_check", "benchmarks.tools.device_check", "results/x", []),
        (
            9,
            "python benchmarks/speed/load.py",
            "benchmarks.speed.load",
            "[--points 1000] [--train --workers 4]",
            ["--points", "--train", "--workers"],
        ),
    ]


@pytest.mark.unit
def test_every_shown_benchmark_command_names_a_benchmark_that_runs() -> None:
    """A moved or renamed benchmark leaves no page showing its old command (the system test below runs each)."""
    shown = benchmark_commands()
    assert len(shown) > 60, "the pages' benchmark commands were not found"
    assert [c.where() for c in shown if not runnable(c.module)] == []


@pytest.mark.system  # each shown benchmark's --help in a fresh Python, both forms where shown: about 30 s on 2 cores
def test_every_shown_benchmark_command_answers_help_with_the_options_it_is_shown_with() -> None:
    """Each shown benchmark, in the form shown (by its path or as a module), from the repository's root with
    nothing on PYTHONPATH, exits 0 on `--help`, and every `--option` shown with it is in that help. Run for
    real they take minutes to hours each; tests/test_bench*.py run their parts.
    """
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    helps: dict[str, subprocess.CompletedProcess] = {}
    failed = []
    for shown in benchmark_commands():
        if shown.program not in helps:
            argv = [sys.executable, *shown.program.split()[1:], "--help"]
            helps[shown.program] = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        done = helps[shown.program]
        if done.returncode != 0:
            failed.append(f"{shown.where()}\n  --help exited {done.returncode}: {done.stderr.strip()[-500:]}")
            continue
        unknown = [flag for flag in shown.flags() if not re.search(rf"(?<![\w-]){flag}(?![\w-])", done.stdout)]
        failed.extend(f"{shown.where()}\n  {flag}: not in its --help" for flag in unknown)
    assert failed == [], "\n".join(failed)
