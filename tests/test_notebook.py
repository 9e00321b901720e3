"""notebooks/review.ipynb runs top to bottom against a committed results fixture."""

from __future__ import annotations

import nbformat
import pytest
from conftest import REPO
from nbclient import NotebookClient

pytestmark = pytest.mark.system

NOTEBOOK = REPO / "notebooks" / "review.ipynb"


def test_review_notebook_executes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCHSWEEP_RESULTS", str(REPO / "tests" / "fixtures" / "fx_bs"))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    ).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    text = "\n".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "fx_bs: 9 runs, statuses {'done': 9}" in text
    assert "4 figures" in text
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 4
    tables = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert any("eval_gap_epoch2" in t for t in tables)
    # the verdicts on fx_bs alone: C1, C6-C8 tested (each claim at its own levels), the others not
    verdicts = next(t for t in tables if "the post" in t)
    assert verdicts.count("undecided at 3 seeds (equal epochs") == 1  # C7
    assert "undecided at 3 seeds (to a target" in verdicts  # C6: seconds to its target
    assert "direction shown, size undecided" in verdicts and "supported (equal epochs" in verdicts  # C1, C8
    assert verdicts.count("not tested by this sweep") == 5
