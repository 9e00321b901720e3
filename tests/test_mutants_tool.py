"""The mutation-testing tool's own logic (benchmarks/tools/mutants.py): its list read and checked, a snippet found
once or reported stale, pytest's exit codes read as outcomes, and its record. No process: running the tests of
each mutation is the tool's business, run by hand (`python -m benchmarks.tools.mutants`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO

from benchmarks.tools import mutants
from benchmarks.tools.mutants import CAUGHT, ERROR, STALE, SURVIVED, Mutation, Result, Run, Selection

pytestmark = pytest.mark.unit

ENTRY = """
- id: flip
  module: sweep/x.py
  old: "a < b"
  new: "a > b"
  breaks: the comparison is flipped
  tests: [tests/test_x.py]
"""


def mutation(old: str = "a < b", new: str = "a > b") -> Mutation:
    return Mutation("flip", "sweep/x.py", old, new, "the comparison is flipped", Selection(("tests/test_x.py",)))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "list.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_an_entry_is_read_with_the_default_tiers_and_its_own_marker_where_it_names_one(tmp_path: Path) -> None:
    (plain,) = mutants.load(write(tmp_path, ENTRY))
    assert plain == mutation()
    assert plain.selection.args() == ["tests/test_x.py", "-m", "not system"]
    (unit,) = mutants.load(write(tmp_path, ENTRY + "  marker: unit\n  k: flips\n"))
    assert unit.selection.args() == ["tests/test_x.py", "-m", "unit", "-k", "flips"]
    assert unit.selection.words() == "tests/test_x.py -m 'unit' -k 'flips'"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[]", "must be a non-empty list"),
        ("- id: [", "cannot be read as YAML"),
        (ENTRY.replace("  breaks: the comparison is flipped\n", ""), "flip: missing breaks"),
        (ENTRY + "  tset: [a]\n", "flip: unknown field(s) tset"),
        (ENTRY.replace("[tests/test_x.py]", "tests/test_x.py"), "flip: tests must be a list"),
        (ENTRY.replace('"a > b"', '"a < b"'), "new must differ from old"),
        (ENTRY.replace("sweep/x.py", "../x.py"), "flip: module must be a path inside the repository"),
        (ENTRY + ENTRY, "id 'flip' is given twice"),
    ],
)
def test_a_list_it_cannot_run_is_one_line_naming_the_entry(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(mutants.BadInput) as raised:
        mutants.load(write(tmp_path, text))
    assert said in str(raised.value) and "\n" not in str(raised.value)


def test_a_snippet_is_found_once_with_its_line_or_the_entry_is_stale() -> None:
    text = "x = 1\n\nif a < b:\n    pass\n"
    assert mutants.locate(text, mutation()) == (3, "")
    assert mutants.mutated(text, mutation()) == "x = 1\n\nif a > b:\n    pass\n"
    assert mutants.locate(text + "a < b\n", mutation()) == (None, "its snippet occurs 2 times")
    assert mutants.locate("if a <= b:\n", mutation()) == (None, "its snippet is not in the module")
    assert mutants.locate(None, mutation()) == (None, "sweep/x.py is not in the checkout")


def test_only_keeps_the_mutations_whose_module_or_id_matches_and_refuses_a_pattern_matching_none() -> None:
    other = Mutation("drop", "sweep/store/queue.py", "x", "y", "z", Selection(("t",)))
    assert mutants.only([mutation(), other], "store/(queue|crash)") == [other]
    assert mutants.only([mutation(), other], "^flip$") == [mutation()]
    assert mutants.only([mutation(), other], None) == [mutation(), other]
    with pytest.raises(mutants.BadInput, match="no mutation's module or id matches"):
        mutants.only([mutation()], "nowhere")
    with pytest.raises(mutants.BadInput, match="not a regular expression"):
        mutants.only([mutation()], "(")


@pytest.mark.parametrize(
    ("code", "unmutated", "outcome"),
    [
        (1, 0, CAUGHT),  # a test failed
        (0, 0, SURVIVED),  # every test passed
        (None, 0, ERROR),  # killed at the timeout
        (2, 0, ERROR),  # a collection error
        (5, 0, ERROR),  # no test collected
        (1, 1, ERROR),  # the tests fail without the mutation too: no catch
    ],
)
def test_pytests_exit_code_is_the_outcome(code: int | None, unmutated: int, outcome: str) -> None:
    assert mutants.outcome_of(Run(code, 3.0), Run(unmutated, 2.0))[0] == outcome


def test_the_failing_test_is_named_from_pytests_summary() -> None:
    output = "....F\n=== short test summary info ===\nFAILED tests/test_x.py::test_a - assert 1 == 2\n"
    assert mutants.first_failed(output) == "tests/test_x.py::test_a"
    assert mutants.first_failed("ERROR tests/test_y.py - ImportError\n") == "tests/test_y.py"
    assert mutants.first_failed("5 passed in 1.0s\n") == ""


def test_the_record_gives_the_score_names_each_survivor_and_has_a_row_per_mutation() -> None:
    survivor = Mutation("drop|term", "sweep/y.py", "x", "y", "a term is dropped", Selection(("tests/test_y.py",)))
    results = [
        Result(mutation(), CAUGHT, 3, 4.25, "tests/test_x.py::test_a"),
        Result(survivor, SURVIVED, 12, 5.0),
        Result(mutation(), STALE, note="its snippet is not in the module"),
    ]
    text = mutants.markdown(results, {"commit": "abc1234"})
    assert "- commit: abc1234\n" in text
    assert "- score: caught 1 of 3 (50% of those tested); survived 1, error 0, stale 1\n" in text
    assert "## Survivors\n\n- `drop|term` sweep/y.py:12: a term is dropped\n" in text
    stale = "- `flip` sweep/x.py: the comparison is flipped (its snippet is not in the module)\n"
    assert f"## Stale entries\n\n{stale}" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| id ")]
    assert rows[0] == (
        "| flip | sweep/x.py:3 | the comparison is flipped | tests/test_x.py | caught (tests/test_x.py::test_a) | 4.2 |"
    )
    assert rows[1].startswith("| drop\\|term | sweep/y.py:12 |")  # a bar in a cell does not split the row
    assert len(rows) == 3


def test_bad_input_exits_2_with_one_line_before_anything_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert mutants.main(["--only", "no/such/module"]) == 2
    assert mutants.main(["--jobs", "0"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "mutants: --only 'no/such/module': no mutation's module or id matches",
        "mutants: --jobs must be at least 1 and --timeout positive",
    ]


def test_the_committed_list_holds_at_least_40_mutations_of_modules_and_tests_that_exist() -> None:
    found = mutants.load(mutants.LIST)
    assert len(found) >= 40
    assert [m.module for m in found if not (REPO / m.module).is_file()] == []
    named = {test.split("::")[0] for m in found for test in m.selection.tests}
    assert sorted(test for test in named if not (REPO / test).is_file()) == []
