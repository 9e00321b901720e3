"""The README and docs stay true: every grid key documented, the Quick start commands are what CI runs."""

from __future__ import annotations

import re
from pathlib import Path

import layers
import pytest
import yaml
from conftest import REPO

from sweep.config import declared

pytestmark = pytest.mark.unit


def grid_file_reference() -> str:
    grid = (REPO / "docs" / "grid.md").read_text()
    section = grid[grid.index("## The grid file") : grid.index("## Runs and run ids")]
    return section[section.index("```yaml\n") + len("```yaml\n") : section.index("```\n")]


def test_the_grid_reference_lists_every_key_with_its_default_and_doc() -> None:
    reference = grid_file_reference()
    assert declared.readme_keys() in reference, (
        "docs/grid.md's keys differ from sweep/config/keys.py: paste declared.readme_keys()"
    )
    base = yaml.safe_load(reference)["base"]
    every = declared.declarations()
    listed = {f"{s}.{key}": value for s, values in base.items() for key, value in values.items()}
    assert {name: every[name].check(value) for name, value in listed.items()} == {  # [] read as ()
        name: k.default for name, k in every.items()
    }


def test_quick_start_test_command_is_what_ci_runs() -> None:
    readme = (REPO / "README.md").read_text()
    commands = re.findall(r"```bash\n(python3 -m venv .*?)\n```", readme)
    assert len(commands) == 2, commands
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert commands[1] in ci
    assert ci[-1] == ".venv/bin/python -m pytest -m system --require-services"
    assert ".venv/bin/sweep run experiments/article.yaml --results results/article-rerun" in commands[0]


def test_the_article_sweep_time_quoted_is_the_reference_runs() -> None:
    """The Quick start, docs/measured.md and experiments/README.md quote one time for the article sweep, and
    it is what the committed reference run took: its training span plus at most 1.5 minutes of
    TensorFlow's start and the report. An old time left in one place fails here.
    """
    import pandas as pd

    readme = (REPO / "README.md").read_text()
    quick = float(re.search(r"run the article sweep \(about ([\d.]+) minutes", readme).group(1))
    doc = (REPO / "docs" / "measured.md").read_text()
    measured = float(re.search(r"`experiments/article.yaml` \(\d+ runs.*?\): ([\d.]+) min wall", doc, re.S).group(1))
    table = (REPO / "experiments" / "README.md").read_text()
    listed = float(re.search(r"^\| `article.yaml` \|.*\| ([\d.]+) min \|$", table, re.M).group(1))
    assert quick == measured == listed
    runs = pd.read_csv(REPO / "results" / "article" / "runs.csv")
    span = pd.to_datetime(runs["finished"]).max() - pd.to_datetime(runs["started"]).min()
    minutes = span.total_seconds() / 60
    assert minutes <= quick <= minutes + 1.5, (quick, round(minutes, 2))


def _minutes_and_seconds(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60} s" if whole >= 60 else f"{whole} s"


def test_the_test_times_quoted_are_the_measured_ones() -> None:
    """README and CONTRIBUTING.md quote the default run's and the unit tier's times; they are the runs
    saved in results/bench (pytest's own total for the default run, /usr/bin/time's wall for the unit tier).
    """
    bench = REPO / "results" / "bench"
    default = float(re.search(r"passed, \d+ deselected, .* in ([\d.]+)s", (bench / "tests_default.txt").read_text())[1])
    wall = re.search(r"under /usr/bin/time -v: (\d+):([\d.]+) wall", (bench / "tests_unit.txt").read_text())
    unit = 60 * int(wall[1]) + float(wall[2])
    contributing = (REPO / "CONTRIBUTING.md").read_text()
    readme = (REPO / "README.md").read_text()
    assert f"the default: {_minutes_and_seconds(default)}" in contributing
    assert f"the inner loop: {_minutes_and_seconds(unit)}" in contributing
    assert f"unit and integration tiers ({_minutes_and_seconds(default)} on 2 cores)" in readme
    assert f"({_minutes_and_seconds(default)} of tests\non 2 cores" in readme
    assert f"`pytest -m unit` the unit tier ({_minutes_and_seconds(unit)})" in readme


def test_the_install_without_tensorflow_lists_every_other_dependency() -> None:
    """docs/backends.md's command for a JAX or torch machine without TensorFlow names pyproject's dependencies, each
    at its declared bound, less the two TensorFlow lines: one added to pyproject and not there fails here.
    """
    import tomllib

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    wanted = sorted(d for d in declared if not d.startswith("tensorflow"))
    backends = (REPO / "docs" / "backends.md").read_text()
    command = re.search(r"^pip install --no-deps -e \. && pip install (.*) jax$", backends, re.M)
    assert command is not None
    assert sorted(re.findall(r"'([^']+)'", command[1])) == wanted


def test_report_docs_say_how_each_claim_is_read_as_the_code_reads_it() -> None:
    """docs/report.md's table of readings names, per claim, the numbers `Claim.reads` decides it on."""
    from sweep.claims.findings import Reads
    from sweep.claims.registry import CLAIMS

    text = (REPO / "docs" / "report.md").read_text(encoding="utf-8")
    section = text[text.index("## How each claim is read") : text.index("## The error budget")]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| (C\d) \| [^|]+ \| ([^|]+) \|$", section, re.M)}
    words = {
        Reads.SYMPTOM: "symptom (raw",
        Reads.GENERALISATION: "recalibrated where recorded",
        Reads.TIME: "quiet `sweep time`",
    }
    assert {c.id: words[c.reads] in rows.get(c.id, "") for c in CLAIMS} == {c.id: True for c in CLAIMS}
    budget = text[text.index("## The error budget") :]
    assert "Error control is per claim" in budget[:100] and "intersection-union" in budget
    assert "Maps decide nothing" in budget and "Benjamini-Hochberg" in budget


def test_readme_says_the_error_control_the_code_applies() -> None:
    from sweep.analysis.estimates import ALPHA
    from sweep.claims.family import levels
    from sweep.claims.findings import Rule

    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    holds, fails = levels([object(), object()], Rule.ALL)  # type: ignore[list-item]
    assert (holds, fails * 2) == (ALPHA, ALPHA)
    assert f"each check at {ALPHA:g} to hold, {ALPHA:g} / k to fail for a claim of k checks" in readme


def _markdown_files() -> list[Path]:
    docs = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
    return [*docs, REPO / "experiments" / "README.md"]


def test_every_relative_link_and_named_file_in_readme_and_docs_exists() -> None:
    """A link [text](path) or a backticked repository path (`sweep/run/worker.py`, `docs/cluster.md`) that
    names nothing is a reader's dead end, and the layout has moved before.
    """
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
    named = re.compile(r"`((?:sweep|docs|tests|benchmarks|experiments|notebooks)/[\w./-]+\.(?:py|md|yaml|ipynb))`")
    missing = []
    for page in _markdown_files():
        text = page.read_text(encoding="utf-8")
        for target in link.findall(text):
            if "://" not in target and not target.startswith("mailto:") and not (page.parent / target).exists():
                missing.append(f"{page.relative_to(REPO)}: {target}")
        for path in named.findall(text):
            if not (REPO / path).exists():
                missing.append(f"{page.relative_to(REPO)}: {path}")
    assert missing == []


def test_the_design_pages_module_tables_are_the_modules_docstrings() -> None:
    """docs/design.md's module tables are `python tests/layers.py --markdown`: every module, its layer and the first
    sentence of its docstring, so a module added, moved or re-described shows there or fails here.
    """
    page = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    assert layers.generated(page) == layers.markdown(), "paste `python tests/layers.py --markdown` into design.md"


def test_the_design_page_is_a_map_of_about_two_pages() -> None:
    """The flow, the layers, where each concept lives and the recipes in about two pages (the generated tables
    aside); the detail is docs/internals.md's. Each recipe names only files that exist.
    """
    page = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    prose = page.replace(layers.generated(page), "")
    assert len(prose.split()) < 1600, len(prose.split())
    recipes = prose[prose.index("## Recipes") : prose.index("## Modules")]
    named = re.findall(r"`((?:sweep|tests|experiments)/[\w/]+\.(?:py|yaml))`", recipes)
    assert len(named) >= 12 and [path for path in named if not (REPO / path).exists()] == []
