"""A journal file is recognised before anything is written to it, read without writing by the commands that
only read, and repaired of any line that is not a record, wherever it is, with a copy kept beside it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import TINY_GRID, sweep_here, write_grid

from sweep import cli, vocab
from sweep.config import load_grid
from sweep.config.plan import plan
from sweep.store import Store, epochs_of

REMOVED_MARK = ".removed-"  # <journal>.removed-<UTC time>, as docs/security.md names the copy

SECRET = "Pw SecretCx"
# Files given as --storage that are no journal, and what the refusal says they look like
NOT_JOURNALS = {
    "store.url": (f"postgresql://u:{SECRET}@127.0.0.1:1/db\n".encode(), "this file holds a database URL"),
    "dsn.txt": (f"host=h user=u password='{SECRET}'\n".encode(), "this file holds a libpq connection string"),
    "grid.yaml": (b"name: tiny\nseeds: [0]\n", "this file holds text"),
    "data.json": (b'{"study": "tiny"}\n', "this file holds JSON that is no journal record"),
    "image.png": (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "this file holds binary data"),
    "store.db": (b"SQLite format 3\x00" + bytes(100), "this file is an SQLite database"),
}
GARBAGE = (b"this line is no record\n", b'{"op_code": 5, "trial_id"\n')  # an edit; two writes glued


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `folder`: its bytes and its modification time."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(NOT_JOURNALS))
@pytest.mark.parametrize("command", ["status", "run", "export"])
def test_a_file_that_is_no_journal_is_refused_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str, command: str
) -> None:
    """`--storage ~/.sweep-db` with the @ forgotten: one line naming what the file holds (never its text),
    exit 2, and the file, like everything else, unchanged.
    """
    monkeypatch.chdir(tmp_path)
    write_grid(tmp_path, TINY_GRID, "sweep.yaml")
    data, says = NOT_JOURNALS[name]
    (tmp_path / name).write_bytes(data)
    before = _snapshot(tmp_path)
    extra = ["--no-train"] if command == "run" else []
    assert cli.main([command, "sweep.yaml", "--storage", name, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {name}: {says}") and err.count("\n") == 1, err
    assert SECRET not in err and "Secret" not in err
    assert _snapshot(tmp_path) == before  # the file's bytes and time, and no lock, folder or results beside it


@pytest.mark.unit
def test_a_url_file_given_without_its_at_says_what_to_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write_grid(tmp_path, TINY_GRID)
    (tmp_path / ".sweep-db").write_bytes(NOT_JOURNALS["store.url"][0])
    assert cli.main(["status", "grid.yaml", "--storage", ".sweep-db"]) == 2
    assert capsys.readouterr().err == (
        "error: .sweep-db: this file holds a database URL, not a journal: did you mean --storage @.sweep-db?; "
        "an Optuna journal holds one JSON record per line\n"
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    "name, meant", [(".sweep-db", "a database URL"), ("store.sqlite", "a database"), (".pgpass", "secrets")]
)
def test_an_empty_file_named_for_a_url_is_refused_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str, meant: str
) -> None:
    """The README's `--storage @~/.sweep-db` without its `@`, the URL not written yet: not taken for a journal."""
    monkeypatch.chdir(tmp_path)
    write_grid(tmp_path, TINY_GRID)
    (tmp_path / name).touch()
    before = (tmp_path / name).stat()
    for command in (["status"], ["run", "--no-train"]):
        assert cli.main([command[0], "grid.yaml", "--storage", name, *command[1:]]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {name}: this empty file's name says it is meant to hold {meant}, not a journal")
        assert f"--storage @{name}" in err and err.count("\n") == 1, err
    after = (tmp_path / name).stat()
    assert (after.st_size, after.st_mtime_ns) == (0, before.st_mtime_ns)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["grid.yaml", name])


@pytest.mark.unit
@pytest.mark.parametrize("name", ["journal.log", "sweeps.jsonl", "my_dbt_runs.log", "adb.journal"])
def test_an_empty_file_with_a_journals_name_is_a_journal_not_yet_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.chdir(tmp_path)
    write_grid(tmp_path, TINY_GRID)
    (tmp_path / name).touch()
    assert cli.main(["run", "grid.yaml", "--storage", name, "--no-train"]) == 0
    assert (tmp_path / name).stat().st_size > 0


@pytest.mark.unit
def test_a_journal_that_cannot_be_read_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write_grid(tmp_path, TINY_GRID)
    (tmp_path / "folder.log").mkdir()
    for command in (["status"], ["run", "--no-train"]):
        assert cli.main([command[0], "grid.yaml", "--storage", "folder.log", *command[1:]]) == 2
        err = capsys.readouterr().err
        assert err == "error: folder.log: cannot be read as a journal: Is a directory\n", err
    assert cli.main(["export", "grid.yaml", "--storage", "folder.log"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: folder.log: no such journal file") and err.count("\n") == 1, err


def _queued_journal(tmp_path: Path) -> Path:
    """A real journal: the tiny grid's runs queued, one claimed with an epoch recorded."""
    journal = tmp_path / "results" / "tiny" / vocab.JOURNAL_FILE
    store = Store.open(journal, "tiny")
    store.enqueue(plan(load_grid(write_grid(tmp_path, TINY_GRID))))
    lease = store.claim_next()
    assert lease is not None
    store.record_epoch(lease, {**dict.fromkeys(vocab.EPOCH_METRICS, 0.5), "epoch": 1, "step": 10})
    return journal


@pytest.mark.unit
@pytest.mark.parametrize("command", [["status", "grid.yaml"], ["status", "results/tiny"], ["export", "grid.yaml"]])
def test_a_command_that_only_reads_the_store_never_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    """Not even the repair of a last line cut off mid-write (another process may be writing it)."""
    journal = _queued_journal(tmp_path)
    with open(journal, "ab") as handle:
        handle.write(b'{"op_code": 8, "worker_id": "w", "trial_id": 0, "user_attr": {"epo')
    before = (journal.read_bytes(), journal.stat().st_mtime_ns)
    monkeypatch.chdir(tmp_path)
    assert cli.main(command) == 0
    assert "1 running, " in capsys.readouterr().out
    assert (journal.read_bytes(), journal.stat().st_mtime_ns) == before
    assert sorted(p.name for p in journal.parent.iterdir() if "journal" in p.name) == [vocab.JOURNAL_FILE]


def _insert(journal: Path, middle: bytes, end: bytes) -> list[bytes]:
    """`middle` after the journal's third line, `end` after its last; returns its lines before."""
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(b"".join([*lines[:3], middle, *lines[3:], end]))
    return lines


@pytest.mark.unit
def test_lines_that_are_no_record_are_removed_wherever_they_are_and_kept_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Opened to be written (as `run` and a worker open it): the lines go, a copy stays, one line says so."""
    from sweep.run.stores import open_store

    journal = _queued_journal(tmp_path)
    lines = _insert(journal, *GARBAGE)
    store = open_store(str(journal), "tiny", create=True)
    assert journal.read_bytes() == b"".join(lines)  # every record kept, in order
    copies = list(journal.parent.glob(f"{vocab.JOURNAL_FILE}{REMOVED_MARK}*"))
    assert len(copies) == 1 and copies[0].read_bytes() == b"".join(GARBAGE)
    assert capsys.readouterr().err == (
        f"note: {journal}: removed 2 line(s) that are no journal record ({sum(map(len, GARBAGE))} bytes: a crash "
        f"mid-write, or an edit); the records around them are kept, and the removed lines are in {copies[0]}\n"
    )
    assert [len(epochs_of(t)) for t in store.trials()] == [1, 0]


@pytest.mark.unit
def test_a_record_glued_to_a_cut_write_is_kept_in_its_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A write cut mid-line, then a whole record appended right after it by a writer that did not repair first:
    the cut bytes go (kept in the copy), the record stays where it was, and the note says so.
    """
    from sweep.run.stores import open_store

    journal = _queued_journal(tmp_path)
    lines = journal.read_bytes().splitlines(keepends=True)
    cut = b'{"op_code": 5, "trial_id": 0, "us'
    glued = [*lines[:3], cut + lines[3], *lines[4:]]  # the fourth record glued to a cut one
    journal.write_bytes(b"".join(glued))
    store = open_store(str(journal), "tiny", create=True)
    assert journal.read_bytes() == b"".join(lines)  # every record kept, in order, the glued one too
    (copy,) = journal.parent.glob(f"{vocab.JOURNAL_FILE}{REMOVED_MARK}*")
    assert copy.read_bytes() == cut + lines[3]  # the damaged line as it was
    err = capsys.readouterr().err
    assert "removed 1 line(s) that are no journal record" in err and "1 whole record(s) glued to their ends" in err
    assert [len(epochs_of(t)) for t in store.trials()] == [1, 0]
    with open(journal, "ab") as handle:  # the same at the end, while the store is open: kept before the next append
        handle.write(cut + lines[-1])
    store.record_epoch(store.claim_next(), {**dict.fromkeys(vocab.EPOCH_METRICS, 0.75), "epoch": 1, "step": 10})
    assert journal.read_bytes().startswith(b"".join([*lines, lines[-1]]))


@pytest.mark.unit
def test_a_whole_bad_last_line_written_while_the_store_is_open_is_removed_before_the_next_append(
    tmp_path: Path,
) -> None:
    """Optuna skips a bad line only while it is last: an append after it would make the journal unreadable."""
    journal = _queued_journal(tmp_path)
    store = Store.open(journal, "tiny")
    with open(journal, "ab") as handle:  # another process's write that is no record
        handle.write(GARBAGE[1])
    lease = store.claim_next()
    assert lease is not None
    store.record_epoch(lease, {**dict.fromkeys(vocab.EPOCH_METRICS, 0.75), "epoch": 1, "step": 10})
    assert all("op_code" in json.loads(line) for line in journal.read_bytes().splitlines())
    assert [len(epochs_of(t)) for t in Store.open(journal, "tiny").trials()] == [1, 1]


@pytest.mark.integration
def test_a_real_sweeps_journal_with_garbage_in_the_middle_and_at_the_end_reads_repairs_and_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A finished sweep's journal, damaged: `status` reads it without writing, `run` removes the two lines
    (keeping them beside it, and saying so), trains nothing again, and every record is intact.
    """
    grid = write_grid(tmp_path, TINY_GRID)
    sweep_here(grid)
    journal = tmp_path / "results" / "tiny" / vocab.JOURNAL_FILE
    recorded = {t.user_attrs[vocab.RUN_ID]: epochs_of(t) for t in Store.open(journal, "tiny").trials()}
    lines = _insert(journal, *GARBAGE)
    damaged = journal.read_bytes()
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert cli.main(["status", "grid.yaml"]) == 0
    assert "2 done, 0 running" in capsys.readouterr().out and journal.read_bytes() == damaged
    ended, said = sweep_here(grid)
    assert ended.exit_code == 0 and not ended.trained, said.text
    err = capsys.readouterr().err
    copy = next(journal.parent.glob(f"{vocab.JOURNAL_FILE}{REMOVED_MARK}*"))
    assert "removed 2 line(s) that are no journal record" in err and str(copy) in err and err.count("\n") == 1
    assert copy.read_bytes() == b"".join(GARBAGE) and journal.read_bytes() == b"".join(lines)
    assert {t.user_attrs[vocab.RUN_ID]: epochs_of(t) for t in Store.open(journal, "tiny").trials()} == recorded
    assert len(recorded) == 2 and all(len(epochs) == 2 for epochs in recorded.values())
