"""benchmarks.common.machine.append_table: every benchmark's Markdown record keeps its header once and every row."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.common import machine
from benchmarks.costs import sweep_against


@pytest.mark.unit
def test_the_header_is_written_once_and_every_row_is_kept(tmp_path: Path) -> None:
    out = tmp_path / "new" / "bench.md"  # its folder is made too
    machine.append_table(out, "# Title\n\n| a |\n|---|\n", "| 1 |\n")
    machine.append_table(out, "# Title\n\n| a |\n|---|\n", "| 2 |\n| 3 |\n")
    assert out.read_text(encoding="utf-8") == "# Title\n\n| a |\n|---|\n| 1 |\n| 2 |\n| 3 |\n"


@pytest.mark.unit
def test_whole_sweeps_against_another_checkout_append_to_one_table(tmp_path: Path) -> None:
    out = tmp_path / "records_against.md"
    sweep_against.write("| first |\n", out)
    sweep_against.write("| second |\n", out)
    text = out.read_text(encoding="utf-8")
    assert text == sweep_against.HEADER + "| first |\n| second |\n"
