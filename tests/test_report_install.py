"""An ordinary (non-editable) install rebuilds a committed report from its CSVs, from another working directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.system


def _verdict_lines(report: str) -> list[str]:
    """The verdict table's rows and the grids row (which names each grid's experiments file)."""
    return [line for line in report.splitlines() if line.startswith(("| C", "| grids (name:) |"))]


def test_an_installed_copy_rebuilds_the_article_report(tmp_path: Path) -> None:
    # Build from a copy of the sources: building in place would leave build/ and *.egg-info in the checkout.
    source = tmp_path / "source"
    shutil.copytree(REPO / "sweep", source / "sweep", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    # no build isolation: the venv's setuptools builds it, with no index needed
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"), str(source)],
        check=True,
        timeout=300,
    )
    (wheel,) = (tmp_path / "dist").glob("batchsweep-*.whl")
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(tmp_path / "site"), str(wheel)], check=True, timeout=300
    )

    elsewhere = tmp_path / "elsewhere"  # no sweep/ and no experiments/ here
    elsewhere.mkdir()
    shutil.copytree(
        REPO / "results" / "article",
        elsewhere / "article",
        ignore=shutil.ignore_patterns("figures", "tables", "report.*", "journal.log"),
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}  # before the venv's editable finder

    def python(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, *args], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300
        )

    where = python("-c", "import sweep; print(sweep.__file__)")
    assert Path(where.stdout.strip()) == tmp_path / "site" / "sweep" / "__init__.py", where.stderr
    done = python("-m", "sweep", "report", "article", "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    rebuilt = (tmp_path / "out" / "report.md").read_text()
    committed = (REPO / "results" / "article" / "report.md").read_text()
    claims = (REPO / "results" / "article" / "tables" / "claims.csv").read_text().splitlines()[1:]
    tested = {line.split(",")[0] for line in claims if not line.split(",")[1].startswith("not tested")}
    assert _verdict_lines(rebuilt) == _verdict_lines(committed) and len(_verdict_lines(committed)) == 1 + len(tested)
    assert "| grids (name:) | article (experiments/article.yaml) |" in rebuilt
    assert "| git commit | unknown |" in rebuilt  # the installed copy is not in a git checkout
