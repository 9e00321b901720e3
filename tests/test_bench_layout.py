"""benchmarks/ grouped by question (benchmarks/GROUP/MODULE.py): no module named like one of the standard
library's or of `sweep`, and every runnable module runs both by its path and as a module, from the
repository's root, with nothing on PYTHONPATH.

A file run by its path has its own folder first on sys.path, so a module beside it named like one of the
standard library's hides that one from every import in the process: benchmarks/queue.py was imported by
`concurrent.futures` as `queue`, and `python benchmarks/load.py` failed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

BENCHMARKS = REPO / "benchmarks"
# What each runnable module does first (benchmarks/__init__.py): by its path, the checkout's root replaces the
# module's own folder at the head of sys.path, so `benchmarks` and `sweep` are this checkout's and no module
# beside it can hide another.
BOOTSTRAP = """import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])
"""
# Run by recal_speed from a folder of its own with PYTHONPATH at the checkout it times, which may be another.
FROM_PYTHONPATH = {"benchmarks/costs/recal_pass.py"}


def modules() -> list[Path]:
    return sorted(BENCHMARKS.rglob("*.py"))


def runnable() -> list[Path]:
    return [path for path in modules() if 'if __name__ == "__main__":' in path.read_text(encoding="utf-8")]


def sweep_names() -> set[str]:
    """The names of sweep's modules and subpackages (records, tables, pack, backends, queue, ...)."""
    found = {p.stem if p.is_file() else p.name for p in (REPO / "sweep").rglob("*") if p.suffix in (".py", "")}
    return found - {"__init__", "__main__", "__pycache__"}


@pytest.mark.unit
def test_no_benchmark_module_or_group_is_named_like_a_standard_library_or_sweep_module() -> None:
    assert {"queue", "records", "tables", "pack", "backends"} <= sys.stdlib_module_names | sweep_names()
    names = ({path.stem for path in modules()} | {path.parent.name for path in modules()}) - {"__init__"}
    assert sorted(names & set(sys.stdlib_module_names)) == []
    assert sorted(names & sweep_names()) == []


@pytest.mark.unit
def test_benchmarks_are_grouped_one_folder_deep() -> None:
    """benchmarks/GROUP/MODULE.py, each group a package: what BOOTSTRAP's parents[2] and `-m` rely on."""
    depths = {str(path.relative_to(BENCHMARKS)) for path in modules() if len(path.relative_to(BENCHMARKS).parts) != 2}
    assert depths == {"__init__.py"}
    groups = {path.parent for path in modules()} - {BENCHMARKS}
    assert sorted(group.name for group in groups if not (group / "__init__.py").is_file()) == []


@pytest.mark.unit
def test_each_runnable_module_puts_the_checkouts_root_first_before_it_imports_the_checkout() -> None:
    assert len(runnable()) >= 20, "the runnable modules were not found"
    wrong = []
    for path in runnable():
        name, text = str(path.relative_to(REPO)), path.read_text(encoding="utf-8")
        if name in FROM_PYTHONPATH:
            assert BOOTSTRAP not in text and "from benchmarks" not in text and "\nfrom sweep" not in text, name
            continue
        imports = [text.find(word) for word in ("\nfrom benchmarks", "\nfrom sweep", "\nimport sweep")]
        first = min((at for at in imports if at >= 0), default=len(text))
        if BOOTSTRAP not in text or first < text.index(BOOTSTRAP):
            wrong.append(name)
    assert wrong == [], "each runnable module starts with BOOTSTRAP, before it imports benchmarks or sweep"


@pytest.mark.system  # 25 modules, each --help twice in a fresh Python: about 35 s on 2 cores
def test_each_runnable_module_answers_help_by_its_path_and_as_a_module() -> None:
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    failed = []
    for path in runnable():
        by_path = str(path.relative_to(REPO))
        as_module = by_path[: -len(".py")].replace("/", ".")
        helps = {}
        for argv in ([by_path], ["-m", as_module]):
            done = subprocess.run(
                [sys.executable, *argv, "--help"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
            )
            helps[" ".join(argv)] = done.stdout
            if done.returncode != 0 or not done.stdout.startswith("usage: "):
                failed.append(f"python {' '.join(argv)} --help: exit {done.returncode}\n{done.stderr.strip()[-800:]}")
        if len(set(helps.values())) != 1:
            failed.append(f"{by_path}: its --help differs between the two forms")
    assert failed == [], "\n".join(failed)
