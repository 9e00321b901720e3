"""The README stays true: every grid key documented, the Quick start commands are what CI runs."""

from __future__ import annotations

import re

from conftest import REPO
from sweep.config import field_docs


def test_readme_documents_every_grid_key() -> None:
    readme = (REPO / "README.md").read_text()
    reference = readme[readme.index("## The grid file"):readme.index("## Runs and run ids")]
    for dotted in field_docs():
        section, key = dotted.split(".")
        assert re.search(rf"^\s+{key}:", reference, re.M), f"{dotted} missing from the README's grid reference"


def test_quick_start_test_command_is_what_ci_runs() -> None:
    readme = (REPO / "README.md").read_text()
    commands = re.findall(r"```bash\n(python3 -m venv .*?)\n```", readme)
    assert len(commands) == 2, commands
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci == commands[1]
    assert ".venv/bin/python -m sweep run experiments/article.yaml --results results/article-rerun" in commands[0]
